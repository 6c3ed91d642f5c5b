"""The MCP revisions this server speaks, and the one place that knows what each revision has.

Everything else asks a ``Revision`` (computed once per request: ``revision_of(name)``) instead of
comparing revision strings: whether it serves a method, and what its messages can carry (titles,
icons, audio, links, completions, logging, batches, statelessness). Ordering questions go through
``at_least``, so an unknown string never sorts as a newer revision.

The tables below are the registry's own, checked against the official ``mcp-types`` package's
surface map, version lists, wire constants and error codes by tests/mcp/test_revisions.py (a new
``mcp-types`` release that disagrees fails that test). The package is not imported here: importing it
builds every revision's Pydantic models, about 0.4 s of CPU in every worker and command.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

# Handshake (session) revisions, then the stateless ones (a per-request _meta envelope), oldest first.
# The extensions the endpoint declares (in capabilities.extensions), by their identifiers.
EVENTS_EXTENSION = "io.modelcontextprotocol/events"  # SEP-3415's identifier (a draft)
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"  # SEP-2640's identifier
SESSION_REVISIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_REVISIONS: tuple[str, ...] = ("2026-07-28",)
ALL_REVISIONS: tuple[str, ...] = SESSION_REVISIONS + STATELESS_REVISIONS
LATEST_SESSION_REVISION = SESSION_REVISIONS[-1]

# The client requests of the core protocol, by revision (the schema of each revision): those of
# both eras, then what each era alone has.
_BOTH_ERAS = frozenset(
    {
        "completion/complete",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "tools/list",
        "tools/call",
    }
)
_SESSION_METHODS = _BOTH_ERAS | {
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
}
_STATELESS_METHODS = _BOTH_ERAS | {"server/discover", "subscriptions/listen"}
CLIENT_REQUESTS: frozenset[tuple[str, str]] = frozenset(
    (method, name)
    for name in ALL_REVISIONS
    for method in (_STATELESS_METHODS if name in STATELESS_REVISIONS else _SESSION_METHODS)
)

# The methods of the extensions this server declares (the Skills extension, SEP-2640): not in the
# core protocol's surface map; served where a revision carries capabilities.extensions. Revisions
# before that read skills through the core resources methods alone.
EXTENSION_METHODS = frozenset({"skills/list", "skills/get", "resources/directory/read"})
# The Events extension's methods (SEP-3415, a draft): defined for 2026-07-28 and later only.
EVENTS_METHODS = frozenset(
    {"events/list", "events/poll", "events/stream", "events/subscribe", "events/unsubscribe"}
)


def at_least(name: str, minimum: str) -> bool:
    """Whether ``name`` is a revision this server knows, as new as ``minimum`` or newer (an unknown
    name is never newer)."""
    if minimum not in ALL_REVISIONS:
        raise ValueError(f"not a revision this server speaks: {minimum!r}")
    return name in ALL_REVISIONS and ALL_REVISIONS.index(name) >= ALL_REVISIONS.index(minimum)


# The revision that first carries each feature below.
_AUDIO = "2025-03-26"  # audio content, completions, JSON-RPC batches (2025-03-26 only)
_LINKS = "2025-06-18"  # resource_link, _meta on content, titles, annotations.lastModified
_ICONS = "2025-11-25"  # icons, server description and websiteUrl
_STATELESS = "2026-07-28"  # per-request _meta envelope; no initialize, ping or logging


@dataclass(frozen=True, slots=True)
class Revision:
    """What one protocol revision defines, as booleans read on the hot path."""

    name: str
    stateless: bool  # requests carry their own revision in _meta (no session)
    audio: bool
    links: bool  # resource_link content, _meta on content, annotations.lastModified
    titles: bool  # title on prompts, server info; Prompt._meta
    icons: bool
    completions: bool
    logging: bool
    batches: bool  # JSON-RPC batches in a POST body (2025-03-26 only)
    priming: bool  # an SSE stream opens with an event id and a retry interval
    extensions: bool  # capabilities.extensions (SEP-2133): the Skills extension's methods
    tool_annotations: bool  # a tool's annotations (read-only, idempotent, ...)

    def serves(self, method: str) -> bool:
        """Whether this revision has ``method`` (a client request) at all: the core protocol's
        methods, and the methods of the extensions served (where a revision declares extensions)."""
        if method in EXTENSION_METHODS:
            return self.extensions
        if method in EVENTS_METHODS:
            return self.stateless
        return (method, self.name) in CLIENT_REQUESTS

    def __str__(self) -> str:
        return self.name


@cache
def revision_of(name: str) -> Revision:
    """The revision named ``name``; only for names in ALL_REVISIONS (callers negotiate first)."""
    if name not in ALL_REVISIONS:
        raise ValueError(f"not a revision this server speaks: {name!r}")
    return Revision(
        name=name,
        stateless=name in STATELESS_REVISIONS,
        audio=at_least(name, _AUDIO),
        links=at_least(name, _LINKS),
        titles=at_least(name, _LINKS),
        icons=at_least(name, _ICONS),
        completions=at_least(name, _AUDIO),
        logging=not at_least(name, _STATELESS),
        batches=name == _AUDIO,
        priming=at_least(name, _ICONS),
        extensions=at_least(name, _STATELESS),
        tool_annotations=at_least(name, _AUDIO),
    )
