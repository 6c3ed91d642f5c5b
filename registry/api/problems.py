"""RFC 9457 problem+json: the REST renderer of the registry's error tree."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from registry.db.errors import outage
from registry.errors import RegistryError
from registry.tenants import oauth

logger = logging.getLogger("registry.api")
PROBLEM = "application/problem+json"


def problem(status: int, code: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {
        "type": f"urn:registry:problem:{code}",
        "title": title,
        "status": status,
        "code": code,
        "detail": detail,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM)


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


async def registry_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RegistryError)
    extra = {k: v for k, v in exc.detail.items() if isinstance(v, str | int | float | bool | list)}
    detail = exc.message
    if "overridable_by" in exc.detail:  # said the REST way; `reason` keeps the words without it
        extra["reason"] = exc.message
        detail += (
            f". Send {exc.detail['overridable_by']}=true to do it anyway (the audit log records it)"
        )
    response = problem(exc.http_status, exc.code, exc.title, detail, **extra)
    if oauth.challenged(exc):
        settings = request.app.state.settings
        base = settings.public_url or str(request.base_url)
        metadata = oauth.metadata_url(base, request.url.path)
        response.headers["WWW-Authenticate"] = oauth.bearer_challenge(exc, metadata)
    if exc.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(exc.retry_after_seconds)
    return response


def _json_syntax(error: Any, body: Any) -> dict[str, Any]:
    """A body that is not JSON, said as a person reads it: where (line and column) and what the
    parser expected there, instead of a character offset."""
    offset = (error.get("loc") or ("body", 0))[-1]  # a model validating the whole body: ()
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    where = ""
    if isinstance(offset, int) and 0 <= offset <= len(text):
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        where = f" at line {line}, column {column}"
    expected = (error.get("ctx") or {}).get("error") or "a JSON value"
    return {"field": "body", "message": f"not valid JSON{where}: {expected}"}


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": _field_path(err.get("loc", ())), "message": err.get("msg", "invalid")}
        if err.get("type") != "json_invalid"
        else _json_syntax(err, exc.body)
        for err in exc.errors()
    ]
    first = errors[0] if errors else {"field": "body", "message": "invalid"}
    return problem(
        422,
        "invalid_input",
        "Invalid input",
        f"{first['field']}: {first['message']}",
        errors=errors,
    )


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
        exc.status_code, "http_error"
    )
    response = problem(exc.status_code, code, str(exc.detail), str(exc.detail))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    unavailable = outage(exc)
    if unavailable is not None:  # the database went away mid-request: retry, not a bug
        return await registry_error_handler(request, unavailable)
    request_id = uuid.uuid4().hex
    logger.error(
        "unhandled_error",
        exc_info=exc,
        extra={"fields": {"request_id": request_id, "path": request.url.path}},
    )
    return problem(500, "internal_error", "Internal error", "internal error", request_id=request_id)


def install(app: FastAPI) -> None:
    app.add_exception_handler(RegistryError, registry_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    app.add_exception_handler(Exception, unexpected_error_handler)
