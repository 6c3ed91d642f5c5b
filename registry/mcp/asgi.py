"""What the MCP transport reads of an HTTP request and how it answers, at the ASGI level: a request's
headers (one dictionary lookup each), the request itself, JSON answers with their headers written
out, a whole request refused through the one error table, and CORS for browser clients."""

from __future__ import annotations

from typing import Any, overload
from urllib.parse import urlsplit

from starlette.datastructures import URL
from starlette.responses import Response
from starlette.types import Receive

from registry.errors import RegistryError
from registry.mcp import errors
from registry.mcp.errors import McpError
from registry.mcp.protocol import encode_json, error_message
from registry.sessions import service as sessions


class JsonAnswer(Response):
    """A JSON answer with its headers written out directly (Starlette's ``init_headers`` looks for
    each header it would add among those given: about 1 µs of a cached prompts/get)."""

    def __init__(self, body: bytes, status_code: int, headers: dict[str, str] | None) -> None:
        self.status_code = status_code
        self.background = None
        self.body = body
        self.raw_headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if headers:
            self.raw_headers += [
                (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
            ]


def json_answer(
    content: object, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return JsonAnswer(encode_json(content), status_code, headers)


def refuse(
    error: McpError | RegistryError | sessions.SessionGone, metadata: str | None = None
) -> Response:
    """The whole request refused: status, code and headers from the one table; a refused caller
    is told where the resource's metadata is and why (``WWW-Authenticate``)."""
    answer = errors.refusal(error, metadata)
    request_id = error.request_id if isinstance(error, McpError) else None
    message = error_message(request_id, answer.code, answer.message, answer.data)
    return json_answer(message, answer.status, answer.headers or None)


CORS_ALLOW_HEADERS = (
    "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, "
    "Mcp-Name, Last-Event-ID"
)
CORS_EXPOSE_HEADERS = "Mcp-Session-Id, WWW-Authenticate, Retry-After"


def cors(origin: str) -> dict[str, str]:
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": CORS_EXPOSE_HEADERS,
        "Vary": "Origin",
    }


def preflight() -> Response:
    """A browser's preflight from an allowed origin: what it may send (the answer gets the CORS
    headers of every response)."""
    return Response(
        status_code=204,
        headers={
            "Access-Control-Allow-Methods": "GET, POST, DELETE",
            "Access-Control-Allow-Headers": CORS_ALLOW_HEADERS,
            "Access-Control-Max-Age": "600",
        },
    )


def origin_allowed(origin: str, allowed: list[str]) -> bool:
    """An allowed entry without a port admits that scheme and host on any port."""
    origin = origin.rstrip("/")
    if origin in allowed:
        return True
    parts = urlsplit(origin)
    bare = f"{parts.scheme}://{parts.hostname}" if parts.hostname else origin
    if parts.hostname and ":" in parts.hostname:  # IPv6 literal
        bare = f"{parts.scheme}://[{parts.hostname}]"
    return bare in allowed


class Headers:
    """A request's headers with every lookup one dictionary lookup, built once per request from the
    ASGI scope (whose names are lower case). The transport reads about ten headers per message;
    Starlette's Headers scans the raw list for each (about 5 µs of a cached prompts/get, measured).
    Repeated headers: the first wins, as there."""

    __slots__ = ("_first",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._first = {
            name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(raw)
        }

    def __getitem__(self, key: str) -> str:
        return self._first[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._first

    @overload
    def get(self, key: str) -> str | None: ...
    @overload
    def get(self, key: str, default: str) -> str: ...
    def get(self, key: str, default: str | None = None) -> str | None:
        return self._first.get(key.lower(), default)


class Request:
    """What the transport reads of a request, and nothing more: Starlette's Request (with its
    Headers, then a dictionary of them) cost a cached prompts/get about 2 µs of the endpoint's
    work (``bench/inproc``); its headers are looked up only when read (an answer sent again from the
    request's bytes reads none), its URL only for a refusal that needs it. ``body`` holds the body
    once read (or the error reading it raised); ``digest`` and ``served`` are what an answer sent
    again from the request's bytes needs (registry.mcp.replay)."""

    __slots__ = (
        "_headers",
        "body",
        "digest",
        "method",
        "path_params",
        "receive",
        "scope",
        "served",
    )

    def __init__(self, scope: Any, receive: Receive) -> None:
        self.scope = scope
        self.receive = receive
        self.method: str = scope["method"]
        self.path_params: dict[str, str] = scope["path_params"]
        self._headers: Headers | None = None
        self.body: bytes | Exception | None = None
        self.digest: Any = None  # the request as registry.mcp.replay identifies it
        self.served: Any = None

    @property
    def headers(self) -> Headers:
        if self._headers is None:
            self._headers = Headers(self.scope["headers"])
        return self._headers

    def header(self, name: str) -> str:
        """One header's value ("" when absent) without building the dictionary of them all."""
        if self._headers is not None:
            return self._headers.get(name, "")
        wanted = name.encode("latin-1")
        for key, value in self.scope["headers"]:
            if key == wanted:
                return value.decode("latin-1")  # type: ignore[no-any-return]
        return ""

    @property
    def client_host(self) -> str | None:
        client = self.scope.get("client")
        return str(client[0]) if client else None

    @property
    def url(self) -> URL:
        return URL(scope=self.scope)
