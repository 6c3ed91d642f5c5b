"""Request body size limits, enforced before and while the body is read (413 past the limit)."""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from registry.errors import PayloadTooLarge

_BLOB_UPLOAD = re.compile(r"^/api/v1/tenants/[^/]+/blobs/?$")


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, max_blob_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_blob_bytes = max_blob_bytes

    def limit_for(self, scope: Scope) -> int:
        if scope["method"] == "POST" and _BLOB_UPLOAD.match(scope["path"]):
            return self.max_blob_bytes
        return self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise PayloadTooLarge(f"request body is larger than the limit of {limit} bytes")
            return message

        await self.app(scope, counted, send)


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "type": "urn:registry:problem:payload_too_large",
            "title": "Payload too large",
            "status": 413,
            "code": "payload_too_large",
            "detail": f"request body is larger than the limit of {limit} bytes",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
