"""A checkout without ../shared beside it: the schema-checked tests run against mcp-types's types."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, PgServer

pytestmark = pytest.mark.slow


def test_schema_checks_run_without_the_schema_files(tmp_path: Path, pg_server: PgServer) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["REGISTRY_MCP_SCHEMA_DIR"] = str(tmp_path / "nowhere")
    env["REGISTRY_TEST_DATABASE_URL"] = pg_server.admin_url  # this run's server: no second one
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "tests/mcp/test_stdio.py::test_stateless_lines", "tests/mcp/test_errors.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-3000:]
