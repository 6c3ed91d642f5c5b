"""List cursors (prompts/list, skills/list, resources/list): opaque tokens (registry.tokens) bound
to tenant, label and list, short-lived; one list's cursor never opens another."""

from __future__ import annotations

import uuid
from typing import NamedTuple

from registry.mcp.errors import InvalidParams
from registry.tokens import ExpiredToken, InvalidToken, TokenCodec


def _context(tenant_id: uuid.UUID, label: str, kind: str) -> list[str]:
    # The prompts list keeps the context it always had (its cursors stay valid across an upgrade).
    return [tenant_id.hex, label] if kind == "prompts" else [tenant_id.hex, label, kind]


def encode(
    codec: TokenCodec,
    tenant_id: uuid.UUID,
    label: str,
    last_name: str,
    size: int,
    *,
    kind: str = "prompts",
) -> str:
    return codec.issue("mcp-cursor", _context(tenant_id, label, kind), [last_name, size])


class Opened(NamedTuple):
    last_name: str  # the page starts after this name
    size: int  # the page's size
    expires: float  # when the cursor stops opening (the tokens' clock, ``registry.tokens.now``)


def decode(
    codec: TokenCodec,
    token: object,
    tenant_id: uuid.UUID,
    label: str,
    *,
    max_age_seconds: int,
    kind: str = "prompts",
) -> Opened:
    """Where the page starts, its size and the cursor's expiry, from a cursor this server issued
    for this tenant and label."""
    try:
        context = _context(tenant_id, label, kind)
        issued, payload = codec.open_dated("mcp-cursor", context, token, max_age=max_age_seconds)
    except ExpiredToken:
        raise InvalidParams("expired cursor: list again from the first page") from None
    except InvalidToken:
        issued, payload = 0, []
    match payload:
        case [str(last_name), int(size)] if size > 0:
            return Opened(last_name, size, issued + max_age_seconds)
    raise InvalidParams("invalid cursor: pass nextCursor back unchanged, within this session")
