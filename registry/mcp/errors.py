"""The one table from errors to JSON-RPC codes and HTTP statuses.

An error meets a client in one of two ways. Inside a method's answer (a request that reached its
handler), it is a JSON-RPC error object in an HTTP 200 (or on its stdio line): only the code matters.
Refusing the request itself (a body that is no JSON-RPC, a 2026-07-28 envelope that does not hold
up, a missing or wrong credential, an unknown session or tenant), it also chooses the HTTP status.
Raise sites name what went wrong (a class below, or one of the registry's errors); this module alone
decides the code and the status.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import ValidationError

from registry.db.errors import outage
from registry.errors import RegistryError, Unavailable
from registry.sessions.service import SessionGone
from registry.tenants import oauth

logger = logging.getLogger("registry.mcp")

# JSON-RPC 2.0's codes, and those MCP defines (the official mcp-types package's values, checked
# against it by tests/mcp/test_revisions.py).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020  # 2026-07-28: an HTTP header disagrees with the body
UNSUPPORTED_PROTOCOL_VERSION = -32022

# Implementation-defined codes (-32000 to -32019): the HTTP status tells 401 from 403.
UNAUTHORIZED = -32001
NOT_FOUND = -32002


class McpError(Exception):
    """A protocol-level refusal; subclasses fix its JSON-RPC code and HTTP status."""

    code: ClassVar[int] = INVALID_REQUEST
    status: ClassVar[int] = 400

    def __init__(
        self,
        message: str,
        *,
        data: Any = None,
        request_id: str | int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        self.request_id = request_id  # the request it answers, when it could be read
        self.headers = headers or {}


class ParseError(McpError):
    code = PARSE_ERROR


class InvalidRequest(McpError):
    code = INVALID_REQUEST


class BodyTooLarge(InvalidRequest):
    status = 413


class BodyTimeout(InvalidRequest):
    status = 408


class NotAcceptable(InvalidRequest):
    status = 406


class MethodNotAllowed(InvalidRequest):
    status = 405


class MethodNotFound(McpError):
    code = METHOD_NOT_FOUND
    status = 404


class InvalidParams(McpError):
    code = INVALID_PARAMS


class HeaderMismatch(McpError):
    code = HEADER_MISMATCH


class UnsupportedVersion(McpError):
    code = UNSUPPORTED_PROTOCOL_VERSION


class Forbidden(McpError):
    code = UNAUTHORIZED
    status = 403


# The Events extension's codes (SEP-3415's draft; provisional until it is accepted).
EVENT_NOT_FOUND = -32023
EVENT_FORBIDDEN = -32024
RESOURCE_EXHAUSTED = -32025
UNSUPPORTED = -32026
CALLBACK_ENDPOINT_ERROR = -32027


class EventNotFound(McpError):
    """An event type this server does not offer (``data.kind``: ``"event"``)."""

    code = EVENT_NOT_FOUND


class EventForbidden(McpError):
    """The caller may not receive these events."""

    code = EVENT_FORBIDDEN
    status = 403


class ResourceExhausted(McpError):
    """A server limit was reached (``data.limit`` names it, ``data.max`` gives it)."""

    code = RESOURCE_EXHAUSTED


class Unsupported(McpError):
    """A well-formed request for an option this server does not offer (``data.feature``)."""

    code = UNSUPPORTED


class CallbackEndpointError(McpError):
    """A webhook callback endpoint failed verification or could not be reached (``data.reason``:
    one of the draft's categories, never the endpoint's own words)."""

    code = CALLBACK_ENDPOINT_ERROR


def unavailable(error: BaseException) -> Unavailable | None:
    """Whether ``error`` is the database being out of reach: the whole request is then refused (503,
    Retry-After) rather than answered, so clients retry instead of reporting a bad prompt."""
    return outage(error)


@dataclass(frozen=True)
class Answer:
    """An error as the client gets it."""

    code: int
    message: str
    data: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def _registry_code(error: RegistryError) -> int:
    """A registry error refusing a request: who-are-you and what-is-this get their own codes."""
    if error.http_status in (401, 403):
        return UNAUTHORIZED
    if error.http_status == 404:
        return NOT_FOUND
    return error.jsonrpc_code


def _detail(error: RegistryError) -> dict[str, Any] | None:
    data = {k: v for k, v in error.detail.items() if isinstance(v, str | int | list)}
    return data or None


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "params"
    return f"invalid params: {where}: {first.get('msg', 'invalid')}"


def in_result(error: Exception, method: str | None) -> Answer:
    """The error object answering a request whose handler raised ``error``. A database outage is
    not answered here: see ``unavailable``."""
    if isinstance(error, McpError):
        return Answer(error.code, error.message, error.data)
    if isinstance(error, ValidationError):
        return Answer(INVALID_PARAMS, _describe(error))
    if isinstance(error, RegistryError):
        return Answer(error.jsonrpc_code, error.message, _detail(error))
    found = internal(error, method)  # nothing internal reaches the client
    return Answer(found.code, found.message, found.data)


def refusal(
    error: McpError | RegistryError | SessionGone, resource_metadata: str | None = None
) -> Answer:
    """The answer refusing a whole request (HTTP status included); a refused credential is told
    why and where the resource's metadata is (``WWW-Authenticate``)."""
    if isinstance(error, McpError):
        return Answer(error.code, error.message, error.data, error.status, error.headers)
    if isinstance(error, SessionGone):
        return Answer(NOT_FOUND, "session not found or ended: initialize a new one", status=404)
    headers = {}
    if oauth.challenged(error):
        headers["WWW-Authenticate"] = oauth.bearer_challenge(error, resource_metadata)
    if error.retry_after_seconds is not None:
        headers["Retry-After"] = str(error.retry_after_seconds)
    return Answer(_registry_code(error), error.message, None, error.http_status, headers)


def internal(error: BaseException, where: str | None) -> Answer:
    """An error nobody expected: logged once with a request id; the client gets only the id."""
    request_id = uuid.uuid4().hex
    logger.error(
        "mcp_internal_error",
        exc_info=error,
        extra={"fields": {"request_id": request_id, "method": where}},
    )
    return Answer(INTERNAL_ERROR, "internal error", {"request_id": request_id}, status=500)
