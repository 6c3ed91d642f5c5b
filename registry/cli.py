"""The ``registry`` command: serve, migrate, and operator commands for tenants and keys."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
import httpx
import orjson
from sqlalchemy.exc import SQLAlchemyError

from registry import login, outbound, signing, sync
from registry.config import Settings, SettingsError, load_settings
from registry.db import backup as backups
from registry.db import engine
from registry.db import migrate as migrations
from registry.db.embedded import EmbeddedError, EmbeddedPostgres
from registry.db.engine import Database, enter_tenant
from registry.errors import RegistryError
from registry.naming import ROLE_RANK
from registry.principal import OPERATOR
from registry.prompts import snapshots
from registry.tenants import service as tenants
from registry.tenants.schemas import IssuersIn, TenantPatch
from registry.webhooks import service as webhooks
from registry.webhooks.schemas import EVENT_TYPES, EndpointIn

T = TypeVar("T")


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
            settings = self.settings
            if settings.embedded:
                server = EmbeddedPostgres(settings.data_dir)
                if not (serve or migrate or server.exists()):
                    raise CommandError(
                        f"no registry database in {server.data_dir.resolve()} (REGISTRY_DATA_DIR): "
                        "run this where `registry serve` runs, or set REGISTRY_DATA_DIR or "
                        "REGISTRY_DATABASE_URL"
                    )
                self._url = self._exit.enter_context(server.serve() if serve else server.attach())
                if serve:
                    click.echo(f"embedded PostgreSQL ready in {server.data_dir}", err=True)
                migrations.upgrade(self._url)
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
        return EmbeddedPostgres(self.settings.data_dir)

    def run(self, work: Callable[[Database], Awaitable[T]], url: str | None = None) -> T:
        """Run ``work`` on a small pool of the database, in an event loop of its own."""
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


@contextlib.contextmanager
def attached_database() -> Iterator[str]:
    """The URL of a database at head, for scripts beside the CLI (bench/): the embedded server
    attached (created and migrated when REGISTRY_DATA_DIR holds none yet; released afterwards), or
    the external one (upgraded to head)."""
    registry = Registry()
    try:
        yield registry.url(migrate=True)
    finally:
        registry.close()


DEFAULT_URL = "http://127.0.0.1:8000"  # where the sync commands find the registry by default


def _one_line(error: BaseException) -> str:
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
    expects to go wrong ends as one line on stderr and exit status 1, with nothing written."""

    def invoke(self, ctx: click.Context) -> Any:
        ctx.obj = registry_context = Registry()
        try:
            return super().invoke(ctx)
        except (
            CommandError, RegistryError, EmbeddedError, SettingsError, SQLAlchemyError, OSError,
            httpx.TransportError, sync.FileError, login.LoginError,
        ) as error:  # fmt: skip
            fail(_one_line(error))
        finally:
            registry_context.close()


pass_registry = click.make_pass_decorator(Registry)


@click.group(cls=RegistryGroup)
@click.version_option(package_name="prompt-registry")
def main() -> None:
    """Prompt Registry: prompt templates in PostgreSQL, served over MCP."""


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
@click.option("--workers", type=int, default=None, help="Worker processes [REGISTRY_WORKERS, 1].")
@pass_registry
def serve(registry: Registry, host: str | None, port: int | None, workers: int | None) -> None:
    """Run the registry (REST API and MCP endpoint) with uvicorn."""
    import uvicorn

    from registry import serving
    from registry.logs import configure_logging, logging_config

    settings = registry.override(host=host, port=port, workers=workers)
    _check_port(settings.host, settings.port)
    configure_logging(settings.log_level, settings.log_json)
    # Until uvicorn installs its own handlers, SIGTERM unwinds like Ctrl-C so the database stops.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    made: str | None = None  # the metrics folder this command made, removed when it ends
    with contextlib.suppress(KeyboardInterrupt), _removed(lambda: made):
        url = registry.url(serve=True)
        os.environ["REGISTRY_DATABASE_URL"] = url  # read by every worker's settings
        _size_pools(settings, url)
        if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:  # /metrics adds up every worker
            made = tempfile.mkdtemp(prefix="registry-metrics-")
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
        uvicorn.run(
            "registry.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_config=logging_config(settings.log_level, settings.log_json),
            # Access lines are below the level uvicorn.access logs at (logs.py); with the log on,
            # uvicorn would still build each line's client address and quoted path (3 % of a
            # cached prompts/get's worker time, sampled by bench/profile).
            access_log=False,
            timeout_graceful_shutdown=10,
            http=serving.PROTOCOL,  # httptools, with a bound on the time a request's head takes
            limit_concurrency=settings.max_connections or _connection_budget(),
        )


@contextlib.contextmanager
def _removed(folder: Callable[[], str | None]) -> Iterator[None]:
    """Remove the folder ``folder()`` names (if any) when the block ends, however it ends."""
    try:
        yield
    finally:
        path = folder()
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


def _size_pools(settings: Settings, url: str) -> None:
    """Give each worker its share of the server's connections (REGISTRY_DB_WORKER_CONNECTIONS, read
    by every worker), unless the pools are sized by hand or a transaction pooler stands between, and
    say so."""
    if settings.db_worker_connections is None:
        if (
            settings.through_pooler
            or {"db_pool_size", "db_max_overflow"} & settings.model_fields_set
        ):
            return
        try:
            each, limit, reserved = asyncio.run(engine.share_of(url, settings.workers))
        except ValueError as error:
            raise CommandError(str(error)) from None
        os.environ["REGISTRY_DB_WORKER_CONNECTIONS"] = str(each)
        where = f"max_connections {limit} ({reserved} reserved, {engine.SPARE_CONNECTIONS} spare)"
    else:
        each, where = settings.db_worker_connections, "REGISTRY_DB_WORKER_CONNECTIONS"
    sizes = engine.PoolSizes.within(each)
    click.echo(
        f"connections: {settings.workers} worker(s) x {sizes.total} (pool {sizes.orm}, "
        f"reads {sizes.reads}, listener 1), within {where}",
        err=True,
    )


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


# --- tenants ----------------------------------------------------------------------------------


@main.group()
def tenant() -> None:
    """Create and list tenants."""


@tenant.command("create")
@click.argument("slug")
@click.option("--title", default=None, help="Human-readable name.")
@click.option("--public-read", is_flag=True, help="Serve the MCP endpoint without an API key.")
@pass_registry
def tenant_create(registry: Registry, slug: str, title: str | None, public_read: bool) -> None:
    """Create a tenant named SLUG."""
    tenants.check_slug(slug)

    async def work(db: Database) -> uuid.UUID:
        async with db.app_tx() as session:
            created = await tenants.create_tenant(
                session, slug=slug, title=title, public_read=public_read, actor=tenants.OPERATOR
            )
            return created.id

    click.echo(f"created tenant {slug} ({registry.run(work)})")


@tenant.command("list")
@pass_registry
def tenant_list(registry: Registry) -> None:
    """List tenants."""

    async def work(db: Database) -> list[tuple[str, ...]]:
        async with db.app_tx() as session:
            return [
                (t.slug, str(t.id), "public" if t.public_read else "private", t.title or "")
                for t in await tenants.list_tenants(session)
            ]

    _table(("SLUG", "ID", "READ", "TITLE"), registry.run(work))


@tenant.command("api-keys")
@click.argument("slug")
@click.argument("state", type=click.Choice(["on", "off"]))
@pass_registry
def tenant_api_keys(registry: Registry, slug: str, state: str) -> None:
    """Accept API keys for SLUG, or not (off: OAuth access tokens only)."""
    patch = TenantPatch(api_keys=state == "on")
    _in_tenant(
        registry, slug,
        lambda session, found: tenants.update_tenant(session, found, patch, actor=tenants.OPERATOR),
    )  # fmt: skip
    click.echo(f"API keys of tenant {slug}: {state}", err=True)


# --- OAuth issuers ------------------------------------------------------------------------------


@main.group()
def issuer() -> None:
    """Which OAuth issuers a tenant trusts, and how their tokens' claims map to roles."""


def _rule(text: str) -> dict[str, str]:
    """CLAIM=VALUE:ROLE (the claim equals or holds VALUE) or CLAIM@DOMAIN:ROLE (an e-mail address
    in DOMAIN)."""
    test, _, role = text.rpartition(":")
    for mark, kind in (("=", "equals"), ("@", "email_domain")):
        claim, found, value = test.partition(mark)
        if found and claim and value:
            return {"claim": claim, kind: value, "role": role}
    raise CommandError(f"a rule is CLAIM=VALUE:ROLE or CLAIM@DOMAIN:ROLE, not {text!r}")


def _replace_issuer(
    registry: Registry, slug: str, issuer_url: str, entry: dict[str, Any] | None
) -> None:
    """The tenant's issuers with ``issuer_url`` replaced by ``entry`` (or removed), in one
    transaction through the same service as the REST API."""

    async def work(session: Any, found: Any) -> None:
        kept = [
            {"issuer": i.issuer, "rules": i.rules,
             "introspection_client_id": i.introspection_client_id,
             "introspection_secret": i.introspection_secret}
            for i in await tenants.issuers(session, found.id) if i.issuer != issuer_url
        ]  # fmt: skip
        body = IssuersIn.model_validate({"issuers": kept + ([entry] if entry else [])})
        await tenants.set_issuers(session, found, tenants.OPERATOR, body)

    _in_tenant(registry, slug, work)


@issuer.command("add")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.argument("issuer_url")
@click.option("--rule", "rules", multiple=True, required=True,
              help="CLAIM=VALUE:ROLE or CLAIM@DOMAIN:ROLE (repeat).")  # fmt: skip
@click.option("--introspection-client-id", default=None, help="For opaque tokens (RFC 7662).")
@click.option("--introspection-secret", envvar="REGISTRY_INTROSPECTION_SECRET", default=None,
              help="That client's secret [REGISTRY_INTROSPECTION_SECRET].")  # fmt: skip
@pass_registry
def issuer_add(
    registry: Registry,
    slug: str,
    issuer_url: str,
    rules: tuple[str, ...],
    introspection_client_id: str | None,
    introspection_secret: str | None,
) -> None:
    """Trust ISSUER_URL for the tenant (replacing its rules if it is trusted already)."""
    entry = {
        "issuer": issuer_url, "rules": [_rule(r) for r in rules],
        "introspection_client_id": introspection_client_id,
        "introspection_secret": introspection_secret,
    }  # fmt: skip
    _replace_issuer(registry, slug, issuer_url, entry)
    click.echo(f"tenant {slug} trusts {issuer_url}", err=True)


@issuer.command("remove")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.argument("issuer_url")
@pass_registry
def issuer_remove(registry: Registry, slug: str, issuer_url: str) -> None:
    """Stop trusting ISSUER_URL for the tenant."""
    _replace_issuer(registry, slug, issuer_url, None)
    click.echo(f"tenant {slug} no longer trusts {issuer_url}", err=True)


@issuer.command("list")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@pass_registry
def issuer_list(registry: Registry, slug: str) -> None:
    """The issuers a tenant trusts and their rules (never an introspection secret)."""
    rows = _in_tenant(registry, slug, lambda session, found: tenants.list_issuers(session, found))
    _table(
        ("ISSUER", "RULES", "INTROSPECTION"),
        [(i.issuer, "; ".join(_rule_text(r) for r in i.rules), i.introspection_client_id or "")
         for i in rows],
    )  # fmt: skip


def _rule_text(rule: dict[str, Any]) -> str:
    if "equals" in rule:
        return f"{rule['claim']}={rule['equals']}:{rule['role']}"
    return f"{rule['claim']}@{rule['email_domain']}:{rule['role']}"


# --- snapshots -------------------------------------------------------------------------------


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option(
    "--label", default=None, help="The label to snapshot (default: the tenant's default)."
)
@pass_registry
def snapshot(registry: Registry, file: Path, slug: str, label: str | None) -> None:
    """Write every prompt LABEL serves to FILE, signed with REGISTRY_SNAPSHOT_KEY_FILE: what a
    PromptClient starts from when the registry cannot be reached."""
    key_file = registry.settings.snapshot_key_file
    if key_file is None:
        raise CommandError(
            "set REGISTRY_SNAPSHOT_KEY_FILE to an Ed25519 private key (PEM), e.g. one made by "
            "`openssl genpkey -algorithm ed25519 -out snapshot.pem`"
        )
    try:
        key = signing.private_key(key_file.read_bytes())
    except OSError as error:
        raise CommandError(f"cannot read the snapshot key {key_file}: {error.strerror}") from None
    except signing.SignatureRefused as error:
        raise CommandError(f"{key_file}: {error}") from None
    tenants.check_slug(slug)

    async def work(db: Database) -> dict[str, Any]:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            return await snapshots.snapshot(session, found, label or found.default_label)

    document = registry.run(work)
    signed = signing.sign(document, key)
    partial = file.with_name(file.name + ".partial")
    partial.write_bytes(orjson.dumps(signed))
    partial.replace(file)  # whole or not at all
    click.echo(
        f"wrote {len(document['prompts'])} prompt(s) of {slug}@{document['label']} "
        f"(change {document['seq']}) to {file}, signed by key {signed['key_id']}",
        err=True,
    )


# --- webhooks -----------------------------------------------------------------------------------


@main.group()
def webhook() -> None:
    """Register, list and remove webhook endpoints."""


def _public_host(url: str) -> bool:
    try:
        _, host, _ = outbound.check_url(url)
        outbound.check_literal(host, allow_private=False)
    except outbound.Refused:
        return False
    return host not in ("localhost",) and not host.endswith(".localhost")


def _in_tenant(registry: Registry, slug: str, work: Callable[[Any, Any], Awaitable[T]]) -> T:
    """``work(session, tenant)`` in one transaction scoped to the tenant ``slug``."""
    tenants.check_slug(slug)

    async def run(db: Database) -> T:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            return await work(session, found)

    return registry.run(run)


@webhook.command("create")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option("--url", required=True, help="Where deliveries go (http or https).")
@click.option("--event", "events", multiple=True, type=click.Choice(EVENT_TYPES),
              help="An event type to send (repeat; none: every event).")  # fmt: skip
@click.option("--description", default=None)
@pass_registry
def webhook_create(
    registry: Registry, slug: str, url: str, events: tuple[str, ...], description: str | None
) -> None:
    """Register an endpoint; its signing secret is printed once, alone on stdout."""
    body = EndpointIn.model_validate(
        {"url": url, "events": list(events), "description": description}
    )
    # The server that delivers is the one judge of private addresses (its own
    # REGISTRY_WEBHOOK_ALLOW_PRIVATE, which this command cannot see): registered as given, refused
    # at delivery there if it must be, with the reason in the delivery log.
    created = _in_tenant(
        registry, slug,
        lambda session, found: webhooks.create(session, found, OPERATOR, body, allow_private=True),
    )  # fmt: skip
    click.echo(f"created webhook {created.id} for tenant {slug} -> {created.url}", err=True)
    if not _public_host(url):
        click.echo(
            f"note: {url} is not a public address: the server delivers to it only with "
            f"{webhooks.ALLOWED_BY}=true where it runs (its delivery log says so otherwise)",
            err=True,
        )
    click.echo(created.secret)


@webhook.command("list")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@pass_registry
def webhook_list(registry: Registry, slug: str) -> None:
    """List a tenant's endpoints (never their secrets)."""
    rows = _in_tenant(
        registry, slug, lambda session, found: webhooks.list_endpoints(session, found)
    )
    _table(
        ("ID", "URL", "EVENTS", "FAILING SINCE", "DISABLED"),
        [(str(e.id), e.url, ",".join(e.events) or "all", _when(e.failing_since), _when(e.disabled_at))
         for e in rows],
    )  # fmt: skip


@webhook.command("delete")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.argument("endpoint_id", type=click.UUID)
@pass_registry
def webhook_delete(registry: Registry, slug: str, endpoint_id: uuid.UUID) -> None:
    """Remove an endpoint and its delivery log."""
    _in_tenant(
        registry, slug,
        lambda session, found: webhooks.remove(session, found, OPERATOR, endpoint_id),
    )  # fmt: skip
    click.echo(f"deleted webhook {endpoint_id}", err=True)


# --- keys -------------------------------------------------------------------------------------


@main.group()
def key() -> None:
    """Create, list and revoke API keys."""


@key.command("create")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option(
    "--role", required=True, type=click.Choice(list(ROLE_RANK)), help="What the key may do."
)
@click.option("--name", default=None, help="A name to recognise the key by.")
@click.option("--expires-in-days", type=click.IntRange(min=1), default=None, help="Expiry.")
@pass_registry
def key_create(
    registry: Registry, slug: str, role: str, name: str | None, expires_in_days: int | None
) -> None:
    """Create a key; its secret is printed once, alone on stdout."""
    tenants.check_slug(slug)
    expires_at = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def work(db: Database) -> tuple[str, str, str]:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            created, secret = await tenants.create_key(
                session, tenant=found, role=role, name=name, actor=tenants.OPERATOR,
                expires_at=expires_at,
            )  # fmt: skip
            return secret, str(created.id), created.name

    secret, key_id, key_name = registry.run(work)
    click.echo(f"created {role} key {key_name} ({key_id}) for tenant {slug}", err=True)
    click.echo(secret)


@key.command("list")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@pass_registry
def key_list(registry: Registry, slug: str) -> None:
    """List a tenant's keys (never their secrets)."""
    tenants.check_slug(slug)

    async def work(db: Database) -> list[tuple[str, ...]]:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            return [
                (str(k.id), k.name, k.role, _when(k.created_at), _when(k.expires_at),
                 _when(k.revoked_at), _when(k.last_used_at))
                for k in await tenants.list_keys(session, found.id)
            ]  # fmt: skip

    _table(("ID", "NAME", "ROLE", "CREATED", "EXPIRES", "REVOKED", "LAST USED"), registry.run(work))


@key.command("revoke")
@click.argument("key_id")
@pass_registry
def key_revoke(registry: Registry, key_id: str) -> None:
    """Revoke the key KEY_ID at once."""
    try:
        parsed = uuid.UUID(key_id)
    except ValueError:
        raise CommandError(
            f"invalid key id {key_id!r}: expected a UUID as shown by `registry key list`"
        ) from None

    async def work(db: Database) -> str:
        async with db.operator_tx() as session:
            tenant_id = await tenants.find_key_tenant(session, parsed)
        async with db.tenant_tx(tenant_id) as session:
            revoked = await tenants.revoke_key(
                session, tenant_id=tenant_id, key_id=parsed, actor=tenants.OPERATOR
            )
            return revoked.name

    click.echo(f"revoked key {registry.run(work)} ({parsed})")


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


# --- push / pull ------------------------------------------------------------------------------

_url_option = click.option(
    "--url", envvar="REGISTRY_URL", default=DEFAULT_URL, show_default=True,
    help="The registry's base URL [REGISTRY_URL].",
)  # fmt: skip
_key_option = click.option(
    "--key",
    envvar="REGISTRY_API_KEY",
    default=None,
    help="An API key of the tenant [REGISTRY_API_KEY]; without one, the token of 'registry login'.",
)


def _credential(url: str, slug: str, key: str | None) -> str:
    """The API key given, else the tenant's login token (refreshed when due)."""
    if key:
        return key
    token = login.access_token(url, slug)
    if token is None:
        raise CommandError(
            f"no credential for tenant {slug!r}: give --key (REGISTRY_API_KEY) "
            f"or run 'registry login --tenant {slug}'"
        )
    return token


@main.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@_url_option
@_key_option
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Move protected labels even onto versions whose arguments break their callers.",
)
def push(folder: Path, slug: str, url: str, key: str | None, dry_run: bool, force: bool) -> None:
    """Push every prompt file in FOLDER (NAME.yaml, NAME.md) to the tenant.

    Unchanged files write nothing; a bad file is reported and the others still go."""
    files = sync.prompt_files(folder)
    if not files:
        raise CommandError(f"no prompt files (*.yaml, *.yml, *.md) in {folder}")
    with (
        contextlib.closing(sync.Client(url, _credential(url, slug, key), slug)) as client,
        click.progressbar(length=len(files), label="pushing", file=sys.stderr) as bar,
    ):
        outcomes = sync.push(
            client, folder, dry_run=dry_run, force=force, progress=lambda _: bar.update(1)
        )
    _report(outcomes, dry_run=dry_run)


@main.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@_url_option
@_key_option
@click.option("--label", "labels", multiple=True, help="Move this label to the new version.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Move protected labels even onto versions whose arguments break their callers.",
)
def refresh(
    names: tuple[str, ...],
    slug: str,
    url: str,
    key: str | None,
    labels: tuple[str, ...],
    dry_run: bool,
    force: bool,
) -> None:
    """Write new versions of the prompts NAMES whose partials are resolved anew (a prompt whose
    partials still resolve to the locked versions is left as it is)."""
    with contextlib.closing(sync.Client(url, _credential(url, slug, key), slug)) as client:
        outcomes = [
            sync.refresh_prompt(client, name, list(labels), dry_run=dry_run, force=force)
            for name in names
        ]
    _report(outcomes, dry_run=dry_run, unit="prompt(s)")


@main.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@_url_option
@_key_option
@click.option("--label", default=None, help="Pull the version under this label (default: latest).")
def pull(folder: Path, slug: str, url: str, key: str | None, label: str | None) -> None:
    """Write the tenant's prompts into FOLDER, one NAME.yaml per prompt (blobs under FOLDER/blobs)."""
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sync.Client(url, _credential(url, slug, key), slug)) as client:
        names = sync.list_names(client)
        with click.progressbar(names, label="pulling", file=sys.stderr) as bar:
            outcomes = [sync.pull_prompt(client, name, folder, label=label) for name in bar]
    _report(outcomes, dry_run=False)


@main.command("login")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@_url_option
@click.option(
    "--client-id", envvar="REGISTRY_OAUTH_CLIENT_ID", default=login.DEFAULT_CLIENT_ID,
    show_default=True, help="The CLI's client at the tenant's issuer [REGISTRY_OAUTH_CLIENT_ID].",
)  # fmt: skip
def login_command(slug: str, url: str, client_id: str) -> None:
    """Sign in at the tenant's identity provider (device flow) and keep the token for push, pull
    and refresh, which use it when no API key is given."""
    tenants.check_slug(slug)
    credential = login.device_login(
        url, slug, client_id=client_id, tell=lambda line: click.echo(line, err=True)
    )
    where = login.save(credential)
    click.echo(f"logged in to {slug} through {credential.issuer}; token kept in {where}", err=True)


def _report(outcomes: list[Any], *, dry_run: bool, unit: str = "file(s)") -> None:
    for outcome in outcomes:
        click.echo(outcome.line(), err=outcome.action == "error")
    errors = sum(o.action == "error" for o in outcomes)
    summary = f"{len(outcomes)} {unit}, {errors} error(s)" + (
        " (dry run: nothing written)" if dry_run else ""
    )
    click.echo(summary, err=True)
    if errors:
        sys.exit(1)


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
