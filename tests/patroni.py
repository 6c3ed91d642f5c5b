"""A real Patroni cluster on this machine: one etcd and two PostgreSQL nodes (the embedded server's
binaries), each node run by its own Patroni (Debian's ``patroni`` and ``etcd-server`` packages;
`.ci/run` installs them). Where they are missing the Patroni test skips, except under CI, where it
fails. The nodes listen on 127.0.0.1 with trust authentication: a throw-away test cluster.

The cluster is the one deploy/patroni/ describes: synchronous mode (a commit is acknowledged once
the standby has it, and only a synchronous standby is promoted), pg_rewind for a former leader, and
``master_start_timeout: 0`` (a crashed leader is failed over at once, not restarted in place)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import yaml

from registry.db.embedded import SUPERUSER, binary, chown_tree, system_user
from tests.conftest import free_port, unavailable

WAIT = 60  # seconds: a bound on every wait, never a sleep of its own
BINARIES = ("patroni", "etcd")


def require_binaries() -> None:
    missing = [name for name in BINARIES if shutil.which(name) is None]
    if missing:
        unavailable(f"{' and '.join(missing)} not installed (apt-get install patroni etcd-server)")


@dataclass
class Node:
    name: str
    root: Path
    pg_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.pg_port}"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def said(self, last: int = 3000) -> str:
        """The end of what the node's Patroni (and its PostgreSQL) logged."""
        log = self.root / "patroni.log"
        return log.read_text(errors="replace")[-last:] if log.exists() else ""

    async def connect(self, database: str = "postgres") -> asyncpg.Connection:
        return await asyncpg.connect(
            host="127.0.0.1", port=self.pg_port, user=SUPERUSER, database=database
        )

    def kill_postmaster(self) -> None:
        """The node's PostgreSQL dies at once (SIGKILL to the postmaster); its Patroni lives on."""
        pid = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)

    def config(self, etcd: str) -> dict[str, Any]:
        return {
            "scope": "registry",
            "name": self.name,
            "restapi": {"listen": f"127.0.0.1:{self.api_port}",
                        "connect_address": f"127.0.0.1:{self.api_port}"},
            "etcd3": {"hosts": etcd},
            "bootstrap": {
                "dcs": {
                    "ttl": 20,
                    "loop_wait": 1,
                    "retry_timeout": 5,
                    "master_start_timeout": 0,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {"wal_log_hints": "on", "max_connections": 200},
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C.UTF-8"}],
                "pg_hba": ["local all all trust", "host all all 127.0.0.1/32 trust",
                           "host replication all 127.0.0.1/32 trust"],
            },
            "postgresql": {
                "listen": self.address,
                "connect_address": self.address,
                "data_dir": str(self.root / "data"),
                "pgpass": str(self.root / "pgpass"),
                "bin_dir": str(Path(binary("postgres")).parent),
                # A replica is made without waiting for a spread checkpoint (minutes by default).
                "basebackup": [{"checkpoint": "fast"}],
                "authentication": {
                    "superuser": {"username": SUPERUSER, "password": "unused-trust-auth"},
                    "replication": {"username": "replicator", "password": "unused-trust-auth"},
                    "rewind": {"username": "rewinder", "password": "unused-trust-auth"},
                },
                # fsync off: nothing here survives the machine anyway; the postmaster killed is a
                # process crash, and what was written is in the page cache for the restart.
                "parameters": {"unix_socket_directories": str(self.root), "fsync": "off"},
            },
        }  # fmt: skip


@dataclass
class Cluster:
    root: Path
    nodes: list[Node]
    etcd_port: int = field(default_factory=free_port)
    etcd: subprocess.Popen[bytes] | None = None

    def url(self, database: str, attrs: str = "read-write") -> str:
        """One URL naming every node, that connects to the one with ``attrs`` (read-write: the
        leader; standby: a replica)."""
        hosts = "&".join(f"host={node.address}" for node in self.nodes)
        return f"postgresql://{SUPERUSER}@/{database}?{hosts}&target_session_attrs={attrs}"

    def start_etcd(self) -> None:
        peer = free_port()
        data = self.root / "etcd"
        log = (self.root / "etcd.log").open("wb")
        self.etcd = subprocess.Popen(
            ["etcd", "--name", "etcd", "--data-dir", str(data),
             "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"etcd=http://127.0.0.1:{peer}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def start(self, node: Node) -> None:
        """Start ``node``'s Patroni (as the embedded server's OS user when we are root)."""
        node.root.mkdir(parents=True, exist_ok=True)
        node.root.chmod(0o700)
        config = node.root / "patroni.yml"
        config.write_text(yaml.safe_dump(node.config(f"127.0.0.1:{self.etcd_port}")))
        chown_tree(node.root, system_user())
        log = (node.root / "patroni.log").open("ab")
        node.process = subprocess.Popen(
            ["patroni", str(config)],
            stdout=log, stderr=subprocess.STDOUT, user=system_user(),
            env={"PATH": os.environ["PATH"], "HOME": str(node.root), "LC_ALL": "C.UTF-8"},
        )  # fmt: skip

    async def members(self) -> dict[str, dict[str, Any]]:
        """Patroni's view of the cluster (role, state, timeline) by member name, from any node
        whose API answers."""
        async with httpx.AsyncClient(timeout=2) as client:
            for node in self.nodes:
                try:
                    answer = await client.get(f"{node.api}/cluster")
                except httpx.TransportError:
                    continue
                if answer.status_code == 200:
                    return {m["name"]: m for m in answer.json().get("members", [])}
        return {}

    async def wait_for(self, roles: dict[str, str]) -> dict[str, dict[str, Any]]:
        """Wait (bounded) until each named member has the role and is running."""
        deadline = asyncio.get_running_loop().time() + WAIT
        members: dict[str, dict[str, Any]] = {}
        while True:
            members = await self.members()
            if all(
                members.get(name, {}).get("role") == role
                and members[name].get("state") in ("running", "streaming")
                for name, role in roles.items()
            ):
                return members
            if asyncio.get_running_loop().time() > deadline:
                said = "\n".join(f"--- {node.name}\n{node.said()}" for node in self.nodes)
                raise AssertionError(f"never {roles}: {members}\n{said}")
            await asyncio.sleep(0.2)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()  # Patroni stops its PostgreSQL before it exits
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()
        for node in self.nodes:  # a postmaster left behind by a killed Patroni
            pid_file = node.root / "data" / "postmaster.pid"
            if pid_file.exists():
                subprocess.run(
                    [binary("pg_ctl"), "-D", str(pid_file.parent), "-m", "immediate", "stop"],
                    user=system_user(), capture_output=True, check=False,
                )  # fmt: skip
        if self.etcd is not None:
            self.etcd.terminate()
            self.etcd.wait(timeout=30)


@pytest.fixture
def patroni_cluster() -> Iterator[Cluster]:
    """Two nodes, n0 the leader and n1 its synchronous standby, with an empty database
    ``registry`` (the test migrates it)."""
    require_binaries()
    if os.environ.get("REGISTRY_TEST_DATABASE_URL"):
        pytest.skip("the Patroni test needs the embedded server's binaries")
    root = Path(tempfile.mkdtemp(prefix="registry-patroni-"))
    if system_user() is not None:
        root.chmod(0o711)
    cluster = Cluster(root, [Node("n0", root / "n0"), Node("n1", root / "n1")])
    try:
        cluster.start_etcd()
        cluster.start(cluster.nodes[0])
        asyncio.run(cluster.wait_for({"n0": "leader"}))
        asyncio.run(_create_database(cluster.nodes[0]))
        cluster.start(cluster.nodes[1])
        asyncio.run(cluster.wait_for({"n0": "leader", "n1": "sync_standby"}))
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _create_database(node: Node) -> None:
    connection = await node.connect()
    try:
        await connection.execute('CREATE DATABASE "registry"')
    finally:
        await connection.close()
