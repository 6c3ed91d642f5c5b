"""Security headers on every REST, docs and console response: no sniffing, no framing, no referrer,
and a Content-Security-Policy that allows nothing (the API answers JSON) or, on /docs and /ui, only
the page's own assets. A response that sets its own policy (blobs) keeps it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

API_POLICY = b"default-src 'none'; frame-ancestors 'none'"
DOCS_POLICY = (
    b"default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    b"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'"
)
# The console: its own script and styles only (no inline script or style), images from itself or
# data: URIs (rendered previews), forms posted to itself only, never framed.
CONSOLE_POLICY = (
    b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    b"media-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    b"frame-ancestors 'none'"
)
COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        console = path == "/ui" or path.startswith("/ui/")
        policy = (
            DOCS_POLICY if path.startswith("/docs") else CONSOLE_POLICY if console else API_POLICY
        )

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                if console and b"referrer-policy" not in present:
                    # Browsers send "Origin: null" with a no-referrer policy, and the console's
                    # forms are checked against their Origin: same-origin still leaks nothing.
                    headers.append((b"referrer-policy", b"same-origin"))
                    present.add(b"referrer-policy")
                headers += [(k, v) for k, v in COMMON if k not in present]
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", policy))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)
