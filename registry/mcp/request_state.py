"""requestState for InputRequiredResult: an opaque token (registry.tokens) bound to who asked, for
which prompt and arguments, and short-lived (state travels through the client, so it is treated as
attacker-controlled input)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from registry.mcp.errors import InvalidParams
from registry.tokens import ExpiredToken, InvalidToken, TokenCodec

TTL_SECONDS = 600


def _digest(arguments: dict[str, Any] | None) -> str:
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _context(
    tenant_id: uuid.UUID, label: str, name: str, principal: str, arguments: dict[str, Any] | None
) -> list[str]:
    return ["prompts/get", tenant_id.hex, label, name, principal, _digest(arguments)]


def issue(
    codec: TokenCodec,
    tenant_id: uuid.UUID,
    label: str,
    name: str,
    principal: str,
    arguments: dict[str, Any] | None,
) -> str:
    return codec.issue("request-state", _context(tenant_id, label, name, principal, arguments), [])


def verify(
    codec: TokenCodec,
    token: object,
    tenant_id: uuid.UUID,
    label: str,
    name: str,
    principal: str,
    arguments: dict[str, Any] | None,
) -> None:
    context = _context(tenant_id, label, name, principal, arguments)
    try:
        codec.open("request-state", context, token, max_age=TTL_SECONDS)
    except ExpiredToken:
        raise InvalidParams("expired requestState: send the request again without it") from None
    except InvalidToken:
        raise InvalidParams(
            "invalid requestState: retry the original request as it was answered"
        ) from None
