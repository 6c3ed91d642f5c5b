"""A simulated population against a live registry of two workers, whose advancer runs on its own
clock: 1,200 anonymous callers, each asking one of three prompts over MCP (every tenth twice) and
reporting what the answer was worth through its signed receipt, with outcomes that depend on the
version (the new one worse, equal, better). While the population runs the rollouts are paused (callers keep their
sides, reports count), so that each step is judged once, on all of its evidence; then they are
resumed and the workers decide alone: the worse one is rolled back, the equal and the better one
promoted. The serve ledger shows that no caller was served both versions within the step, and each
side holds about its share."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from registry import signing
from tests.conftest import OPERATOR_TOKEN, SIMPLE, LiveServer, PgServer, module_server
from tests.mcp.test_stateless import Stateless
from tests.rollouts.test_gates import SALT
from tests.rollouts.test_rollouts import RECEIPT, client_meta, version_of

POPULATION = 1200
# The share of bad outcomes on the old and the new side.
CASES = {"worse": (0.10, 0.30), "equal": (0.20, 0.20), "better": (0.25, 0.10)}
T = "/api/v1/tenants/sim"


async def until(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    """Wait (bounded) for ``check()`` to be true, looking every 50 ms."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture(scope="module")
async def server(
    pg_server: PgServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    key = tmp_path_factory.mktemp("simulation") / "signing-key.pem"
    signing.make_key_file(key)
    async with module_server(
        pg_server, template_db, workers=2, REGISTRY_SNAPSHOT_KEY_FILE=str(key),
        REGISTRY_ROLLOUT_POLL_SECONDS="0.2", REGISTRY_USAGE_FLUSH_SECONDS="0.2",
    ) as live:  # fmt: skip
        yield live


def outcome(case: str, caller: str, version: int) -> str:
    """What a caller makes of its answer: drawn from the version's rate, the same every run."""
    bad_old, bad_new = CASES[case]
    draw = random.Random(f"{case}:{caller}").random()
    return "bad" if draw < (bad_new if version == 2 else bad_old) else "good"


async def test_a_population_decides_three_rollouts_on_a_live_server(
    server: LiveServer, pg_server: PgServer
) -> None:
    keys = server.tenant("sim", public_read=True, roles=("reader", "publisher"))
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    publisher = {"Authorization": f"Bearer {keys['publisher']}"}
    reader = {"Authorization": f"Bearer {keys['reader']}"}
    second = {
        "arguments": SIMPLE["arguments"],
        "messages": [{"role": "user", "text": "Hi {{who}}"}],
    }
    superuser = await pg_server.connect(str(server.database))
    limits = httpx.Limits(max_connections=24)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=30) as http:
        for case in CASES:
            made = await http.post(f"{T}/prompts", headers=operator,
                                   json={**SIMPLE, "name": case, "labels": ["production"]})  # fmt: skip
            assert made.status_code == 201, made.text
            added = await http.post(f"{T}/prompts/{case}/versions", json=second, headers=operator)
            assert added.status_code == 201, added.text
            plan = {"version": 2, "steps": [50, 100], "min_seconds": 0, "min_outcomes": 150}
            started = await http.put(f"{T}/prompts/{case}/labels/production/rollout", json=plan,
                                     headers=publisher)  # fmt: skip
            assert started.status_code == 201, started.text
        # Known salts (the sides, so the outcomes, are the same each run), then paused: a change
        # of the tenant, so every worker reads the rollouts afresh.
        await superuser.execute("UPDATE rollouts SET salt = $1", SALT)
        for case in CASES:
            paused = await http.post(f"{T}/prompts/{case}/labels/production/rollout/pause",
                                     headers=publisher)  # fmt: skip
            assert paused.status_code == 200, paused.text

        mcp = Stateless(http, "/mcp/sim", {})

        async def caller(n: int) -> tuple[str, int]:
            case, name = list(CASES)[n % 3], f"caller-{n}"
            params = {"_meta": client_meta(name), "name": case, "arguments": {"who": "x"}}
            versions = []
            for _ in range(2 if n % 10 == 0 else 1):  # asked again: on either worker, one side
                answer = await mcp.post("prompts/get", params)
                assert answer.status_code == 200, answer.text
                versions.append(answer.json()["result"])
            assert len({version_of(v) for v in versions}) == 1, f"{name} saw both"
            result: dict[str, Any] = versions[0]
            said = outcome(case, name, version_of(result))
            report = {"receipt": result["_meta"][RECEIPT], "outcome": said}
            counted = await http.post(f"{T}/feedback", json=report, headers=reader)
            assert counted.status_code == 201, counted.text
            return case, version_of(result)

        served = await asyncio.gather(*(caller(n) for n in range(POPULATION)))
        for case in CASES:  # about half on each side (binomial: within 4.5 sigma)
            new = sum(1 for c, v in served if c == case and v == 2)
            assert abs(new - POPULATION / 6) < 4.5 * (POPULATION / 3 * 0.25) ** 0.5, (case, new)

        # The ledger, every answer written: no caller was served both versions in the step.
        async def written() -> bool:
            total = await superuser.fetchval(
                "SELECT coalesce(sum(answers), 0) FROM usage_minutes WHERE surface = 'prompts/get'"
            )
            return bool(total == POPULATION + POPULATION // 10)

        await until(written, seconds=30, what="the ledger holds every answer")
        both = await superuser.fetch(
            "SELECT name, client FROM usage_minutes WHERE surface = 'prompts/get' "
            "GROUP BY name, client HAVING count(DISTINCT version) > 1"
        )
        assert both == [], both

        for case in CASES:  # the workers decide alone from here
            resumed = await http.post(f"{T}/prompts/{case}/labels/production/rollout/resume",
                                      headers=publisher)  # fmt: skip
            assert resumed.status_code == 200, resumed.text
        ended: dict[str, dict[str, Any]] = {}

        async def decided() -> bool:
            for case in CASES:
                shown = await http.get(
                    f"{T}/prompts/{case}/labels/production/rollout", headers=reader
                )
                if shown.json()["state"] in ("promoted", "rolled_back"):
                    ended[case] = shown.json()
            return len(ended) == len(CASES)

        await until(decided, seconds=60, what="every rollout decided")
        assert ended["worse"]["state"] == "rolled_back", ended["worse"]
        assert "the new side is worse" in str(ended["worse"]["reason"])
        assert ended["equal"]["state"] == "promoted", ended["equal"]
        assert ended["better"]["state"] == "promoted", ended["better"]
        for case, want in (("worse", 1), ("equal", 2), ("better", 2)):
            shown = await http.get(f"{T}/prompts/{case}", headers=reader)
            assert shown.json()["labels"]["production"] == want, case
    await superuser.close()
