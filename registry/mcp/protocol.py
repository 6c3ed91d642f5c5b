"""JSON-RPC 2.0 envelopes and the MCP wire constants (the official ``mcp-types`` package's, which
tests/mcp/test_revisions.py checks them against); what each revision has is registry.revisions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from registry.mcp.errors import InvalidRequest
from registry.revisions import EVENTS_EXTENSION as EVENTS_EXTENSION
from registry.revisions import SKILLS_EXTENSION as SKILLS_EXTENSION

# The 2026-07-28 envelope's _meta keys.
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT = "io.modelcontextprotocol/clientInfo"
META_SERVER = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"  # not among mcp-types' constants

__all__ = ["Message", "classify"]


@dataclass(frozen=True)
class Message:
    kind: Literal["request", "notification", "response"]
    id: str | int | None
    method: str | None
    params: dict[str, Any]


def classify(obj: Any) -> Message:
    """Tell a request, a notification and a response apart; anything else is an invalid request."""
    request_id = _id_of(obj)
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        raise InvalidRequest("not a JSON-RPC 2.0 message", request_id=request_id)
    has_id = "id" in obj
    if has_id and not valid_id(obj["id"]):
        raise InvalidRequest(
            f"id must be a string of at most {MAX_ID_LENGTH} characters or an integer within 64 bits"
        )
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise InvalidRequest("method must be a non-empty string", request_id=request_id)
        params = obj.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidRequest("params must be an object", request_id=request_id)
        return Message("request" if has_id else "notification", request_id, method, params)
    if has_id and ("result" in obj or "error" in obj):
        return Message("response", request_id, None, {})
    raise InvalidRequest("a message needs a method, or a result or error", request_id=request_id)


MAX_ID_LENGTH = 1024


def valid_id(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -(2**63) <= value < 2**63
    return isinstance(value, str) and len(value) <= MAX_ID_LENGTH


def _id_of(obj: Any) -> str | int | None:
    if isinstance(obj, dict) and valid_id(obj.get("id")):
        value: str | int = obj["id"]
        return value
    return None


def result_message(
    request_id: str | int | None, result: dict[str, Any] | orjson.Fragment
) -> dict[str, Any]:
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
    cached list pages). Ids are bounded to 64 bits when read, so orjson takes every one."""
    return orjson.dumps(message)
