"""Liveness and readiness."""

from __future__ import annotations

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError

from registry.db.engine import Database
from registry.db.migrate import check_at_head, head_revision, ping
from registry.errors import SchemaNotAtHead, Unauthenticated
from registry.metrics import exposition
from registry.tenants.access import is_operator, parse_bearer

router = APIRouter(tags=["health"])
READY_WRITE_SECONDS = 2.0  # the longest /readyz waits for its probe's commit to be acknowledged


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The database is reachable, acknowledges writes, and its schema is at head",
)
async def readyz(request: Request) -> JSONResponse:
    db: Database = request.app.state.db
    try:
        await ping(db.engine)
        schema = await check_at_head(db.engine)
    except SchemaNotAtHead as error:
        return JSONResponse({"status": "unavailable", "reason": error.message}, status_code=503)
    except (SQLAlchemyError, OSError) as error:
        reason = f"database unreachable: {type(error).__name__}"
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    probe = min(db.commit_wait_seconds, READY_WRITE_SECONDS)
    try:
        acknowledged = await db.writes_acknowledged(probe)
    except (asyncpg.PostgresError, OSError) as error:  # a standby now, say: it takes no writes
        reason = f"writes are refused: {type(error).__name__}"
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    if not acknowledged:
        reason = (
            f"writes are not acknowledged: a commit waited more than {probe:g} s (a synchronous "
            "standby that is gone?)"
        )
        return JSONResponse(
            {"status": "unavailable", "reason": reason},
            status_code=503,
            headers={"Retry-After": "5"},
        )
    if not request.app.state.feed.connected.is_set():
        reason = "the change listener (LISTEN connection) is not connected yet"
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
    ready: dict[str, object] = {"status": "ready", "schema": schema}
    if schema != head_revision():  # a later release migrated: this one serves until replaced
        ready["code_schema"] = head_revision()
    if db.replicas.any:  # reported, never a reason to be unready: the primary reads too
        ready["replicas"] = db.replicas.status()
    return JSONResponse(ready)


@router.get(
    "/metrics",
    summary="Prometheus metrics of every worker (the operator token, unless made public)",
    response_class=Response,
)
async def metrics(request: Request) -> Response:
    settings = request.app.state.settings
    if not settings.metrics_public:
        credential = parse_bearer(request.headers.get("authorization"))
        if not is_operator(settings.operator_token, credential):
            raise Unauthenticated(
                "/metrics needs 'Authorization: Bearer <REGISTRY_OPERATOR_TOKEN>' (or "
                "REGISTRY_METRICS_PUBLIC=true, for a scraper on a private network)"
            )
    body, content_type = exposition()
    return Response(body, media_type=content_type)
