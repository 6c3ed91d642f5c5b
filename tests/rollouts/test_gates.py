"""Rollouts gated by what callers report: a simulated population of callers whose outcomes depend
on the version drives rollouts end to end (a worse version is rolled back by itself, saying why; an
equal and a better one are promoted), no caller sees both versions within a step; reports are
proved by signed receipts, counted once, bounded per caller; and the rule's false alarm rate is the
stated one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from registry import signing
from registry.rollouts import gate
from tests.conftest import Api, auth
from tests.mcp.test_stateless import Stateless
from tests.rollouts.test_rollouts import ROLLOUT, T, ask, version_of

RECEIPT = "dev.prompt-registry/receipt"
SALT = bytes(range(16))


@pytest.fixture
def settings_overrides(tmp_path: Path) -> dict[str, object]:
    key = tmp_path / "signing-key.pem"
    signing.make_key_file(key)
    return {"snapshot_key_file": key, "rollout_poll_seconds": 3600}  # steps move when told


async def report(api: Api, key: str, result: dict[str, Any], outcome: str) -> Any:
    return await api.client.post(f"{T}/feedback", headers=auth(key),
                                 json={"receipt": result["_meta"][RECEIPT], "outcome": outcome})  # fmt: skip


@pytest.mark.parametrize(
    ("bad_old", "bad_new", "ends"),
    [(0.10, 0.45, "rolled_back"), (0.20, 0.20, "promoted"), (0.25, 0.05, "promoted")],
    ids=["worse", "equal", "better"],
)
async def test_a_population_drives_a_rollout(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection,
    bad_old: float, bad_new: float, ends: str,
) -> None:  # fmt: skip
    started = await api.client.put(
        ROLLOUT, json={"version": 2, "steps": [50, 100], "min_seconds": 0, "min_outcomes": 60},
        headers=auth(acme["publisher"]),
    )  # fmt: skip
    assert started.status_code == 201, started.text
    # A known salt (before anything is served), so the sides and the outcomes are the same each run.
    await superuser.execute("UPDATE rollouts SET salt = $1", SALT)
    mcp = Stateless(api.client, "/mcp/acme", {})
    rng = random.Random(7)
    callers = [f"caller-{i}" for i in range(240)]
    for caller in callers:
        first = await ask(mcp, caller)
        again = await ask(mcp, caller)
        assert version_of(first) == version_of(again), f"{caller} saw both versions in a step"
        bad = rng.random() < (bad_new if version_of(first) == 2 else bad_old)
        counted = await report(api, acme["reader"], first, "bad" if bad else "good")
        assert counted.status_code == 201, counted.text
    waiting = await api.client.get(ROLLOUT, headers=auth(acme["reader"]))
    sides = waiting.json()
    assert (
        sides["old"]["good"] + sides["old"]["bad"] + sides["new"]["good"] + sides["new"]["bad"]
        == 240
    )
    await api.app.state.advancer.advance_due()
    after = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    if ends == "rolled_back":
        assert after["state"] == "rolled_back", after
        assert "the new side is worse" in after["reason"] and "z = " in after["reason"]
        for caller in callers[:20]:  # everyone is back on what the label serves
            assert version_of(await ask(mcp, caller)) == 1
        return
    assert (after["state"], after["step"]) == ("running", 2), after
    await api.app.state.advancer.advance_due()  # the last step: no old side to compare with
    final = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    assert final["state"] == ends, final
    assert version_of(await ask(mcp, callers[0])) == 2


async def test_reports_are_proved_counted_once_and_bounded(api: Api, acme: dict[str, str]) -> None:
    started = await api.client.put(ROLLOUT, json={"version": 2, "steps": [50, 100]},
                                   headers=auth(acme["publisher"]))  # fmt: skip
    assert started.status_code == 201, started.text
    mcp = Stateless(api.client, "/mcp/acme", {})
    result = await ask(mcp, "one")
    assert (await report(api, acme["reader"], result, "good")).status_code == 201
    again = await report(api, acme["reader"], result, "bad")
    assert again.status_code == 409 and "reported already" in again.text
    forged = {**result, "_meta": {RECEIPT: {**result["_meta"][RECEIPT], "rollout": {
        **result["_meta"][RECEIPT]["rollout"], "side": "new" if
        result["_meta"][RECEIPT]["rollout"]["side"] == "old" else "old"}}}}  # fmt: skip
    refused = await report(api, acme["reader"], forged, "bad")
    assert refused.status_code == 422 and "receipt" in refused.text
    unsigned = {k: v for k, v in result["_meta"][RECEIPT].items() if k != "signature"}
    refused = await api.client.post(f"{T}/feedback", json={"receipt": unsigned, "outcome": "bad"},
                                    headers=auth(acme["reader"]))  # fmt: skip
    assert refused.status_code == 422 and "not a signed receipt" in refused.text
    # One caller (its digest in the receipts) counts at most five times a step.
    for n in range(5):
        answer = await mcp.post("prompts/get", {"_meta": _meta("one"), "name": "greet",
                                                "arguments": {"who": f"n{n}"}})  # fmt: skip
        status = (await report(api, acme["reader"], answer.json()["result"], "bad")).status_code
        assert status == (201 if n < 4 else 409), n
    other = await api.tenant("other")
    receipt = (await ask(mcp, "two"))["_meta"][RECEIPT]
    theirs = await api.client.post("/api/v1/tenants/other/feedback", headers=auth(other["reader"]),
                                   json={"receipt": receipt, "outcome": "good"})  # fmt: skip
    assert theirs.status_code == 422 and "another tenant" in theirs.text


def _meta(name: str) -> dict[str, Any]:
    from tests.rollouts.test_rollouts import client_meta

    return client_meta(name)


def test_the_rule_raises_a_false_alarm_about_once_in_a_hundred_steps() -> None:
    """Two alike sides (a fifth bad), 200 outcomes each, 4,000 simulated steps: the share judged
    worse is the stated 1 % (a seeded run; the rule's own rate is 1 % by construction)."""
    rng = random.Random(11)
    alarms = 0
    for _ in range(4000):
        old = sum(rng.random() < 0.2 for _ in range(200))
        new = sum(rng.random() < 0.2 for _ in range(200))
        verdict = gate.judge(gate.Outcomes(200 - old, old), gate.Outcomes(200 - new, new), 0)
        alarms += verdict.decision == "worse"
    assert 0.005 <= alarms / 4000 <= 0.02, alarms
    worse = gate.judge(gate.Outcomes(180, 20), gate.Outcomes(140, 60), 0)
    assert worse.decision == "worse"
    assert gate.judge(gate.Outcomes(5, 1), gate.Outcomes(1, 5), 50).decision == "wait"
