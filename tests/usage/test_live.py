"""The serve ledger of a running registry: ``registry usage`` as a table, CSV, idle and reach (and
a bad question refused in a line), and the counts of a worker that stops written as it stops."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    SIMPLE,
    LiveServer,
    PgServer,
    _create_database,
    _drop_database,
    module_server,
    registry_command,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture(scope="module")
async def server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    async with module_server(pg_server, template_db, REGISTRY_USAGE_FLUSH_SECONDS="0.2") as live:
        yield live


def served(server: LiveServer, key: str, name: str, times: int, agent: str) -> None:
    for _ in range(times):
        rendered = httpx.post(
            f"{server.url}/api/v1/tenants/cli/prompts/{name}/render", json={"arguments": {"who": "x"}},
            headers={"Authorization": f"Bearer {key}", "User-Agent": agent},
        )  # fmt: skip
        assert rendered.status_code == 200, rendered.text


def held(server: LiveServer, key: str, answers: int) -> None:
    """Until the ledger holds ``answers`` answers (the worker writes every 0.2 s; read, up to 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = httpx.get(
            f"{server.url}/api/v1/tenants/cli/usage", headers={"Authorization": f"Bearer {key}"}
        )
        if sum(r["answers"] for r in got.json()["rows"]) >= answers:
            return
        time.sleep(0.05)
    raise AssertionError(f"the ledger did not reach {answers} answers")


def cli(server: LiveServer, key: str, *args: str) -> Any:
    return registry_command(
        "usage", "--tenant", "cli", *args, env={"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key}
    )


def test_registry_usage_answers_the_questions(server: LiveServer) -> None:
    keys = server.tenant("cli", roles=("reader", "publisher"),
                         prompts=[SIMPLE, {**SIMPLE, "name": "spare"}])  # fmt: skip
    served(server, keys["reader"], "greet", 3, "app-one/1.0")
    served(server, keys["reader"], "greet", 2, "app-two/2.0")
    held(server, keys["reader"], 5)

    shown = cli(server, keys["reader"], "--by", "version,client", "--name", "greet")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "VERSION", "CLIENT", "ANSWERS", "FIRST", "LAST"]
    assert [line.split()[3:5] for line in lines[1:]] == [["app-one/1.0", "3"], ["app-two/2.0", "2"]]

    as_csv = cli(server, keys["reader"], "--by", "caller", "--csv")
    assert as_csv.returncode == 0, as_csv.stderr
    (row,) = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert row["answers"] == "5" and "key" in row["caller"]

    idle = cli(server, keys["reader"], "--idle", "--days", "7")
    assert idle.returncode == 0, idle.stderr
    assert [line.split()[:2] for line in idle.stdout.splitlines()[1:]] == [["prompt", "spare"]]

    reach = cli(server, keys["reader"], "--reach", "greet@production")
    assert reach.returncode == 0, reach.stderr
    assert "5 answers to 1 caller(s) and 2 client(s)" in reach.stderr

    refused = cli(server, keys["reader"], "--by", "colour")
    assert refused.returncode == 1
    assert "by: 'colour' is not one of" in refused.stderr


async def test_a_stopping_worker_writes_what_it_counted(
    pg_server: PgServer, template_db: str
) -> None:
    """With a flush interval far longer than the test, the counts reach the database only by the
    flush of a worker told to stop (SIGTERM, as a rolling upgrade stops it)."""
    name = await _create_database(pg_server, template_db)
    try:
        live = start_server({
            "REGISTRY_DATABASE_URL": pg_server.plain_url(name),
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "REGISTRY_USAGE_FLUSH_SECONDS": "300",
        })  # fmt: skip
        try:
            keys = live.tenant("cli", roles=("reader",), prompts=[SIMPLE])
            served(live, keys["reader"], "greet", 4, "stopping/1")
        finally:
            await asyncio.to_thread(stop_server, live)
        conn = await asyncpg.connect(pg_server.plain_url(name))
        try:
            counted = await conn.fetchval(
                "SELECT sum(answers) FROM usage_days WHERE name = 'greet' AND client = 'stopping/1'"
            )
        finally:
            await conn.close()
        assert counted == 4
    finally:
        await _drop_database(pg_server, name)
