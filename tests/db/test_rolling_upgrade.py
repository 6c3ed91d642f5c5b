"""A rolling upgrade from the previous release (the commit CHANGELOG.md names), as an operator does it.

The previous release, taken from this repository's history, migrates an empty database and serves it
with two workers. While MCP reads, REST writes and an open stream go on against it, this release's
`registry migrate` runs underneath; then this release starts beside the old one on the same database
and takes traffic too, each release's stream hearing the other's writes; then the old one is drained
and stopped. No request is answered 5xx, no acknowledged write is lost, and no stream is left behind:
each hears the tenant's last change."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from io import BytesIO
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    ROOT,
    LiveServer,
    PgServer,
    registry_command,
    start_server,
    stop_server,
    unavailable,
)
from tests.streams import streams
from tests.writes import tenant_sequence, versions_kept

pytestmark = pytest.mark.slow
WAIT = 60  # seconds: a bound on every wait, never a sleep of its own
RELEASE = re.compile(
    r"^## (?P<version>\d+\.\d+\.\d+): (?P<commit>[0-9a-f]{7,40}) \(schema (?P<schema>\d+)\)", re.M
)
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientInfo": {"name": "upgrade", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def previous_release() -> re.Match[str]:
    found = RELEASE.search((ROOT / "CHANGELOG.md").read_text())
    assert found, "CHANGELOG.md names no release as '## X.Y.Z: <commit> (schema NNNN)'"
    return found


@pytest.fixture(scope="module")
def previous_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's package as its wheel lays it out (registry/, with registry/migrations),
    from git history."""
    commit = previous_release()["commit"]
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        unavailable("the rolling-upgrade test needs this repository's git history")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "registry", "migrations"],
        capture_output=True, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        unavailable(f"commit {commit} is not in this clone: {archive.stderr.decode().strip()}")
    tree = tmp_path_factory.mktemp("previous-release")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    (tree / "migrations").rename(tree / "registry" / "migrations")
    return tree


def mcp_get(client: httpx.Client, key: str) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "prompts/get",
        "params": {"name": "p", "_meta": META},
    }
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": STATELESS,
               "Mcp-Method": "prompts/get", "Mcp-Name": "p"}  # fmt: skip
    answer = client.post("/mcp/acme/latest", json=body, headers=headers)
    if answer.status_code == 200:
        assert "result" in answer.json(), answer.text
    return answer.status_code


class Traffic:
    """REST writes and MCP reads, round robin over the servers in rotation, until stopped."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.rotation: list[LiveServer] = []
        self.statuses: list[tuple[str, str, int]] = []  # (server, what, status)
        self.acknowledged: list[int] = []
        self.stop = threading.Event()
        # Held while a server is picked and asked: taking it out of rotation under the lock drains it.
        self.lock = threading.Lock()

    def drain(self, server: LiveServer) -> None:
        with self.lock:
            self.rotation.remove(server)

    def run(self) -> None:
        count = 0
        while not self.stop.is_set():
            with self.lock:
                count += 1
                self._ask(self.rotation[count % len(self.rotation)], count)

    def _ask(self, server: LiveServer, count: int) -> None:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            text = {"messages": [{"role": "user", "content": {"type": "text", "text": str(count)}}]}
            auth = {"Authorization": f"Bearer {self.key}"}
            reply = client.post("/api/v1/tenants/acme/prompts/p/versions", json=text, headers=auth)
            self.statuses.append((server.url, "write", reply.status_code))
            if reply.status_code == 201:
                self.acknowledged.append(int(reply.json()["version"]))
            self.statuses.append((server.url, "read", mcp_get(client, self.key)))

    async def until(self, count: int) -> None:
        deadline = asyncio.get_running_loop().time() + WAIT
        while len(self.acknowledged) < count:
            assert asyncio.get_running_loop().time() < deadline, f"stuck: {self.statuses[-4:]}"
            await asyncio.sleep(0.05)


async def final_seq(pg_server: PgServer, database: str) -> int:
    connection = await pg_server.connect(database)
    try:
        return await tenant_sequence(connection, "acme")
    finally:
        await connection.close()


async def heard(stream: Any, seq: int) -> None:
    while await asyncio.wait_for(stream.next(), WAIT) < seq:
        pass


async def test_rolling_upgrade_from_the_previous_release(
    previous_tree: Path, pg_server: PgServer, empty_db_name: str, tmp_path: Path
) -> None:
    release = previous_release()
    url = pg_server.plain_url(empty_db_name)
    base = {"REGISTRY_DATABASE_URL": url, "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN}
    previous = {**base, "PYTHONPATH": str(previous_tree)}
    # The previous release migrates the empty database to its own schema, with its own command.
    migrated = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "registry", "migrate"], env={**os.environ, **previous},
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    old = await asyncio.to_thread(start_server, previous, workers=2, cwd=tmp_path)
    new: LiveServer | None = None
    try:
        ready = await asyncio.to_thread(httpx.get, f"{old.url}/readyz")
        assert ready.json()["schema"] == release["schema"]  # the old code
        body = {
            "name": "p",
            "messages": [{"role": "user", "content": {"type": "text", "text": "0"}}],
        }
        key = (await asyncio.to_thread(old.tenant, "acme", prompts=[body]))["publisher"]
        traffic = Traffic(key)
        traffic.rotation.append(old)
        writer = threading.Thread(target=traffic.run)
        async with streams(old, "acme", key, 1, label="latest") as (old_stream,):
            writer.start()
            try:
                await traffic.until(10)
                # This release's migrations, underneath the old release serving.
                upgraded = await asyncio.to_thread(registry_command, "migrate", env=base)
                assert upgraded.returncode == 0, upgraded.stderr
                old_ready = await asyncio.to_thread(httpx.get, f"{old.url}/readyz")
                await traffic.until(len(traffic.acknowledged) + 10)
                # This release beside the old one, both in rotation; each one's stream hears the
                # other's writes.
                new = await asyncio.to_thread(start_server, base, workers=2)
                async with streams(new, "acme", key, 1, label="latest") as (new_stream,):
                    traffic.rotation.append(new)
                    await traffic.until(len(traffic.acknowledged) + 20)
                    seq = await final_seq(pg_server, empty_db_name)
                    await asyncio.gather(heard(old_stream, seq), heard(new_stream, seq))
                    # The old release drained (out of rotation, its requests finished), then stopped.
                    await asyncio.to_thread(traffic.drain, old)
                    await traffic.until(len(traffic.acknowledged) + 2)
                    await asyncio.to_thread(stop_server, old)
                    await traffic.until(len(traffic.acknowledged) + 10)
                    traffic.stop.set()
                    await asyncio.to_thread(writer.join, WAIT)
                    seq = await final_seq(pg_server, empty_db_name)
                    await heard(new_stream, seq)
            finally:
                traffic.stop.set()
                if writer.is_alive():
                    await asyncio.to_thread(writer.join, WAIT)

        failed = [status for status in traffic.statuses if status[2] >= 500]
        assert not failed, failed[:5]
        assert {status for _, _, status in traffic.statuses} <= {200, 201}, traffic.statuses[-5:]
        by = {
            server.url: sum(1 for s in traffic.statuses if s[0] == server.url)
            for server in (old, new)
        }
        assert all(by.values()), by  # both releases served
        connection = await pg_server.connect(empty_db_name)
        try:
            kept = await versions_kept(connection, "p")
        finally:
            await connection.close()
        assert set(traffic.acknowledged) <= kept, sorted(set(traffic.acknowledged) - kept)
        print(
            f"rolling upgrade from {release['version']} ({release['commit']}): "
            f"{len(traffic.statuses)} requests, none failed; the old release's /readyz after "
            f"`registry migrate`: {old_ready.status_code} {old_ready.json().get('reason', '')}"
        )
    finally:
        stop_server(old)
        if new is not None:
            stop_server(new)
