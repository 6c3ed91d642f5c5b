"""What every ``registry`` command shares: the settings and database a command works in
(``Registry``), the one error path (a refusal is one line on stderr and exit status 1), the
command group, and how tables and outcomes are printed.

A command imports only what it uses: the group finds each command's module in ``COMMANDS`` and
imports it when the command runs, and the database layers are imported by the commands that open a
database. ``registry tenant list`` then loads neither the sync client nor the OAuth code, and
``registry push`` loads no database driver (each import costs a command tenths of a second)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from registry.config import Settings, SettingsError, load_settings
from registry.errors import RegistryError

if TYPE_CHECKING:
    from registry.db.embedded import EmbeddedPostgres
    from registry.db.engine import Database

T = TypeVar("T")

# Each command (or command group) and the module of registry.cli that defines it.
COMMANDS = {
    "serve": "operating",
    "migrate": "operating",
    "backup": "operating",
    "restore": "operating",
    "mcp-stdio": "operating",
    "tenant": "tenants",
    "issuer": "tenants",
    "key": "tenants",
    "snapshot": "webhooks",
    "webhook": "webhooks",
    "verify-skill": "webhooks",
    "verify-receipt": "webhooks",
    "push": "files",
    "pull": "files",
    "refresh": "files",
    "login": "files",
    "import": "files",
    "server-json": "files",
    "install": "installing",
    "test": "releases",
    "release": "releases",
    "usage": "usage",
    "rollout": "rollouts",
    "library": "libraries",
}


class CommandError(Exception):
    """A command's own refusal (bad argument, nothing to do): one line on stderr, exit status 1."""


def fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


class Registry:
    """What every command works in: the settings (read once), and the database, opened once and
    only by the commands that need it (the embedded server, migrated on the way, or the external
    one, checked to be at head)."""

    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._url: str | None = None
        self._exit = contextlib.ExitStack()

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    def override(self, **values: Any) -> Settings:
        """The settings with command-line options applied over the environment."""
        self._settings = load_settings(**{k: v for k, v in values.items() if v is not None})
        return self._settings

    def url(self, *, serve: bool = False, migrate: bool = False) -> str:
        """A database at head, opened once for this command and released when it ends: the
        embedded server (attached to, or started and owned with ``serve``; migrated on the way), or
        the external one (checked to be at head, or upgraded with ``migrate``)."""
        if self._url is None:
            from registry.db import migrate as migrations
            from registry.db.attach import attached_database
            from registry.db.embedded import EmbeddedPostgres

            settings = self.settings
            if settings.embedded:
                server = EmbeddedPostgres(settings.data_dir)
                if not (serve or migrate or server.exists()):
                    raise CommandError(
                        f"no registry database in {server.data_dir.resolve()} (REGISTRY_DATA_DIR): "
                        "run this where `registry serve` runs, or set REGISTRY_DATA_DIR or "
                        "REGISTRY_DATABASE_URL"
                    )
                if serve:
                    self._url = self._exit.enter_context(server.serve())
                    click.echo(f"embedded PostgreSQL ready in {server.data_dir}", err=True)
                    migrations.upgrade(self._url)
                else:
                    self._url = self._exit.enter_context(attached_database(settings))
            else:
                external = settings.database_dsn()
                assert external is not None
                if migrate:
                    migrations.upgrade(external)
                else:
                    self.run(lambda db: migrations.check_at_head(db.engine), external)
                self._url = external
        return self._url

    def embedded(self, command: str) -> EmbeddedPostgres:
        """The embedded server of REGISTRY_DATA_DIR, for the commands that work on it alone."""
        if not self.settings.embedded:
            raise CommandError(
                f"registry {command} works on the embedded database (REGISTRY_DATA_DIR); with "
                "REGISTRY_DATABASE_URL set, use pg_dump or your database service's backups"
            )
        from registry.db.embedded import EmbeddedPostgres

        return EmbeddedPostgres(self.settings.data_dir)

    def run(self, work: Callable[[Database], Awaitable[T]], url: str | None = None) -> T:
        """Run ``work`` on a small pool of the database, in an event loop of its own."""
        from registry.db.engine import Database

        target = url or self.url()

        async def main() -> T:
            db = Database(target, pool_size=1, max_overflow=1, pooled=self.settings.through_pooler)
            try:
                return await work(db)
            finally:
                await db.dispose()

        return asyncio.run(main())

    def close(self) -> None:
        self._exit.close()


DEFAULT_URL = "http://127.0.0.1:8000"  # where the sync commands find the registry by default


def _expected() -> tuple[type[BaseException], ...]:
    """What a command expects to go wrong (imported only once something did)."""
    import httpx
    from sqlalchemy.exc import SQLAlchemyError

    from registry import login, sync
    from registry.db.embedded import EmbeddedError

    return (
        CommandError,
        RegistryError,
        EmbeddedError,
        SettingsError,
        SQLAlchemyError,
        OSError,
        httpx.TransportError,
        sync.FileError,
        login.LoginError,
    )


def _one_line(error: BaseException) -> str:
    import httpx
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(error, SQLAlchemyError | OSError) and not isinstance(error, httpx.TransportError):
        # Never echo the URL: it may hold a password.
        return f"database error ({type(error).__name__}): {str(error).splitlines()[0]}"
    if isinstance(error, httpx.TransportError):
        try:
            where = f"{error.request.url.scheme}://{error.request.url.netloc.decode()}"
        except RuntimeError:  # no request attached
            where = "the registry"
        told = ""
        if where == DEFAULT_URL and "REGISTRY_URL" not in os.environ:
            told = (
                f" ({DEFAULT_URL} is the default: is `registry serve` running? Elsewhere, set "
                "REGISTRY_URL or pass --url)"
            )
        return f"cannot reach {where}: {error}{told}"
    return str(error)


class RegistryGroup(click.Group):
    """Runs every command inside one Registry context and one error path: whatever a command
    expects to go wrong ends as one line on stderr and exit status 1, with nothing written.
    Commands are found in ``COMMANDS`` and their module imported when one is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"registry.cli.{module}")  # registers its commands on main
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        ctx.obj = registry_context = Registry()
        try:
            return super().invoke(ctx)
        except Exception as error:
            if not isinstance(error, _expected()):
                raise
            fail(_one_line(error))
        finally:
            registry_context.close()


pass_registry = click.make_pass_decorator(Registry)


@click.group(cls=RegistryGroup)
@click.version_option(package_name="prompt-registry")
def main() -> None:
    """Prompt Registry: prompt templates in PostgreSQL, served over MCP."""


def report(outcomes: list[Any], *, dry_run: bool, unit: str = "file(s)") -> None:
    for outcome in outcomes:
        click.echo(outcome.line(), err=outcome.action == "error")
    errors = sum(o.action == "error" for o in outcomes)
    summary = f"{len(outcomes)} {unit}, {errors} error(s)" + (
        " (dry run: nothing written)" if dry_run else ""
    )
    click.echo(summary, err=True)
    if errors:
        sys.exit(1)


def when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )


def in_tenant(registry: Registry, slug: str, work: Callable[[Any, Any], Awaitable[T]]) -> T:
    """``work(session, tenant)`` in one transaction scoped to the tenant ``slug``."""
    from registry.db.engine import enter_tenant
    from registry.tenants import service as tenants

    tenants.check_slug(slug)

    async def run(db: Database) -> T:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            return await work(session, found)

    return registry.run(run)
