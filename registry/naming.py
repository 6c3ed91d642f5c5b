"""Names and roles every layer agrees on (pure constants, no imports from the registry)."""

from __future__ import annotations

import re
from typing import Literal

SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
SLUG_RE = re.compile(SLUG_PATTERN)
LABEL_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
LABEL_RE = re.compile(LABEL_PATTERN)
PROMPT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
PROMPT_NAME_RE = re.compile(PROMPT_NAME_PATTERN)
# A marked prompt's MCP tool name: its first TOOL_NAME_MAX characters, each of TOOL_NAME_REPLACED as
# "_". Prompt names hold [A-Za-z0-9_.:-] (above), tool names [A-Za-z0-9_-] at most 64 long (what
# clients take safely; the protocol allows 128), so "." and ":" are the characters replaced. The
# rule is applied in Python (registry.prompts.as_tools.tool_name) and by the database, which keeps a
# marked prompt's tool name on its row (prompts.tool_name, migration 0025); a test holds them equal.
TOOL_NAME_MAX = 64
TOOL_NAME_REPLACED = ".:"
MIME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$"
MIME_RE = re.compile(MIME_PATTERN)
LATEST = "latest"  # the label that moves by itself to every new version
MAX_VERSION = 2**31 - 1  # version numbers and sequence-like ids that a caller may name
MAX_SEQUENCE = 2**63 - 1  # change sequence numbers (bigint)
_ASCII_NUMBER = re.compile(r"[0-9]{1,19}")

# The registry's own keys in MCP ``_meta`` objects (a reverse-DNS prefix, as the specification asks).
META_PREFIX = "dev.prompt-registry/"
META_CONFIG = META_PREFIX + "config"  # prompts/get: the version's model config
META_ARGUMENTS = META_PREFIX + "arguments"  # prompts/list: a JSON Schema of the arguments
# An absolute URI (RFC 3986): a scheme, then only characters a URI may hold, "%" escapes complete.
ABSOLUTE_URI_RE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*"
)

Role = Literal["reader", "editor", "publisher", "admin"]
ROLE_RANK: dict[str, int] = {"reader": 0, "editor": 1, "publisher": 2, "admin": 3}


def find_nul(value: object, path: str = "") -> str | None:
    """The path of the first string holding a NUL character (PostgreSQL text cannot store one)."""
    if isinstance(value, str):
        return path or "value" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = find_nul(key, path) or find_nul(item, f"{path}.{key}" if path else str(key))
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = find_nul(item, f"{path}[{index}]")
            if found:
                return found
    return None


def ascii_number(text: str, maximum: int = MAX_VERSION) -> int | None:
    """``text`` as a whole number if it is one in ASCII digits (not "²", "٣" or "1_000") no larger
    than ``maximum``; None otherwise."""
    if not _ASCII_NUMBER.fullmatch(text):
        return None
    value = int(text)
    return value if value <= maximum else None


# Every API key starts with this (the tenant id follows), so a credential is told from a token.
API_KEY_PREFIX = "prk_"


# A change request's review events are in the change log (the change stream and webhooks carry
# them) but change nothing a label serves; applying one does (migrations/sql/0023 says the same).
REVIEW_EVENT_PREFIX = "change_request."
APPLIED_EVENT = "change_request.applied"


def serves_change(kind: str) -> bool:
    """Whether a change-log row of ``kind`` changes what the tenant serves."""
    return not kind.startswith(REVIEW_EVENT_PREFIX) or kind == APPLIED_EVENT


# Reserved after an MCP endpoint's URL (``/mcp/T/server-card``, ``/mcp/T/LABEL/server-card``): the
# endpoint's Server Card (registry.api.cards), never a label of that name.
SERVER_CARD = "server-card"
