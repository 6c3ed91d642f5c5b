"""A real PgBouncer in transaction mode in front of the test PostgreSQL server (Debian's
``pgbouncer`` package; `.ci/run` installs it). Where the binary is missing the pooler tests skip,
except under CI, where they fail."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from registry.db.embedded import system_user
from tests.conftest import PgServer, free_port, unavailable

BINARY = "pgbouncer"
WAIT = 60  # seconds: a bound on waiting for the pooler to accept connections


@dataclass(frozen=True)
class Pooler:
    port: int
    user: str

    def url(self, database: str) -> str:
        """A URL as a user would write it (postgresql://) of ``database`` through the pooler."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"


def _binary() -> str:
    found = shutil.which(BINARY) or (
        f"/usr/sbin/{BINARY}" if Path(f"/usr/sbin/{BINARY}").exists() else None
    )
    if found is None:
        unavailable(f"{BINARY} is not installed (apt-get install {BINARY})")
    return found


def _said(work: Path) -> str:
    """What PgBouncer wrote, to stderr and to its log file (for a failed start's message)."""
    return "".join(
        path.read_text(errors="replace")
        for path in (work / "stderr.log", work / "pgbouncer.log")
        if path.exists()
    )[-4000:]


async def _accepting(port: int, user: str, process: subprocess.Popen[bytes], work: Path) -> None:
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        assert process.poll() is None, f"pgbouncer exited at start-up: {_said(work)}"
        try:
            connection = await asyncpg.connect(
                host="127.0.0.1", port=port, user=user, database="postgres", timeout=5
            )
        except (OSError, asyncpg.PostgresError):
            assert asyncio.get_running_loop().time() < deadline, (
                f"pgbouncer did not start: {_said(work)}"
            )
            await asyncio.sleep(0.05)
            continue
        await connection.close()
        return


@pytest.fixture(scope="session")
def pgbouncer(pg_server: PgServer) -> Iterator[Pooler]:
    """PgBouncer in transaction mode with a small server pool, so that every client connection's
    transactions land on server connections shared with other clients (what breaks named prepared
    statements and session state)."""
    binary = _binary()
    target = make_url(pg_server.admin_url)
    host = target.query.get("host") or target.host or "127.0.0.1"
    user = target.username or "postgres"
    work = Path(tempfile.mkdtemp(prefix="registry-pgbouncer-"))
    port = free_port()
    (work / "users.txt").write_text(f'"{user}" ""\n')
    config = work / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"* = host={host} port={target.port or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {work / 'users.txt'}\n"
        "pool_mode = transaction\n"
        "default_pool_size = 4\n"
        "max_client_conn = 2000\n"
        f"logfile = {work / 'pgbouncer.log'}\n"
    )
    # PgBouncer refuses to run as root: then it runs as the embedded server's OS user (which may
    # also reach that server's socket directory).
    run_as = system_user()
    command = [binary, str(config)]
    if run_as is not None:
        work.chmod(0o755)
        for path in [work, *work.iterdir()]:
            shutil.chown(path, user=run_as)
        command = [binary, "-u", run_as, str(config)]
    # Its stderr goes to a file: a pipe nobody reads fills with a line per connection and stalls it.
    with (work / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        asyncio.run(_accepting(port, user, process, work))
        yield Pooler(port=port, user=user)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(work, ignore_errors=True)
