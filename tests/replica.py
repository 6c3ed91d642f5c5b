"""A real streaming replica of the test PostgreSQL server, made with the embedded server's own
``pg_basebackup`` and started with its ``pg_ctl`` (hot standby). Only for the embedded test server:
with REGISTRY_TEST_DATABASE_URL set the replica tests skip (that server's replication is not ours)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from registry.db.embedded import (
    PORT,
    SUPERUSER,
    EmbeddedPostgres,
    binary,
    chown_tree,
    system_user,
)
from tests.conftest import PgServer

WAIT = 60  # seconds: a bound on every wait, never a sleep of its own


@dataclass
class Replica:
    server: EmbeddedPostgres

    def url(self, database: str) -> str:
        """A URL as a user would write it, of ``database`` on the replica."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.server.socket_dir}&port={PORT}"

    async def connect(self, database: str) -> asyncpg.Connection:
        """A superuser connection to the replica, once ``database`` exists there (bounded wait)."""
        deadline = asyncio.get_running_loop().time() + WAIT
        while True:
            try:
                return await asyncpg.connect(
                    host=str(self.server.socket_dir), port=PORT, user=SUPERUSER, database=database
                )
            except asyncpg.InvalidCatalogNameError:  # not replayed yet
                assert asyncio.get_running_loop().time() < deadline, f"{database} never arrived"
                await asyncio.sleep(0.05)


def make_standby(
    primary_socket_dir: str, root: Path, settings: dict[str, str], port: object = PORT
) -> EmbeddedPostgres:
    """A hot standby of the server at ``primary_socket_dir``, in ``root``, started."""
    server = EmbeddedPostgres(root, settings={"hot_standby": "on", **settings})
    server.pgdata.mkdir(parents=True)
    server.pgdata.chmod(0o700)
    chown_tree(root, system_user())
    if system_user() is not None:
        root.chmod(0o711)
    server.run(
        binary("pg_basebackup"), "-h", primary_socket_dir, "-p", str(port),
        "-U", SUPERUSER, "-D", str(server.pgdata), "--write-recovery-conf",
        "--wal-method=stream", "--checkpoint=fast",
    )  # fmt: skip
    server._start()
    return server


@pytest.fixture(scope="session")
def replica(pg_server: PgServer) -> Iterator[Replica]:
    if os.environ.get("REGISTRY_TEST_DATABASE_URL"):
        pytest.skip("the replica tests need the embedded test server")
    primary = make_url(pg_server.admin_url)
    root = Path(tempfile.mkdtemp(prefix="registry-replica-"))
    server: EmbeddedPostgres | None = None
    try:
        server = make_standby(
            str(primary.query["host"]), root, {"fsync": "off"}, primary.query.get("port", PORT)
        )
        yield Replica(server)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
