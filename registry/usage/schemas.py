"""The typed shapes of the serve ledger: what an answer served (``Served``), the key a worker counts
under, and what the questions answer."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

# Where an answer was served: MCP methods by their name, REST reads by theirs.
Surface = Literal[
    "prompts/get",
    "tools/call",
    "skills/get",
    "resources/read",
    "resources/directory/read",
    "rest/render",
    "rest/served",
]
SURFACES: tuple[str, ...] = Surface.__args__  # type: ignore[attr-defined]

# What rows may be grouped by besides the artifact (kind and name, always there), and the buckets.
DIMENSIONS = ("version", "label", "surface", "caller", "client")
BUCKETS = ("minute", "hour", "day")
CLIENT_MAX = 120  # characters of "name/version" kept; clients choose what they send


class Served(NamedTuple):
    """What one answer served: the artifact's kind and name, the version, and the label it was
    asked by ("" when asked by version)."""

    kind: str
    name: str
    version: int
    label: str


class Key(NamedTuple):
    """What a worker counts under (the minute is added when counted). The tenant is its id's
    integer, whose hash Python computes in C (a UUID's is a Python method: a key is hashed on
    every answer)."""

    tenant: int
    kind: str
    name: str
    version: int
    label: str
    surface: str
    caller: str
    client: str


class UsageRow(BaseModel):
    """Answers of one group: the dimensions asked for (``by``) are set, the others are not."""

    kind: str
    name: str
    version: int | None = None
    label: str | None = None
    surface: str | None = None
    caller: str | None = None
    client: str | None = None
    at: datetime | None = Field(default=None, description="the bucket's start, when by a time")
    answers: int
    first: datetime
    last: datetime


class UsagePage(BaseModel):
    rows: list[UsageRow]
    next_cursor: str | None = None
    # How the callers in the rows are called (key ids with their owners' names), as elsewhere.
    names: dict[str, str] = Field(default_factory=dict)
    source: str = Field(description="the table the rows were read from: minutes, hours or days")


class IdleEntry(BaseModel):
    kind: str
    name: str
    last: datetime | None = Field(description="the last answer the ledger still holds, if any")


class IdlePage(BaseModel):
    idle: list[IdleEntry]
    next_cursor: str | None = None


class Reach(BaseModel):
    """Who got what a label serves of one artifact: the blast radius of moving it."""

    kind: str
    name: str
    label: str
    days: int
    answers: int
    callers: int
    clients: int
    top_callers: list[tuple[str, int]]
    top_clients: list[tuple[str, int]]
    names: dict[str, str] = Field(default_factory=dict)


class Adoption(BaseModel):
    """How fast a label's answers moved to the version it was moved to."""

    label: str
    version: int
    moved_at: datetime
    share_now: float | None = Field(
        description="of the answers in the last hour, the new version's"
    )
    half_after_seconds: float | None = None
    most_after_seconds: float | None = Field(
        default=None, description="until 99 % of a minute's answers were the new version"
    )
