"""The MCP revisions this server speaks, and the one place that knows what each revision has.

Everything else asks a ``Revision`` (computed once per request: ``revision_of(name)``) instead of
comparing revision strings: whether it serves a method, and what its messages can carry (titles,
icons, audio, links, completions, logging, batches, statelessness). Which methods exist in which
revision comes from the official ``mcp-types`` surface map; ordering questions go through its
version helper, so an unknown string never sorts as a newer revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from mcp_types.methods import CLIENT_REQUESTS
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    MODERN_PROTOCOL_VERSIONS,
    is_version_at_least,
)

# The methods of the extensions this server declares (the Skills extension, SEP-2640): not in the
# core protocol's surface map; served where a revision carries capabilities.extensions. Revisions
# before that read skills through the core resources methods alone.
EXTENSION_METHODS = frozenset({"skills/list", "skills/get", "resources/directory/read"})

SESSION_REVISIONS: tuple[str, ...] = HANDSHAKE_PROTOCOL_VERSIONS
STATELESS_REVISIONS: tuple[str, ...] = MODERN_PROTOCOL_VERSIONS
ALL_REVISIONS: tuple[str, ...] = SESSION_REVISIONS + STATELESS_REVISIONS
LATEST_SESSION_REVISION = SESSION_REVISIONS[-1]

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
        audio=is_version_at_least(name, _AUDIO),
        links=is_version_at_least(name, _LINKS),
        titles=is_version_at_least(name, _LINKS),
        icons=is_version_at_least(name, _ICONS),
        completions=is_version_at_least(name, _AUDIO),
        logging=not is_version_at_least(name, _STATELESS),
        batches=name == _AUDIO,
        priming=is_version_at_least(name, _ICONS),
        extensions=is_version_at_least(name, _STATELESS),
        tool_annotations=is_version_at_least(name, _AUDIO),
    )
