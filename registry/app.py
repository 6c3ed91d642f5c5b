"""The ASGI application: ``create_app(settings)``; its lifespan builds the database pool."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fastapi import FastAPI, Request, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

import registry
from registry import collector, metrics
from registry.api import (
    bundles,
    cards,
    change_requests,
    changes,
    docs,
    health,
    libraries,
    oauth,
    plans,
    problems,
    prompts,
    reads,
    rollouts,
    signing,
    skills,
    tenants,
    usage,
    webhooks,
)
from registry.api.headers import SecurityHeaders
from registry.api.limits import BodyLimit
from registry.api.metrics import RequestMetrics
from registry.api.plain import PlainRoute
from registry.change_requests.scheduler import Scheduler
from registry.config import Settings, get_settings
from registry.console import admin, browse, editor, signin
from registry.console import change_requests as console_change_requests
from registry.console import libraries as console_libraries
from registry.console import pages as console_pages
from registry.console import rollouts as console_rollouts
from registry.console import skills as console_skills
from registry.console import usage as console_usage
from registry.db import repository as db_repository
from registry.db.engine import Database, PoolSizes, listen_connection
from registry.db.replicas import Replicas
from registry.events.hub import Hub
from registry.events.listener import ChangeFeed
from registry.mcp.caching import McpCaches
from registry.mcp.event_webhooks import Deliverer
from registry.mcp.feed import DatabaseChanges
from registry.mcp.http import McpEndpoint
from registry.metrics import worker_exited
from registry.naming import SLUG_RE
from registry.rollouts.scheduler import Advancer
from registry.sessions import service as sessions
from registry.signing import KeyFile, SignatureRefused, key_file, key_id, public_pem
from registry.tenants.oauth import TokenVerifier
from registry.usage.ledger import Ledger
from registry.webhooks.delivery import Dispatcher

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


def _key_checked(live: Callable[[], bool], keys: KeyFile) -> Callable[[], bool]:
    """``live``, after looking whether the signing key's file was replaced (at most once a second;
    a new key clears the caches through ``Worker.running``'s callback): every path that answers
    from a cache asks ``McpCaches.enabled`` first, so no kept answer outlives the key it was
    signed with."""

    def checked() -> bool:
        with contextlib.suppress(OSError, SignatureRefused):  # said by the signing itself
            keys.current()
        return live()

    return checked


async def keep_signing_keys(db: Database, settings: Settings) -> None:
    """Record every public key this worker signs with (the key file's, read again when the file is
    replaced) in ``signing_keys``, which the key set publishes: what was signed before a rotation
    still verifies. Woken by the key file's reload, not by a timer."""
    if settings.snapshot_key_file is None:
        return
    keys = key_file(settings.snapshot_key_file)
    heard: list[Any] = []
    woken = asyncio.Event()

    def hear(public: Any) -> None:
        heard.append(public)
        woken.set()

    keys.on_new_key.append(hear)
    try:
        with contextlib.suppress(OSError, SignatureRefused):  # said by the first signing
            heard.append(keys.current()[0].public_key())
        while True:
            while heard:
                public = heard[0]
                try:
                    async with db.app_tx() as session:
                        await db_repository.record_signing_key(
                            session, key_id(public), public_pem(public).decode()
                        )
                except (SQLAlchemyError, OSError) as error:
                    logger.warning(
                        "signing_key_not_recorded",
                        extra={"fields": {"error": type(error).__name__}},
                    )
                    await asyncio.sleep(5)
                    continue
                heard.pop(0)
            woken.clear()
            await woken.wait()
    finally:
        keys.on_new_key.remove(hear)


async def flush_metrics(every_seconds: float = 1.0) -> None:
    """Hot paths count in process memory; this writes it to the shared metrics (scrapes flush too)."""
    while True:
        await asyncio.sleep(every_seconds)
        metrics.flush()


async def watch_loop_lag(every_seconds: float = 0.05) -> None:
    """How late the event loop runs a timer, every ``every_seconds``: the time a request arriving
    meanwhile could sit unread (registry_event_loop_lag_seconds)."""
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(every_seconds)
        metrics.LOOP_LAGS.observe(max(0.0, time.perf_counter() - asked - every_seconds))


def close_streams_on_exit(hub: Hub) -> None:
    """End open streams as soon as the server is told to stop, not after its graceful timeout.

    uvicorn waits for open responses before running the lifespan's shutdown, and an SSE stream never
    finishes by itself; so its signal handler is chained (uvicorn restores the originals afterwards).
    """
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if getattr(previous, "__name__", "") != "handle_exit" or not callable(previous):
            continue  # not under uvicorn's signal handling: leave it alone

        def chained(signum: int, frame: Any, previous: Any = previous) -> None:
            loop.call_soon_threadsafe(hub.close)
            previous(signum, frame)

        signal.signal(sig, chained)


# The route table: every router of the service, in the order their routes are matched (the tests'
# API description and isolation checks walk it).
ROUTERS = (
    health.router,
    cards.router,
    oauth.router,
    signing.router,
    docs.router,
    tenants.router,
    prompts.router,
    reads.router,
    plans.router,
    bundles.router,
    skills.router,
    change_requests.router,
    changes.router,
    webhooks.router,
    usage.router,
    rollouts.router,
    libraries.router,
    signin.router,
    signin.root,
    browse.router,
    console_skills.router,
    console_change_requests.router,
    editor.router,
    admin.router,
    console_usage.router,
    console_rollouts.router,
    console_libraries.router,
)


class RegistryApp(FastAPI):
    """The REST API under FastAPI; MCP paths go straight to their endpoint, ahead of the middleware
    stack (the endpoint limits its own bodies and counts its own metrics), so the hot path is short."""

    mcp: McpEndpoint | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.mcp is not None:
            params = self.mcp.match(scope["path"])
            if params is not None:
                scope["app"] = self
                scope["path_params"] = params
                await self.mcp(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def answer_at_once(
        self, scope: Any, body: bytes
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """A kept MCP answer that the HTTP protocol may send itself, before any task or request
        object (``registry.http_protocol``); None for anything else."""
        if self.mcp is None or self.mcp.match(scope["path"]) is None:
            return None
        return self.mcp.answer_at_once(scope, body)


def _database(settings: Settings) -> Database:
    """The worker's database: its pools sized from the settings, with the read replicas."""
    dsn = settings.database_dsn()
    if dsn is None:
        raise RuntimeError(
            "create_app needs REGISTRY_DATABASE_URL; `registry serve` sets it for the embedded server"
        )
    sizes = (
        PoolSizes.within(settings.db_worker_connections)
        if settings.db_worker_connections is not None
        else PoolSizes(settings.db_pool_size, settings.db_max_overflow, settings.db_pool_size)
    )
    replicas = Replicas(
        settings.read_dsns(),
        pool_size=settings.db_pool_size,
        pooled=settings.through_pooler,
        max_lag_seconds=settings.replica_max_lag_seconds,
    )
    return Database(
        dsn,
        pool_size=sizes.orm,
        max_overflow=sizes.overflow,
        pooled=settings.through_pooler,
        read_pool_size=sizes.reads,
        replicas=replicas,
        commit_wait_seconds=settings.commit_wait_seconds,
    )


@dataclass
class Worker:
    """What one worker process runs besides its routes: the database, the fan-out hub, the token
    verifier, the webhook dispatcher, the MCP endpoint with its caches, the change feed that keeps
    them current, and the scheduler of change requests."""

    settings: Settings
    db: Database
    hub: Hub
    tokens: TokenVerifier
    dispatcher: Dispatcher
    deliverer: Deliverer
    endpoint: McpEndpoint
    feed: ChangeFeed
    scheduler: Scheduler
    advancer: Advancer

    @classmethod
    def build(cls, settings: Settings, db: Database) -> Worker:
        hub = Hub(tick_seconds=settings.sse_keepalive_seconds / 4)
        tokens = TokenVerifier(
            settings.public_url,
            skew_seconds=settings.oauth_clock_skew_seconds,
            allow_private=settings.oauth_allow_private_issuers,
            refresh_seconds=settings.oauth_keys_refresh_seconds,
        )
        dispatcher = Dispatcher(db, settings)
        deliverer = Deliverer(db, settings)  # the Events extension's webhooks
        caches = McpCaches()
        listen_dsn = settings.listen_dsn() or db.url
        ledger = Ledger(settings, db.reads)
        if settings.usage_otlp_endpoint and ledger.enabled:  # opt-in: the `otlp` extra
            from registry.usage.otlp import OtlpExport

            otlp = OtlpExport(settings.usage_otlp_endpoint, db.reads, f"{os.getpid()}")
            ledger.exporters.append(otlp.export)
            ledger.closers.append(otlp.close)
        endpoint = McpEndpoint(settings, db, hub, caches, tokens, ledger)
        feed = ChangeFeed(
            lambda: listen_connection(listen_dsn),
            hub,
            DatabaseChanges(db),
            caches=[caches],
            auth_caches=[caches.directory.principals, caches.directory.ids, caches.replays],
            access_checks=[endpoint.revalidate],  # streams end with their key or the public access
            session_ends=[endpoint.session_ended],
            sequences=[db.saw],
            outbox=[dispatcher.poke, deliverer.poke],  # a committed change has webhooks to send
        )
        caches.live = feed.hearing
        caches.reading_libraries = feed.reads_libraries
        if settings.snapshot_key_file is not None:  # a rotated key drops every kept answer
            caches.live = _key_checked(feed.hearing, key_file(settings.snapshot_key_file))
        db.committed.append(caches.invalidate)  # this worker's own writes: at once, not on the echo
        db.committed.append(feed.committed)  # and, for a library, its readers' caches
        db.replicas.trusted = feed.hearing  # what this worker knows is complete
        return cls(
            settings,
            db,
            hub,
            tokens,
            dispatcher,
            deliverer,
            endpoint,
            feed,
            Scheduler(db),
            Advancer(db, settings.rollout_poll_seconds),
        )

    @asynccontextmanager
    async def running(self, app: FastAPI) -> AsyncIterator[None]:
        """The lifespan: the background tasks run while the worker serves."""
        logger.info("worker_started", extra={"fields": {"version": registry.__version__}})
        close_streams_on_exit(self.hub)
        key_file_ = self.settings.snapshot_key_file
        rotated = lambda _public: self.endpoint.caches.clear()  # noqa: E731
        if key_file_ is not None:
            key_file(key_file_).on_new_key.append(rotated)
        tasks = [
            asyncio.create_task(self.feed.run()),
            asyncio.create_task(purge_sessions(self.db, self.settings)),
            asyncio.create_task(flush_metrics()),
            asyncio.create_task(watch_loop_lag()),
            asyncio.create_task(self.dispatcher.run()),
            asyncio.create_task(self.deliverer.run()),
            asyncio.create_task(self.db.watch()),  # primary, pools, replicas
            asyncio.create_task(self.scheduler.run()),  # change requests applied at their time
            asyncio.create_task(keep_signing_keys(self.db, self.settings)),
            asyncio.create_task(self.endpoint.core.ledger.run()),  # the serve ledger's flushes
            asyncio.create_task(self.advancer.run()),  # rollouts' steps
        ]
        # Serve once the change listener is connected, or its first try failed (/readyz says 503
        # until it connects), and at the latest after 10 s.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.feed.tried.wait(), 10)
        # What exists at startup (modules, ORM mappings, settings) lives as long as the worker: the
        # cycle collector need not walk it again on every full collection. Collected first, so no
        # garbage is frozen with it.
        policy = collector.install(freeze=self.settings.gc_freeze)
        if self.settings.gc_freeze:
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            for task in tasks[1:]:  # a delivery cut off stays pending: its transaction rolls back
                task.cancel()
            metrics.flush()
            self.hub.close()  # ends every open stream
            await self.endpoint.core.ledger.close()  # the last interval's counts, written
            await self.feed.stop()
            tasks[0].cancel()
            await self.db.dispose()
            collector.uninstall(policy)
            if key_file_ is not None:
                key_file(key_file_).on_new_key.remove(rotated)
            worker_exited(os.getpid())
            logger.info("worker_stopped")


async def _page_or_problem(request: Request, exc: Exception) -> Response:
    """A path no route serves: under ``/ui/`` a console page saying so (a person is reading), else
    the API's problem JSON."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404 and request.url.path.startswith("/ui/"):
        slug = request.url.path.split("/")[2] or None
        return console_pages.render(
            request,
            "error.html",
            404,
            slug=slug if slug and SLUG_RE.fullmatch(slug) else None,
            message=f"the console has no page at {request.url.path[:200]}",
        )
    return await problems.http_error_handler(request, exc)


def create_app(settings: Settings | None = None) -> RegistryApp:
    settings = settings or get_settings()
    worker = Worker.build(settings, _database(settings))
    app = RegistryApp(
        title="Prompt Registry",
        version=registry.__version__,
        summary="Multi-tenant prompt templates, served over MCP, managed over REST.",
        lifespan=worker.running,
        docs_url=None,  # served by registry.api.docs, with local assets
        redoc_url=None,
    )
    app.state.db = worker.db
    app.state.settings = settings
    app.state.hub = worker.hub
    app.state.tokens = worker.tokens
    app.state.feed = worker.feed
    caches = worker.endpoint.caches
    app.state.callers = lambda: caches.directory if caches.enabled else None
    # One bulk request (import, push plan) at a time per worker.
    app.state.importing = asyncio.Lock()
    problems.install(app)
    app.add_exception_handler(StarletteHTTPException, _page_or_problem)
    for router in ROUTERS:
        app.include_router(router)
    # Ahead of every route: the ordinary case of the hottest writes, without FastAPI's routing.
    for method, path, endpoint in prompts.PLAIN:
        app.router.routes.insert(0, PlainRoute(method, path, endpoint, app.router))
    app.mount(docs.ASSETS, docs.assets, name="docs-assets")
    app.mcp = worker.endpoint
    app.state.scheduler = worker.scheduler
    app.state.advancer = worker.advancer
    app.state.ledger = worker.endpoint.core.ledger  # REST reads count where MCP answers do
    app.state.slots = worker.endpoint.slots  # one bound on streams, MCP's and the change stream's
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.max_request_bytes,
        max_blob_bytes=settings.max_blob_bytes,
        timeout_seconds=settings.body_timeout_seconds,
    )
    app.add_middleware(RequestMetrics)
    app.add_middleware(SecurityHeaders)
    return app
