"""prompts/list cursors: opaque tokens (registry.tokens) bound to tenant and label, short-lived."""

from __future__ import annotations

import uuid

from registry.mcp.errors import InvalidParams
from registry.tokens import ExpiredToken, InvalidToken, TokenCodec


def encode(codec: TokenCodec, tenant_id: uuid.UUID, label: str, last_name: str, size: int) -> str:
    return codec.issue("mcp-cursor", [tenant_id.hex, label], [last_name, size])


def decode(
    codec: TokenCodec, token: object, tenant_id: uuid.UUID, label: str, *, max_age_seconds: int
) -> tuple[str, int]:
    """(last name, page size) from a cursor this server issued for this tenant and label."""
    try:
        payload = codec.open("mcp-cursor", [tenant_id.hex, label], token, max_age=max_age_seconds)
    except ExpiredToken:
        raise InvalidParams("expired cursor: list again from the first page") from None
    except InvalidToken:
        payload = []
    match payload:
        case [str(last_name), int(size)] if size > 0:
            return last_name, size
    raise InvalidParams("invalid cursor: pass nextCursor back unchanged, within this session")
