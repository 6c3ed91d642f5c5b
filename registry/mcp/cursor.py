"""prompts/list cursors: opaque, bound to tenant and label, protected by a MAC, short-lived."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
import uuid

from registry.mcp.protocol import INVALID_PARAMS, McpError

_VERSION = 1


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()[:16]


def encode(key: bytes, tenant_id: uuid.UUID, label: str, last_name: str, page_size: int) -> str:
    payload = json.dumps(
        [_VERSION, tenant_id.hex, label, last_name, page_size, int(time.time())],
        separators=(",", ":"),
    ).encode()
    return f"{_b64(payload)}.{_b64(_mac(key, payload))}"


def decode(
    key: bytes, token: str, tenant_id: uuid.UUID, label: str, *, max_age_seconds: int
) -> tuple[str, int]:
    """(last name, page size) from a cursor this server issued for this tenant and label."""
    invalid = McpError(
        INVALID_PARAMS, "invalid cursor: pass nextCursor back unchanged, within this session"
    )
    if not isinstance(token, str) or len(token) > 2048 or "." not in token:
        raise invalid
    body, _, tag = token.partition(".")
    try:
        payload = _unb64(body)
        given = _unb64(tag)
    except (binascii.Error, ValueError):
        raise invalid from None
    if not hmac.compare_digest(given, _mac(key, payload)):
        raise invalid
    version, tenant_hex, cursor_label, last_name, page_size, issued = json.loads(payload)
    if version != _VERSION or tenant_hex != tenant_id.hex or cursor_label != label:
        raise invalid
    if time.time() - issued > max_age_seconds:
        raise McpError(INVALID_PARAMS, "expired cursor: list again from the first page")
    return str(last_name), int(page_size)
