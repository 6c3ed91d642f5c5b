"""`registry serve` on the embedded PostgreSQL: ready, exclusive, stops cleanly, keeps its data."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    free_port,
    registry_command,
    serve_embedded,
    stop_serving,
    wait_ready,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def own_tmp() -> Iterator[Path]:
    """A temporary folder of the server's own (TMPDIR): what it leaves there is its, whatever the
    other test processes run meanwhile. Short, as a Unix socket's path must be."""
    folder = Path(tempfile.mkdtemp(prefix="rs-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_serve_embedded_stop_and_restart_on_the_same_data(data_dir: Path, own_tmp: Path) -> None:
    env = {"REGISTRY_DATA_DIR": str(data_dir)}
    port = free_port()
    # No worker count given: one per core this process may run on (CI's machine has two), each with
    # an equal share of the embedded server's 200 connections (3 reserved, 10 spare: 187).
    cores = len(os.sched_getaffinity(0))
    workers = min(cores, 187 // 3)
    process = serve_embedded(
        data_dir, port, settings={"REGISTRY_HEAD_TIMEOUT_SECONDS": "1", "TMPDIR": str(own_tmp)}
    )
    try:
        assert wait_ready(process, port)["status"] == "ready"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
        # A head that never ends is cut: the server closes the connection (no answer, no hold).
        with socket.create_connection(("127.0.0.1", port), timeout=30) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n")
            assert slow.recv(1024) == b""  # closed by the server, long before the 30 s here
        assert httpx.get(f"http://127.0.0.1:{port}/docs").status_code == 200
        # The quick start signs: a key made in the data directory on the first start, published.
        key_file = data_dir / "signing-key.pem"
        assert key_file.stat().st_mode & 0o777 == 0o600
        published = httpx.get(f"http://127.0.0.1:{port}/.well-known/prompt-registry/signing-key")
        assert published.status_code == 200 and b"BEGIN PUBLIC KEY" in published.content
        first_key = published.content

        # A second server on the same data directory is refused, clearly, and harms nothing.
        second = registry_command("serve", "--port", str(free_port()), env=env, timeout=60)
        assert second.returncode == 1
        assert "is in use by another registry process" in second.stderr

        # Short commands attach to the running server.
        created = registry_command("tenant", "create", "kept", env=env)
        assert created.returncode == 0, created.stderr
    finally:
        assert stop_serving(process) == 0
    assert not (data_dir / "pg" / "postmaster.pid").exists(), "PostgreSQL was left running"
    # The folder of the workers' metrics went with the server (they piled up in /tmp).
    assert not list(own_tmp.glob("registry-metrics-*")), "a metrics folder was left"
    # Each worker got its share of the embedded server's 200 connections, and it said so.
    said = process.stderr.read() if process.stderr else ""
    assert (
        f"connections: {workers} worker(s) (REGISTRY_WORKERS unset: {cores} core(s)) "
        f"x {187 // workers} (" in said
    ), said
    assert "within max_connections 200 (3 reserved, 10 spare)" in said
    assert said.count(f"signing key: made {data_dir.resolve() / 'signing-key.pem'}") == 1, said

    port = free_port()
    token = "serve-operator-token-0123456789abcdef"
    process = serve_embedded(
        data_dir, port, "--workers", "1", settings={"REGISTRY_OPERATOR_TOKEN": token}
    )
    try:
        wait_ready(process, port)
        listing = registry_command("tenant", "list", env=env)
        assert "kept" in listing.stdout
        # The same key on the next start: kept like the data, made once.
        again = httpx.get(f"http://127.0.0.1:{port}/.well-known/prompt-registry/signing-key")
        assert again.content == first_key
        # One worker shows its own metrics: the listener it runs, connected.
        scraped = httpx.get(
            f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}
        )
        assert scraped.status_code == 200
        assert "registry_listeners_connected 1.0" in scraped.text, scraped.text[:2000]
    finally:
        assert stop_serving(process) == 0
    assert not (data_dir / "pg" / "postmaster.pid").exists()
    said = process.stderr.read() if process.stderr else ""
    assert "connections: 1 worker(s) x 187 (pool 124, reads 62, listener 1)" in said, said
    assert "signing key: made" not in said, said


def test_serve_refuses_more_workers_than_the_server_has_connections_for(data_dir: Path) -> None:
    env = {"REGISTRY_DATA_DIR": str(data_dir)}
    refused = registry_command("serve", "--port", str(free_port()), "--workers", "64", env=env)
    assert refused.returncode == 1
    assert "64 workers cannot share the server's 200 connections" in refused.stderr
    assert not (data_dir / "pg" / "postmaster.pid").exists()
