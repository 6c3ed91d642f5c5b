"""The ASGI application: ``create_app(settings)``; its lifespan builds the database pool."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI
from sqlalchemy.exc import SQLAlchemyError

import registry
from registry.api import health, problems, prompts, tenants
from registry.api.limits import BodyLimit
from registry.config import Settings, get_settings
from registry.db.engine import Database
from registry.events.hub import Hub
from registry.mcp.http import McpEndpoint
from registry.sessions import service as sessions

logger = logging.getLogger("registry.app")


async def purge_sessions(db: Database, settings: Settings, every_seconds: float = 600) -> None:
    """Hygiene: delete sessions long idle or ended (expired ones are already refused on use)."""
    idle = timedelta(seconds=settings.session_idle_seconds)
    while True:
        await asyncio.sleep(every_seconds)
        try:
            async with db.operator_tx() as session:
                purged = await sessions.purge_expired(session, idle=idle)
            if purged:
                logger.info("mcp_sessions_purged", extra={"fields": {"count": purged}})
        except (SQLAlchemyError, OSError) as error:
            logger.warning(
                "mcp_session_purge_failed", extra={"fields": {"error": type(error).__name__}}
            )


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    dsn = settings.database_dsn()
    if dsn is None:
        raise RuntimeError(
            "create_app needs REGISTRY_DATABASE_URL; `registry serve` sets it for the embedded server"
        )

    db = Database(dsn, pool_size=settings.db_pool_size, max_overflow=settings.db_max_overflow)
    hub = Hub()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        logger.info("worker_started", extra={"fields": {"version": registry.__version__}})
        purger = asyncio.create_task(purge_sessions(db, settings))
        try:
            yield
        finally:
            purger.cancel()
            hub.close()
            await db.dispose()
            logger.info("worker_stopped")

    app = FastAPI(
        title="Prompt Registry",
        version=registry.__version__,
        summary="Multi-tenant prompt templates, served over MCP, managed over REST.",
        lifespan=lifespan,
    )
    app.state.db = db
    app.state.settings = settings
    app.state.hub = hub
    problems.install(app)
    app.include_router(health.router)
    app.include_router(tenants.router)
    app.include_router(prompts.router)
    app.router.routes.extend(McpEndpoint(settings, db, hub).routes())
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_request_bytes, max_blob_bytes=settings.max_blob_bytes
    )
    return app
