"""Request bodies, bounded before any route sees them: read whole first, at most the limit (413 past
it, declared or actual, chunked or not) and within the body timeout (408), a JSON body checked for
its nesting depth and for text that is not UTF-8 (422, registry.inputs), then handed to the app.
No route holds a database connection while a client is still sending."""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from registry import inputs
from registry.bodies import BodyReader
from registry.skills.folder import MAX_BYTES

_BLOB_UPLOAD = re.compile(r"^/api/v1/tenants/[^/]+/blobs/?$")
_SKILL_UPLOAD = re.compile(r"^/api/v1/tenants/[^/]+/skills(/[^/]+/versions)?/?$")
# A skill's folder holds at most 16 MiB (the extension's bound); as base64 in JSON, a third more.
SKILL_REQUEST_BYTES = MAX_BYTES * 4 // 3 + 1024 * 1024


class BodyLimit:
    def __init__(
        self, app: ASGIApp, *, max_bytes: int, max_blob_bytes: int, timeout_seconds: float
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_blob_bytes = max_blob_bytes
        self.timeout_seconds = timeout_seconds
        self.bodies = BodyReader(timeout_seconds)

    def limit_for(self, scope: Scope) -> int:
        if scope["method"] == "POST" and _BLOB_UPLOAD.match(scope["path"]):
            return self.max_blob_bytes
        if scope["method"] == "POST" and _SKILL_UPLOAD.match(scope["path"]):
            return max(self.max_bytes, SKILL_REQUEST_BYTES)
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(
                send,
                413,
                "payload_too_large",
                f"request body is larger than the limit of {limit} bytes",
            )
            return
        try:
            body, disconnected = await self.bodies.read(receive, limit)
        except TimeoutError:
            await _refuse(
                send,
                408,
                "request_timeout",
                f"the request body did not arrive within {self.timeout_seconds:g} seconds",
            )
            return
        if body is None:
            await _refuse(
                send,
                413,
                "payload_too_large",
                f"request body is larger than the limit of {limit} bytes",
            )
            return
        refused = _json_refusal(scope, body)
        if refused is not None:
            await _refuse(send, 422, "invalid_input", refused)
            return
        await self.app(scope, replaying(body, receive, gone=disconnected), send)


def replaying(body: bytes, receive: Receive, *, gone: bool = False) -> Receive:
    """A receive that gives ``body`` whole, once; then (the body read) waits on ``receive`` for the
    client to go away, or says it has gone when it went while the body was read."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        if gone:
            return {"type": "http.disconnect"}
        return await receive()

    return replay


def _json_refusal(scope: Scope, body: bytes) -> str | None:
    """Why a JSON body is not accepted (too deep, lone surrogates); None when it is, or when it is
    not JSON at all (the route says what is wrong with it then)."""
    content_type = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().lower()
    if not body or not (content_type == b"application/json" or content_type.endswith(b"+json")):
        return None
    try:
        inputs.loads(body)
    except inputs.JsonRefused as refused:
        return str(refused)
    except (ValueError, UnicodeDecodeError):
        return None
    return None


async def _refuse(send: Send, status: int, code: str, detail: str) -> None:
    title = {408: "Request timeout", 413: "Payload too large", 422: "Invalid input"}[status]
    body = json.dumps(
        {
            "type": f"urn:registry:problem:{code}",
            "title": title,
            "status": status,
            "code": code,
            "detail": detail,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
