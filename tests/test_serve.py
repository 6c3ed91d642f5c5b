"""`registry serve` on the embedded PostgreSQL: ready, exclusive, stops cleanly, keeps its data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, free_port, registry_command

pytestmark = pytest.mark.slow


def _wait_ready(process: subprocess.Popen[str], port: int, timeout: float = 90) -> dict[str, str]:
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


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def _serve(data_dir: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    env["REGISTRY_DATA_DIR"] = str(data_dir)
    return subprocess.Popen(
        [sys.executable, "-m", "registry", "serve", "--port", str(port), *extra],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)


def test_serve_embedded_stop_and_restart_on_the_same_data(data_dir: Path) -> None:
    env = {"REGISTRY_DATA_DIR": str(data_dir)}
    port = free_port()
    process = _serve(data_dir, port, "--workers", "2")
    try:
        assert _wait_ready(process, port)["status"] == "ready"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"http://127.0.0.1:{port}/docs").status_code == 200

        # A second server on the same data directory is refused, clearly, and harms nothing.
        second = registry_command("serve", "--port", str(free_port()), env=env, timeout=60)
        assert second.returncode == 1
        assert "is in use by another registry process" in second.stderr

        # Short commands attach to the running server.
        created = registry_command("tenant", "create", "kept", env=env)
        assert created.returncode == 0, created.stderr
    finally:
        assert _stop(process) == 0
    assert not (data_dir / "pg" / "postmaster.pid").exists(), "PostgreSQL was left running"

    port = free_port()
    process = _serve(data_dir, port)
    try:
        _wait_ready(process, port)
        listing = registry_command("tenant", "list", env=env)
        assert "kept" in listing.stdout
    finally:
        assert _stop(process) == 0
    assert not (data_dir / "pg" / "postmaster.pid").exists()
