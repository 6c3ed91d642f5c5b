"""bench/inproc on a fresh database, a few calls of each kind, so the in-process measurement the
benchmark notes quote cannot rot. Only that it ran and measured something is asserted: the figures
themselves are reported, never judged here."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.conftest import ROOT, PgServer

ROWS = (
    "prompts/get", "prompts/list", "tools/call", "resources/read", "tools/list", "skills/list",
    "resources/list",
    "tools/call, new arguments each time", "prompts/get, not in memory", "REST prompt read",
    "REST version write", "empty tenant transaction, ORM session",
    "empty tenant transaction, driver alone",
)  # fmt: skip


def test_inproc_measures_answers_from_memory_and_a_miss(pg_server: PgServer, db_name: str) -> None:
    env = {**os.environ, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}
    env.pop("REGISTRY_DATA_DIR", None)
    ran = subprocess.run(
        [sys.executable, "-m", "bench.inproc", "--calls", "50"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    measured = dict(re.findall(r"^(.+?): ([0-9.]+) µs", ran.stdout, flags=re.MULTILINE))
    assert set(measured) == set(ROWS), ran.stdout
    assert all(float(value) > 0 for value in measured.values()), ran.stdout


def test_inproc_measures_memory_per_tenant_and_per_cached_prompt(
    pg_server: PgServer, db_name: str
) -> None:
    env = {**os.environ, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}
    env.pop("REGISTRY_DATA_DIR", None)
    ran = subprocess.run(
        [sys.executable, "-m", "bench.inproc", "--memory", "2", "5"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    allocated = re.search(r"^allocated: ([0-9,]+) bytes per cached prompt", ran.stdout, re.M)
    assert allocated is not None, ran.stdout
    assert int(allocated.group(1).replace(",", "")) > 0, ran.stdout  # something was kept
    assert "resident:" in ran.stdout and "2 tenants of 5 prompts" in ran.stdout, ran.stdout


def test_instruction_counts_workloads_run(pg_server: PgServer, db_name: str) -> None:
    """bench/instructions' requests, a few of each without valgrind (each request checks its own
    answer): what the counts are taken around keeps working."""
    env = {**os.environ, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}
    env.pop("REGISTRY_DATA_DIR", None)
    # in one process, as no count is taken
    workloads = "rest-read,rest-write,rest-publish,rest-move,mcp-get,mcp-miss,tx-orm,tx-driver"
    ran = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "--inner", workloads, "3"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    refused = subprocess.run(
        [sys.executable, "-m", "bench.instructions", "rest-reed"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "unknown workload 'rest-reed'" in refused.stderr
