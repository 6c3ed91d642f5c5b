"""JSON-RPC 2.0 envelopes and the MCP revisions this server speaks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

SESSION_REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_REVISIONS = ("2026-07-28",)
ALL_REVISIONS = SESSION_REVISIONS + STATELESS_REVISIONS
LATEST_SESSION_REVISION = SESSION_REVISIONS[-1]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNAUTHORIZED = -32001  # implementation-defined: the HTTP status says 401 or 403
NOT_FOUND = -32002  # implementation-defined: unknown session, tenant or route


def since(revision: str, first: str) -> bool:
    """Whether ``revision`` includes what ``first`` introduced (revisions are ISO dates)."""
    return revision >= first


class McpError(Exception):
    """A JSON-RPC error to answer with; ``http_status`` matters only outside a session's body."""

    def __init__(
        self, code: int, message: str, *, data: Any = None, http_status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status
        self.headers = headers or {}


@dataclass(frozen=True)
class Message:
    kind: Literal["request", "notification", "response"]
    id: str | int | None
    method: str | None
    params: dict[str, Any]


def classify(obj: Any) -> Message:
    """Tell a request, a notification and a response apart; anything else is an invalid request."""
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        raise McpError(INVALID_REQUEST, "not a JSON-RPC 2.0 message", data=_id_of(obj))
    has_id = "id" in obj
    request_id = obj.get("id")
    if has_id and (isinstance(request_id, bool) or not isinstance(request_id, str | int)):
        raise McpError(INVALID_REQUEST, "id must be a string or an integer")
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise McpError(INVALID_REQUEST, "method must be a non-empty string", data=_id_of(obj))
        params = obj.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise McpError(INVALID_REQUEST, "params must be an object", data=_id_of(obj))
        return Message("request" if has_id else "notification", request_id, method, params)
    if has_id and ("result" in obj or "error" in obj):
        return Message("response", request_id, None, {})
    raise McpError(
        INVALID_REQUEST, "a message needs a method, or a result or error", data=_id_of(obj)
    )


def _id_of(obj: Any) -> str | int | None:
    if isinstance(obj, dict):
        value = obj.get("id")
        if isinstance(value, str | int) and not isinstance(value, bool):
            return value
    return None


def result_message(request_id: str | int | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(
    request_id: str | int | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def encode_json(message: Any) -> bytes:
    """A message as compact UTF-8 JSON. Results may embed pre-encoded parts (``orjson.Fragment``:
    cached list pages); a request id beyond 64 bits, which orjson refuses, is spliced in as text."""
    try:
        return orjson.dumps(message)
    except TypeError:
        if not (isinstance(message, dict) and isinstance(message.get("id"), int)):
            raise
        big = str(message["id"]).encode()
        return orjson.dumps({**message, "id": 0}).replace(b'"id":0', b'"id":' + big, 1)
