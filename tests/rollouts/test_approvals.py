"""Rollouts where the label needs approvals: started by a change request whose move carries the
plan (one approval covers every step and the promotion), refused directly with the way to do it;
paused and rolled back without approval, promoted ahead of the plan only by break-glass. And the
registry's own signal: a new version that callers' requests fail on (an admin overrode its contract
break) is rolled back by itself from its errors alone, with no report sent."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.conftest import SIMPLE, Api, auth
from tests.mcp.test_stateless import Stateless
from tests.rollouts.test_gates import SALT
from tests.rollouts.test_rollouts import ROLLOUT, T, ask, client_meta, version_of

PLAN = {"steps": [50, 100], "min_seconds": 0}


async def gated(api: Api, keys: dict[str, str]) -> None:
    answer = await api.client.patch(T, json={"approvals": {"production": 1}},
                                    headers=auth(keys["admin"]))  # fmt: skip
    assert answer.status_code == 200, answer.text


async def open_rollout(api: Api, key: str, version: int = 2) -> dict[str, Any]:
    move = {"prompt": "greet", "label": "production", "version": version, "rollout": PLAN}
    opened = await api.client.post(f"{T}/change-requests", headers=auth(key),
                                   json={"description": "greet v2 to a share", "moves": [move]})  # fmt: skip
    assert opened.status_code == 201, opened.text
    return dict(opened.json())


async def served(api: Api, key: str) -> int:
    shown = await api.client.get(f"{T}/prompts/greet", headers=auth(key))
    return int(shown.json()["labels"]["production"])


async def test_a_change_request_starts_the_rollout_and_its_steps_need_no_more(
    api: Api, acme: dict[str, str]
) -> None:
    await gated(api, acme)
    direct = await api.client.put(ROLLOUT, json={"version": 2, **PLAN},
                                  headers=auth(acme["publisher"]))  # fmt: skip
    assert direct.status_code == 409, direct.text
    said = direct.json()["detail"]
    assert "starts through a change request" in said and '"rollout"' in said
    opened = await open_rollout(api, acme["publisher"])
    assert opened["moves"][0]["rollout"]["steps"] == [50, 100]
    nothing = await api.client.get(ROLLOUT, headers=auth(acme["reader"]))
    assert nothing.status_code == 404  # not started before it is approved
    approved = await api.client.post(f"{T}/change-requests/{opened['id']}/approve", json={},
                                     headers=auth(acme["admin"]))  # fmt: skip
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] == "applied"
    rollout = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    assert (rollout["state"], rollout["step"], rollout["change_request"]) == (
        "running", 1, opened["id"]
    )  # fmt: skip
    assert await served(api, acme["reader"]) == 1  # the label stays until it is promoted
    # Pausing and resuming need no approval (the plan was approved); promoting early does.
    paused = await api.client.post(ROLLOUT + "/pause", headers=auth(acme["publisher"]))
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    resumed = await api.client.post(ROLLOUT + "/resume", headers=auth(acme["publisher"]))
    assert resumed.status_code == 200 and resumed.json()["state"] == "running"
    early = await api.client.post(ROLLOUT + "/promote", headers=auth(acme["publisher"]))
    assert early.status_code == 409 and "change request" in early.text
    # The steps go on by themselves, and the promotion moves the label on the request's approval.
    await api.app.state.advancer.advance_due()
    assert (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()["step"] == 2
    await api.app.state.advancer.advance_due()
    final = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    assert final["state"] == "promoted", final
    assert await served(api, acme["reader"]) == 2
    audit = await api.client.get(f"{T}/audit", headers=auth(acme["admin"]))
    actions = [e["action"] for e in audit.json()["items"]]
    assert "change_request.apply" in actions and "rollout.start" in actions
    assert "rollout.promote" in actions


async def test_rolling_back_needs_no_approval_and_a_stale_plan_is_refused(
    api: Api, acme: dict[str, str]
) -> None:
    await gated(api, acme)
    opened = await open_rollout(api, acme["publisher"])
    await api.client.post(f"{T}/change-requests/{opened['id']}/approve", json={},
                          headers=auth(acme["admin"]))  # fmt: skip
    back = await api.client.post(ROLLOUT + "/rollback", json={"reason": "looks off"},
                                 headers=auth(acme["publisher"]))  # fmt: skip
    assert back.status_code == 200 and back.json()["state"] == "rolled_back"
    assert back.json()["reason"] == "looks off"
    # A plan for a label that serves nothing is refused when written, saying why.
    move = {"prompt": "greet", "label": "beta", "version": 2, "rollout": PLAN}
    refused = await api.client.post(f"{T}/change-requests", headers=auth(acme["publisher"]),
                                    json={"description": "nothing to roll from", "moves": [move]})  # fmt: skip
    assert refused.status_code == 409 and "serves nothing" in refused.text
    bad_steps = {**move, "label": "production", "rollout": {"steps": [50, 90]}}
    invalid = await api.client.post(f"{T}/change-requests", headers=auth(acme["publisher"]),
                                    json={"description": "never all", "moves": [bad_steps]})  # fmt: skip
    assert invalid.status_code == 422 and "the last step is 100" in invalid.text


async def test_a_version_callers_fail_on_is_rolled_back_from_its_errors(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection
) -> None:
    # v3 needs an argument callers do not send: a contract break, approved by an admin's override.
    third = {"arguments": [*SIMPLE["arguments"], {"name": "tone", "required": True}],
             "messages": [{"role": "user", "content": {"type": "text", "text": "{{tone}} {{who}}"}}]}  # fmt: skip
    added = await api.client.post(f"{T}/prompts/greet/versions", json=third,
                                  headers=auth(acme["admin"]))  # fmt: skip
    assert added.status_code == 201, added.text
    await gated(api, acme)
    opened = await open_rollout(api, acme["publisher"], version=3)
    blocked = await api.client.post(f"{T}/change-requests/{opened['id']}/approve", json={},
                                    headers=auth(acme["admin"]))  # fmt: skip
    assert blocked.status_code == 409 and "breaking" in blocked.text
    overridden = await api.client.post(
        f"{T}/change-requests/{opened['id']}/approve",
        json={"override": "callers will send tone"}, headers=auth(acme["admin"]),
    )  # fmt: skip
    assert overridden.status_code == 200 and overridden.json()["state"] == "applied"
    await superuser.execute("UPDATE rollouts SET salt = $1", SALT)  # sides known before serving
    mcp = Stateless(api.client, "/mcp/acme", {})
    sides = {1: 0, 3: 0}
    for n in range(60):
        caller = f"caller-{n}"
        answer = await mcp.post("prompts/get", {"_meta": client_meta(caller), "name": "greet",
                                                "arguments": {"who": "x"}})  # fmt: skip
        body = answer.json()
        if "error" in body:  # the new side: tone is missing
            assert "tone" in body["error"]["message"]
            sides[3] += 1
        else:
            sides[version_of(body["result"])] += 1
    assert sides[1] >= 10 and sides[3] >= 10, sides
    for role in ("reader", "editor", "publisher", "admin"):  # the REST render counts alike
        rendered = await api.client.post(f"{T}/prompts/greet/render", headers=auth(acme[role]),
                                         json={"arguments": {"who": "x"}})  # fmt: skip
        assert rendered.status_code in (200, 422), rendered.text
        sides[1 if rendered.status_code == 200 else 3] += 1
    await api.app.state.ledger.flush()
    shown = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    assert (shown["new"]["errors"], shown["new"]["answers"]) == (sides[3], 0), shown
    assert (shown["old"]["errors"], shown["old"]["answers"]) == (0, sides[1]), shown
    await api.app.state.advancer.advance_due()
    after = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    assert after["state"] == "rolled_back", after
    assert "the new side fails more" in after["reason"], after
    assert version_of(await ask(mcp, "caller-0")) == 1
