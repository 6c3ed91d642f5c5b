"""requestState for InputRequiredResult: opaque to clients, integrity-protected, bound to who asked,
for which prompt and arguments, and short-lived (state travels through the client, so it is treated
as attacker-controlled input)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
import uuid
from typing import Any

from registry.mcp.protocol import INVALID_PARAMS, McpError

TTL_SECONDS = 600


def _digest(arguments: dict[str, Any] | None) -> str:
    canonical = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _binding(
    tenant_id: uuid.UUID, label: str, name: str, principal: str, arguments: dict[str, Any] | None
) -> list[Any]:
    return ["prompts/get", tenant_id.hex, label, name, principal, _digest(arguments)]


def issue(
    key: bytes,
    tenant_id: uuid.UUID,
    label: str,
    name: str,
    principal: str,
    arguments: dict[str, Any] | None,
) -> str:
    payload = json.dumps(
        [*_binding(tenant_id, label, name, principal, arguments), int(time.time()) + TTL_SECONDS],
        separators=(",", ":"),
    ).encode()
    tag = hmac.new(key, payload, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(payload + tag).decode().rstrip("=")


def verify(
    key: bytes,
    token: str,
    tenant_id: uuid.UUID,
    label: str,
    name: str,
    principal: str,
    arguments: dict[str, Any] | None,
) -> None:
    invalid = McpError(
        INVALID_PARAMS, "invalid requestState: retry the original request as it was answered"
    )
    if not isinstance(token, str) or len(token) > 4096:
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise invalid from None
    payload, tag = raw[:-16], raw[-16:]
    if len(raw) <= 16 or not hmac.compare_digest(
        tag, hmac.new(key, payload, hashlib.sha256).digest()[:16]
    ):
        raise invalid
    *binding, expires = json.loads(payload)
    if binding != _binding(tenant_id, label, name, principal, arguments):
        raise invalid
    if time.time() > expires:
        raise McpError(INVALID_PARAMS, "expired requestState: send the request again without it")
