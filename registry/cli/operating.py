"""The operator's commands on the service itself: serve, migrate, backup, restore, and MCP over
stdio."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from registry.cli.base import CommandError, Registry, main, pass_registry
from registry.config import Settings
from registry.db import backup as backups
from registry.db import engine
from registry.db import migrate as migrations
from registry.tenants import service as tenants

# --- serve / migrate ---------------------------------------------------------------------------


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _connection_budget() -> int:
    """80% of the open-file limit: connections beyond it are answered 503 by uvicorn, so that
    a flood of connections never takes the descriptors the database and the logs need."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(10, int(soft * 0.8))


def _check_port(host: str, port: int) -> None:
    """Say in one line that the address is taken, before anything starts (uvicorn would print a
    traceback, or a line per worker)."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.create_server((host.strip("[]"), port), family=family):
            pass
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise CommandError(
                f"{host}:{port} is already in use: stop what listens there, or choose another "
                "port with --port (REGISTRY_PORT)"
            ) from None
        raise CommandError(f"cannot listen on {host}:{port}: {error.strerror}") from None


@main.command()
@click.option("--host", default=None, help="Interface to listen on [REGISTRY_HOST, 127.0.0.1].")
@click.option("--port", type=int, default=None, help="Port to listen on [REGISTRY_PORT, 8000].")
@click.option(
    "--workers", type=int, default=None, help="Worker processes [REGISTRY_WORKERS, one per core]."
)
@pass_registry
def serve(registry: Registry, host: str | None, port: int | None, workers: int | None) -> None:
    """Run the registry (REST API and MCP endpoint) with uvicorn."""
    import uvicorn

    from registry import http_protocol
    from registry.logs import configure_logging, logging_config

    settings = registry.override(host=host, port=port, workers=workers)
    _check_port(settings.host, settings.port)
    configure_logging(settings.log_level, settings.log_json)
    # Until uvicorn installs its own handlers, SIGTERM unwinds like Ctrl-C so the database stops.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    made: str | None = None  # the metrics folder this command made, removed when it ends
    with contextlib.suppress(KeyboardInterrupt), _removed(lambda: made):
        url = registry.url(serve=True)
        _signing_key(settings)
        os.environ["REGISTRY_DATABASE_URL"] = url  # read by every worker's settings
        count = _workers_and_pools(settings, url)
        # Several workers: /metrics adds up their files. One worker serves from this process, whose
        # metrics exist already (they were made before a folder could be named): it shows its own.
        if count > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
            made = tempfile.mkdtemp(prefix="registry-metrics-")
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
        uvicorn.run(
            "registry.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=count,
            log_config=logging_config(settings.log_level, settings.log_json),
            # Access lines are below the level uvicorn.access logs at (logs.py); with the log on,
            # uvicorn would still build each line's client address and quoted path (3 % of a
            # cached prompts/get's worker time, sampled by bench/profile).
            access_log=False,
            timeout_graceful_shutdown=10,
            http=http_protocol.PROTOCOL,  # httptools, with a bound on the time a request's head takes
            limit_concurrency=settings.max_connections or _connection_budget(),
        )


def _signing_key(settings: Settings) -> None:
    """On the embedded database with no key named, the key receipts, skills and snapshots are
    signed with lives in the data directory: made on the first start (said once, with its path),
    kept like the data. An external deployment names its own (REGISTRY_SNAPSHOT_KEY_FILE)."""
    if not settings.embedded or settings.snapshot_key_file is not None:
        return
    from registry.signing import make_key_file

    path = (settings.data_dir / "signing-key.pem").resolve()
    if make_key_file(path):
        click.echo(
            f"signing key: made {path} (receipts, skills and snapshots are signed with it; keep it "
            "with the data, and back it up beside `registry backup`)",
            err=True,
        )
    os.environ["REGISTRY_SNAPSHOT_KEY_FILE"] = str(path)  # read by every worker's settings


@contextlib.contextmanager
def _removed(folder: Callable[[], str | None]) -> Iterator[None]:
    """Remove the folder ``folder()`` names (if any) when the block ends, however it ends."""
    try:
        yield
    finally:
        path = folder()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def _workers_and_pools(settings: Settings, url: str) -> int:
    """Decide the workers (REGISTRY_WORKERS, else one per core as the server's connections allow)
    and give each its share of the server's connections (REGISTRY_DB_WORKER_CONNECTIONS, read by
    every worker), unless the pools are sized by hand or a transaction pooler stands between, and
    say so. Returns the workers."""
    cores = engine.usable_cores()
    by_hand = (
        settings.through_pooler or {"db_pool_size", "db_max_overflow"} & settings.model_fields_set
    )
    if settings.db_worker_connections is None and by_hand:
        return settings.workers or cores
    if settings.db_worker_connections is None:
        limit, reserved = asyncio.run(engine.connection_limits(url))
        workers = settings.workers or engine.default_workers(limit, reserved, cores)
        try:
            each = engine.per_worker(limit, reserved, workers)
        except ValueError as error:
            raise CommandError(str(error)) from None
        os.environ["REGISTRY_DB_WORKER_CONNECTIONS"] = str(each)
        where = f"max_connections {limit} ({reserved} reserved, {engine.SPARE_CONNECTIONS} spare)"
    else:
        workers = settings.workers or cores
        each, where = settings.db_worker_connections, "REGISTRY_DB_WORKER_CONNECTIONS"
    sizes = engine.PoolSizes.within(each)
    chosen = "" if settings.workers else f" (REGISTRY_WORKERS unset: {cores} core(s))"
    click.echo(
        f"connections: {workers} worker(s){chosen} x {sizes.total} (pool {sizes.orm}, "
        f"reads {sizes.reads}, listener 1), within {where}",
        err=True,
    )
    return workers


@main.command()
@pass_registry
def migrate(registry: Registry) -> None:
    """Upgrade the database (REGISTRY_DATABASE_URL, or the embedded server) to the newest schema."""
    registry.url(migrate=True)
    click.echo(f"database schema at {migrations.head_revision()}", err=True)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@pass_registry
def backup(registry: Registry, file: Path) -> None:
    """Write a consistent backup of the embedded database to FILE, online (while it serves)."""
    server = registry.embedded("backup")
    if not server.exists():
        raise CommandError(f"no registry database in {server.data_dir} (REGISTRY_DATA_DIR)")
    with server.attach():
        info = backups.backup(server, file)
    click.echo(f"backup of PostgreSQL {info['postgresql_major']} written to {file}", err=True)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace the database already in REGISTRY_DATA_DIR.")
@pass_registry
def restore(registry: Registry, file: Path, force: bool) -> None:
    """Restore a backup written by `registry backup` into REGISTRY_DATA_DIR (which must hold no
    database, unless --force), then bring its schema to head."""
    server = registry.embedded("restore")
    with server.exclusive():
        info = backups.restore(server, file, force=force)
    with server.serve() as url:
        migrations.upgrade(url)
    click.echo(
        f"restored the backup of {info['created_at']} into {server.data_dir}; "
        f"schema at {migrations.head_revision()}",
        err=True,
    )


# --- MCP over stdio ---------------------------------------------------------------------------


@main.command("mcp-stdio")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option("--label", default=None, help="Serve this label instead of the tenant's default.")
@pass_registry
def mcp_stdio(registry: Registry, slug: str, label: str | None) -> None:
    """Serve a tenant's prompts over MCP on stdin/stdout (for clients that launch a command)."""
    from registry.logs import configure_logging
    from registry.mcp.stdio import run_stdio

    settings = registry.settings
    configure_logging(settings.log_level, settings.log_json)  # logs go to stderr, never stdout
    tenants.check_slug(slug)
    registry.run(lambda db: run_stdio(db, settings, slug, label))
