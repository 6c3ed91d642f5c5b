"""bench/ledger on a fresh database with small numbers (a few calls, 300 prompts, 20 callers for an
hour), so the figures the benchmark notes quote cannot rot. Only that it ran and measured each part
is asserted: the figures are reported, never judged here."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, PgServer

PARTS = (
    "Ledger.count alone", "cached prompts/get, sent again from its bytes",
    "cached prompts/get, from the answer cache", "flush of 20 counters",
    "usage_minutes: 1,200 rows", "versions of a prompt still served", "callers and clients of one version",
    "first and last answer of each version", "a prompt's answers per version per hour",
    "prompts nobody loaded", "the 100 most served prompts", "who moving production of a prompt reaches",
)  # fmt: skip


def test_ledger_bench_measures_each_part(pg_server: PgServer, db_name: str) -> None:
    env = {**os.environ, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}
    env.pop("REGISTRY_DATA_DIR", None)
    ran = subprocess.run(
        [sys.executable, "-m", "bench.ledger", "--calls", "20", "--rounds", "2", "--prompts", "300",
         "--callers", "20", "--hours", "1"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    for part in PARTS:
        assert part in ran.stdout, f"{part!r} not measured:\n{ran.stdout}"
