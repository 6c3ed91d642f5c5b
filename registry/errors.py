"""One error tree for the whole registry.

Each class carries a stable machine-readable ``code``, the HTTP status the REST API answers with, and
the JSON-RPC code the MCP endpoint answers with. The two renderers (problem+json in ``registry.api``,
JSON-RPC in ``registry.mcp``) are the only places that turn exceptions into responses.
"""

from __future__ import annotations

from typing import Any, ClassVar

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RegistryError(Exception):
    code: ClassVar[str] = "registry_error"
    http_status: ClassVar[int] = 400
    jsonrpc_code: ClassVar[int] = INVALID_PARAMS
    title: ClassVar[str] = "Bad request"
    retry_after_seconds: ClassVar[int | None] = None  # told to clients (Retry-After) when set

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class InvalidInput(RegistryError):
    code = "invalid_input"
    http_status = 422
    title = "Invalid input"


class NotFound(RegistryError):
    code = "not_found"
    http_status = 404
    title = "Not found"


class Conflict(RegistryError):
    code = "conflict"
    http_status = 409
    title = "Conflict"


class PreconditionFailed(RegistryError):
    code = "precondition_failed"
    http_status = 412
    title = "Precondition failed"


class PayloadTooLarge(RegistryError):
    code = "payload_too_large"
    http_status = 413
    title = "Payload too large"


class Unauthenticated(RegistryError):
    code = "unauthenticated"
    http_status = 401
    title = "Unauthenticated"


class KeyRefused(RegistryError):
    """An API key that was presented and refused (unknown, revoked, expired, or keys turned off for
    the tenant). 403 rather than 401: the caller sent a credential that no OAuth flow can replace,
    and an OAuth-aware client answers a 401 by starting a flow that hides this message."""

    code = "api_key_refused"
    http_status = 403
    title = "API key refused"


class NotSignedIn(RegistryError):
    """No live console session for the tenant: the console sends the person to sign in."""

    code = "not_signed_in"
    http_status = 401
    title = "Not signed in"


class BadCsrf(RegistryError):
    """A console form without the session's CSRF token (or with another's)."""

    code = "csrf_failed"
    http_status = 403
    title = "Forbidden"


class TooManyStreams(RegistryError):
    """A worker's bound on open streams (per caller, per tenant) is reached."""

    code = "too_many_streams"
    http_status = 429
    jsonrpc_code = INVALID_REQUEST
    title = "Too many streams"
    retry_after_seconds = 5


class Busy(RegistryError):
    """A worker runs one such request at a time (a bundle import holds a pooled connection for as
    long as it takes): try again in a moment."""

    code = "busy"
    http_status = 429
    jsonrpc_code = INVALID_REQUEST
    title = "Busy"
    retry_after_seconds = 5


class Forbidden(RegistryError):
    code = "forbidden"
    http_status = 403
    title = "Forbidden"


class Unavailable(RegistryError):
    code = "unavailable"
    http_status = 503
    jsonrpc_code = INTERNAL_ERROR
    title = "Service unavailable"
    retry_after_seconds: ClassVar[int | None] = 5


class WriteNotAcknowledged(Unavailable):
    """A commit the database did not acknowledge in REGISTRY_COMMIT_WAIT_SECONDS (its primary
    waits for a synchronous standby that is gone, say). It may have been applied: a retry of the
    same write is safe (an identical version is not written twice; a label move is idempotent)."""

    code = "write_not_acknowledged"


class SchemaNotAtHead(Unavailable):
    code = "schema_not_at_head"
