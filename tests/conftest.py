"""Real-PostgreSQL fixtures.

By default one embedded PostgreSQL server is started for the whole run (throw-away, fsync off). Set
REGISTRY_TEST_DATABASE_URL (a superuser URL) to use another server instead. A template database is
migrated to head once; every test that touches the database gets its own clone of it, so tests may
commit, LISTEN and NOTIFY freely and never see each other's rows.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import asyncpg
import httpx
import pytest
from sqlalchemy.engine import make_url

from registry.app import create_app
from registry.config import load_settings
from registry.db import migrate
from registry.db.embedded import EmbeddedPostgres
from registry.db.engine import Database

ROOT = Path(__file__).resolve().parent.parent
_counter = itertools.count()


@dataclass(frozen=True)
class PgServer:
    """A PostgreSQL server the tests may create databases on, as a superuser."""

    admin_url: str  # SQLAlchemy form, database "postgres"

    def url(self, database: str) -> str:
        return make_url(self.admin_url).set(database=database).render_as_string(hide_password=False)

    def plain_url(self, database: str) -> str:
        """The same URL as a user would write it (postgresql://), for the CLI."""
        return self.url(database).replace("postgresql+asyncpg://", "postgresql://", 1)

    def asyncpg_kwargs(self, database: str) -> dict[str, object]:
        url = make_url(self.url(database))
        kwargs: dict[str, object] = {"user": url.username, "database": database}
        if url.password:
            kwargs["password"] = url.password
        host = url.query.get("host") or url.host
        kwargs["host"] = host
        kwargs["port"] = int(url.query.get("port") or url.port or 5432)  # type: ignore[arg-type]
        return kwargs

    async def connect(self, database: str = "postgres") -> asyncpg.Connection:
        return await asyncpg.connect(**self.asyncpg_kwargs(database))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that start servers first: two processes take a whole file at a time, and the run
    ends when its last file does, so the long files start early and the short ones fill in after
    them (the order within each group stays as written)."""
    del config
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    external = os.environ.get("REGISTRY_TEST_DATABASE_URL")
    if external:
        url = make_url(external.replace("postgresql://", "postgresql+asyncpg://", 1))
        yield PgServer(url.set(database="postgres").render_as_string(hide_password=False))
        return
    data_dir = Path(tempfile.mkdtemp(prefix="registry-test-pg-"))
    server = EmbeddedPostgres(
        data_dir, settings={"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
    )
    try:
        with server.serve():
            yield PgServer(server.url("postgres"))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
async def template_db(pg_server: PgServer) -> AsyncIterator[str]:
    name = f"registry_template_{os.getpid()}"
    conn = await pg_server.connect()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await conn.execute(f'CREATE DATABASE "{name}"')
        await asyncio.to_thread(migrate.upgrade, pg_server.url(name))
        yield name
    finally:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


async def _create_database(pg_server: PgServer, template: str | None) -> str:
    name = f"registry_test_{os.getpid()}_{next(_counter)}"
    conn = await pg_server.connect()
    try:
        source = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
        await conn.execute(f'CREATE DATABASE "{name}"{source}')
    finally:
        await conn.close()
    return name


async def _drop_database(pg_server: PgServer, name: str) -> None:
    conn = await pg_server.connect()
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
async def db_name(pg_server: PgServer, template_db: str) -> AsyncIterator[str]:
    """A fresh database at head, cloned from the template, dropped afterwards."""
    name = await _create_database(pg_server, template_db)
    yield name
    await _drop_database(pg_server, name)


@pytest.fixture
async def empty_db_name(pg_server: PgServer) -> AsyncIterator[str]:
    """A fresh database with no schema at all."""
    name = await _create_database(pg_server, None)
    yield name
    await _drop_database(pg_server, name)


@pytest.fixture
async def db(pg_server: PgServer, db_name: str) -> AsyncIterator[Database]:
    database = Database(pg_server.url(db_name), pool_size=4, max_overflow=4)
    yield database
    await database.dispose()


@pytest.fixture
async def superuser(pg_server: PgServer, db_name: str) -> AsyncIterator[asyncpg.Connection]:
    """A raw connection as the superuser (bypasses row-level security) to seed and inspect."""
    conn = await pg_server.connect(db_name)
    yield conn
    await conn.close()


def unavailable(reason: str) -> NoReturn:
    """A test needs something this machine lacks (a Debian package, the schemas, git history):
    skipped with the reason, except under CI, where it fails."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def modules_loaded(statements: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules named by ``prefixes`` that a fresh interpreter holds after ``statements``."""
    probe = (
        f"import json, sys; {statements}; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(found.stdout)
    return loaded


def registry_command(
    *args: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the installed `registry` CLI as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "registry", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )


@dataclass
class LiveServer:
    url: str
    process: subprocess.Popen[str]
    log: Path  # the server's stderr: a file, since a pipe nobody reads fills and stalls the server
    database: str | None = None  # its database's name, when a module's server has one of its own

    def said(self) -> str:
        """What the server wrote to stderr so far (for a failing test's message)."""
        return self.log.read_text(errors="replace")

    def metric(self, name: str) -> dict[str, float]:
        """Every sample of one metric on /metrics (all workers together), by its label text
        ("" for none, else as exposed: '{cache="listings"}')."""
        answer = httpx.get(
            f"{self.url}/metrics", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        )
        assert answer.status_code == 200, answer.text
        found = {}
        for line in answer.text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                labels, _, value = line[len(name) :].rpartition(" ")
                found[labels] = float(value)
        return found

    def tenant(
        self,
        slug: str,
        *,
        public_read: bool = False,
        roles: tuple[str, ...] = ("publisher",),
        prompts: Sequence[Mapping[str, Any]] = (),
        tools: bool = False,
    ) -> dict[str, str]:
        """Create a tenant through the operator API, a key per role (role -> secret), and
        ``prompts``, each labelled production."""
        operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        base = f"{self.url}/api/v1/tenants"
        created = httpx.post(
            base, json={"slug": slug, "public_read": public_read}, headers=operator
        )
        assert created.status_code == 201, created.text
        keys = {}
        for role in roles:
            made = httpx.post(f"{base}/{slug}/keys", json={"role": role}, headers=operator)
            assert made.status_code == 201, made.text
            keys[role] = str(made.json()["secret"])
        for body in prompts:
            written = httpx.post(
                f"{base}/{slug}/prompts", json={**body, "labels": ["production"]}, headers=operator
            )
            assert written.status_code == 201, written.text
        if tools:  # its prompts offered as MCP tools too
            on = httpx.patch(f"{base}/{slug}", json={"mcp_tools": True}, headers=operator)
            assert on.status_code == 200, on.text
        return keys

    def skill(self, slug: str, body: Mapping[str, Any], label: str = "production") -> None:
        """A skill of tenant ``slug`` (written as the operator), labelled ``label``."""
        written = httpx.post(
            f"{self.url}/api/v1/tenants/{slug}/skills",
            json={**body, "labels": [label]},
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        )
        assert written.status_code == 201, written.text


@asynccontextmanager
async def module_server(
    pg_server: PgServer, template_db: str, *, workers: int = 1, **env: str
) -> AsyncIterator[LiveServer]:
    """A live server on a database of its own (for a module's tests to share: one start, not one
    per test), removed afterwards."""
    name = await _create_database(pg_server, template_db)
    server = start_server(
        {"REGISTRY_DATABASE_URL": pg_server.plain_url(name), "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
         **env},
        workers=workers,
    )  # fmt: skip
    server.database = name
    try:
        yield server
    finally:
        stop_server(server)
        await _drop_database(pg_server, name)


@dataclass
class Instances:
    """Registry instances on one database of their own, shared by a module's tests (each test keeps
    to tenants of its own), and a superuser connection to that database."""

    servers: list[LiveServer]
    superuser: asyncpg.Connection
    env: dict[str, str]


_slugs = itertools.count()


def fresh_slug(prefix: str = "t") -> str:
    """A tenant name no other test of the run uses (for tests sharing a module's database)."""
    return f"{prefix}{os.getpid()}x{next(_slugs)}"


@asynccontextmanager
async def module_instances(
    pg_server: PgServer,
    template_db: str,
    workers: Sequence[int],
    urls: Callable[[str], Mapping[str, str]] | None = None,
    **env: str,
) -> AsyncIterator[Instances]:
    """One registry instance per entry of ``workers`` (its worker count) on a database of their own,
    ready once every worker holds its LISTEN connection; stopped and the database dropped after.
    ``urls`` gives the database settings from the database's name (by default its direct URL)."""
    name = await _create_database(pg_server, template_db)
    where = urls(name) if urls else {"REGISTRY_DATABASE_URL": pg_server.plain_url(name)}
    shared = {**where, "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN, **env}
    servers: list[LiveServer] = []
    folders: list[str] = []
    superuser = await pg_server.connect(name)
    try:
        for count in workers:
            metrics = tempfile.mkdtemp(prefix="registry-metrics-")  # one per instance, as deployed
            folders.append(metrics)
            servers.append(
                start_server({**shared, "PROMETHEUS_MULTIPROC_DIR": metrics}, workers=count)
            )
            servers[-1].database = name
        await wait_listeners(superuser, sum(workers))
        yield Instances(servers, superuser, shared)
    finally:
        for server in reversed(servers):
            stop_server(server)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        await superuser.close()
        await _drop_database(pg_server, name)


async def wait_listeners(superuser: asyncpg.Connection, count: int, wait: float = 60) -> None:
    """Wait (bounded) until ``count`` workers hold their LISTEN connection on the connection's
    database: /readyz answering on one worker says nothing of the others."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        found = await superuser.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'registry-listener' "
            "AND datname = current_database()"
        )
        if found == count:
            return
        assert asyncio.get_running_loop().time() < deadline, f"{found} of {count} listeners"
        await asyncio.sleep(0.05)


def start_server(
    env: dict[str, str],
    *,
    workers: int = 1,
    timeout: float = 60,
    port: int | None = None,
    cwd: Path = ROOT,
) -> LiveServer:
    """uvicorn serving the registry app in a child process, ready when /readyz answers 200 (from
    ``cwd``: another release's tree, put first on PYTHONPATH, is imported from any other folder)."""
    import time

    import httpx

    port = port or free_port()
    handle, name = tempfile.mkstemp(prefix="registry-server-", suffix=".log")
    with os.fdopen(handle, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "registry.app:create_app", "--factory",
             "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers), "--log-level", "warning"],
            env={**os.environ, **env}, cwd=cwd, stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
    server = LiveServer(f"http://127.0.0.1:{port}", process, Path(name))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{server.url}/readyz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    why = "did not become ready" if process.poll() is None else "exited"
    said = server.said()
    stop_server(server)
    raise RuntimeError(f"server {why}: {said}")


def stop_server(server: LiveServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    server.log.unlink(missing_ok=True)


# --- `registry serve` on the embedded server ---------------------------------------------


def wait_ready(process: subprocess.Popen[str], port: int, timeout: float = 90) -> dict[str, str]:
    """Wait (bounded) until `registry serve` answers /readyz with 200; its JSON."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"serve exited early: {process.stderr.read() if process.stderr else ''}"
            )
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
            if response.status_code == 200:
                return dict(response.json())
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("serve did not become ready in time")


def serve_embedded(
    data_dir: Path, port: int, *extra: str, settings: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """`registry serve` on the embedded PostgreSQL in ``data_dir``, with no other REGISTRY_ setting
    than ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    env["REGISTRY_DATA_DIR"] = str(data_dir)
    env.update(settings or {})
    return subprocess.Popen(
        [sys.executable, "-m", "registry", "serve", "--port", str(port), *extra],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop_serving(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)


OPERATOR_TOKEN = "operator-token-for-tests"


@pytest.fixture
def live_server(pg_server: PgServer, db_name: str) -> Iterator[LiveServer]:
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
    )
    yield server
    stop_server(server)


# --- the REST API in process --------------------------------------------------------------


@dataclass
class Api:
    client: httpx.AsyncClient
    app: Any = None  # the application under test, for what only its insides show

    async def console_sign_in(self, secret: str, tenant: str = "acme") -> str:
        """Signed in to ``tenant``'s console with a key's secret (its cookies cleared first); the
        session's CSRF token, as a page carries it."""
        self.client.cookies.clear()
        signed = await self.client.post(
            f"/ui/{tenant}/login", data={"key": secret}, headers={"Origin": "http://test"}
        )
        assert signed.status_code == 303, signed.text
        page = await self.client.get(f"/ui/{tenant}/prompts")
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert found, page.text[:500]
        return found.group(1)

    def as_key(self, secret: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"} if secret else {}

    @property
    def operator(self) -> dict[str, str]:
        return self.as_key(OPERATOR_TOKEN)

    async def tenant(self, slug: str, **body: object) -> dict[str, str]:
        """Create a tenant and one key per role; returns role -> Authorization headers."""
        created = await self.client.post(
            "/api/v1/tenants", json={"slug": slug, **body}, headers=self.operator
        )
        assert created.status_code == 201, created.text
        keys = {}
        for role in ("reader", "editor", "publisher", "admin"):
            response = await self.client.post(
                f"/api/v1/tenants/{slug}/keys",
                json={"role": role, "name": role},
                headers=self.operator,
            )
            assert response.status_code == 201, response.text
            keys[role] = response.json()["secret"]
        return {role: f"Bearer {secret}" for role, secret in keys.items()}


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {}


@pytest.fixture
async def api(
    pg_server: PgServer, db_name: str, settings_overrides: dict[str, object]
) -> AsyncIterator[Api]:
    settings = load_settings(
        database_url=pg_server.url(db_name),
        operator_token=OPERATOR_TOKEN,
        gc_freeze=False,  # the app in the test process: its objects are not the app's to freeze
        **settings_overrides,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Api(client, app)


@asynccontextmanager
async def serving_over_a_socket(app: Any) -> AsyncIterator[tuple[str, Any]]:
    """``app`` under a real uvicorn in this process, with `registry serve`'s protocol
    (registry.http_protocol), on a socket of its own: its base URL and the uvicorn server. The app's
    lifespan is the caller's."""
    import uvicorn

    from registry.http_protocol import TimedHeadProtocol

    config = uvicorn.Config(
        app, http=TimedHeadProtocol, lifespan="off", log_level="warning",
        timeout_graceful_shutdown=5,  # a test that fails with a request still open ends too
    )  # fmt: skip
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    listening = socket.create_server(("127.0.0.1", 0))
    await server.startup(sockets=[listening])
    host, port = listening.getsockname()
    try:
        yield f"http://{host}:{port}", server
    finally:
        server.should_exit = True
        await server.shutdown(sockets=[listening])


def auth(header: str) -> dict[str, str]:
    return {"Authorization": header}


SIMPLE = {
    "name": "greet",
    "title": "Greeting",
    "description": "Says hello",
    "arguments": [{"name": "who", "required": True, "description": "whom to greet"}],
    "messages": [{"role": "user", "content": {"type": "text", "text": "Hello {{who}}!"}}],
}
