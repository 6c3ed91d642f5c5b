"""Rollouts of a label, in process: the new version reaches exactly the callers the documented
rule places on the new side (SHA-256 of the rollout's salt and the caller), each keeps its side
across requests and as the share grows, kept answers never cross sides, receipts name the step,
the REST render and /served follow the same rule, a promotion moves the label, a rollback ends it,
for prompts and skills; and what may not start is refused, saying why."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from registry.rollouts.assign import bucket
from tests.conftest import Api, auth
from tests.mcp.test_stateless import REVISION, Stateless

T = "/api/v1/tenants/acme"
RECEIPT = "dev.prompt-registry/receipt"
ROLLOUT = f"{T}/prompts/greet/labels/production/rollout"


def client_meta(name: str) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


async def ask(mcp: Stateless, client: str) -> dict[str, Any]:
    """prompts/get of greet by an anonymous client that calls itself ``client``."""
    answer = await mcp.post(
        "prompts/get", {"_meta": client_meta(client), "name": "greet", "arguments": {"who": "x"}}
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


def version_of(result: dict[str, Any]) -> int:
    return int(result["_meta"][RECEIPT]["version"])


async def salt_of(superuser: asyncpg.Connection) -> bytes:
    return bytes(await superuser.fetchval("SELECT salt FROM rollouts ORDER BY id DESC LIMIT 1"))


def expected(salt: bytes, identity: str, share: int) -> int:
    return 2 if bucket(salt, identity) < share * 100 else 1


async def test_a_rollout_sends_the_new_version_to_its_share_stickily(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection
) -> None:
    started = await api.client.put(
        ROLLOUT, json={"version": 2, "steps": [20, 60, 100], "min_seconds": 0},
        headers=auth(acme["publisher"]),
    )  # fmt: skip
    assert started.status_code == 201, started.text
    shown = started.json()
    assert (shown["state"], shown["step"], shown["share"]) == ("running", 1, 20)
    salt = await salt_of(superuser)
    mcp = Stateless(api.client, "/mcp/acme", {})
    clients = [f"agent-{i}" for i in range(40)]
    seen: dict[str, int] = {}
    for _ in range(3):  # the full path, kept, then sent again from the bytes: never across sides
        for client in clients:
            result = await ask(mcp, client)
            version = version_of(result)
            assert version == expected(salt, f"anonymous:{client}/1", 20), client
            assert seen.setdefault(client, version) == version, f"{client} saw both versions"
            rollout = result["_meta"][RECEIPT]["rollout"]
            assert {k: v for k, v in rollout.items() if k != "caller"} == {
                "id": shown["id"], "step": 1, "share": 20, "side": "new" if version == 2 else "old",
            }  # fmt: skip
            assert len(rollout["caller"]) == 16  # the caller's digest: what bounds its say
    assert 0 < sum(v == 2 for v in seen.values()) < len(clients)  # both sides have callers

    assert await api.app.state.advancer.advance_due() == 1  # min_seconds 0: the next step
    for client in clients:
        version = version_of(await ask(mcp, client))
        assert version == expected(salt, f"anonymous:{client}/1", 60)
        assert not (seen[client] == 2 and version == 1), f"{client} went back to the old version"
    await api.app.state.ledger.flush()
    now = (await api.client.get(ROLLOUT, headers=auth(acme["reader"]))).json()
    assert (now["step"], now["share"]) == (2, 60)
    assert now["old"]["answers"] + now["new"]["answers"] == 3 * 40 + 40
    assert now["new"]["answers"] == 3 * sum(v == 2 for v in seen.values()) + sum(
        expected(salt, f"anonymous:{c}/1", 60) == 2 for c in clients
    )

    promoted = await api.client.post(ROLLOUT + "/promote", headers=auth(acme["publisher"]))
    assert promoted.status_code == 200 and promoted.json()["state"] == "promoted", promoted.text
    labels = (await api.client.get(f"{T}/prompts/greet", headers=auth(acme["reader"]))).json()
    assert labels["labels"]["production"] == 2
    for client in clients[:5]:
        result = await ask(mcp, client)
        assert version_of(result) == 2 and "rollout" not in result["_meta"][RECEIPT]


async def test_rest_reads_follow_the_same_rule(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection
) -> None:
    started = await api.client.put(ROLLOUT, json={"version": 2, "steps": [50, 100]},
                                   headers=auth(acme["publisher"]))  # fmt: skip
    assert started.status_code == 201, started.text
    salt = await salt_of(superuser)
    keys = (await api.client.get(f"{T}/keys", headers=auth(acme["admin"]))).json()
    for role in ("reader", "editor", "publisher", "admin"):
        key_id = next(k["id"] for k in keys if k["name"] == role)
        want = expected(salt, f"key:{key_id}", 50)
        rendered = await api.client.post(f"{T}/prompts/greet/render", json={"arguments": {"who": "x"}},
                                         headers=auth(acme[role]))  # fmt: skip
        assert rendered.status_code == 200, rendered.text
        receipt = rendered.json()["_meta"][RECEIPT]
        assert receipt["version"] == want and receipt["rollout"]["side"] == (
            "new" if want == 2 else "old"
        )
        served = await api.client.get(f"{T}/served", headers=auth(acme[role]))
        (record,) = [r for r in served.json()["prompts"] if r["name"] == "greet"]
        assert record["version"] == want, role
        one = await api.client.get(f"{T}/served/greet", headers=auth(acme[role]))
        assert one.json()["prompt"]["version"] == want, role


async def test_a_skill_rolls_out_and_back(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection
) -> None:
    def files(text: str) -> list[dict[str, str]]:
        return [{"path": "SKILL.md", "text": f"---\nname: review\ndescription: d\n---\n{text}\n"}]

    admin = auth(acme["admin"])
    made = await api.client.post(f"{T}/skills", json={"name": "review", "files": files("one"),
                                 "labels": ["production"]}, headers=admin)  # fmt: skip
    assert made.status_code == 201, made.text
    added = await api.client.post(f"{T}/skills/review/versions", json={"files": files("two")},
                                  headers=admin)  # fmt: skip
    assert added.status_code == 201, added.text
    rollout = f"{T}/skills/review/labels/production/rollout"
    started = await api.client.put(rollout, json={"version": 2, "steps": [50, 100]},
                                   headers=auth(acme["publisher"]))  # fmt: skip
    assert started.status_code == 201, started.text
    salt = await salt_of(superuser)
    mcp = Stateless(api.client, "/mcp/acme", {})
    uri = "skill://review/SKILL.md"
    for i in range(12):
        want = expected(salt, f"anonymous:agent-{i}/1", 50)
        read = await mcp.post("resources/read", {"_meta": client_meta(f"agent-{i}"), "uri": uri},
                              **{"Mcp-Name": uri})  # fmt: skip
        result = read.json()["result"]
        assert ("two" in result["contents"][0]["text"]) == (want == 2), i
        assert result["_meta"][RECEIPT]["version"] == want
    back = await api.client.post(rollout + "/rollback", json={"reason": "the reviews got worse"},
                                 headers=auth(acme["publisher"]))  # fmt: skip
    assert back.status_code == 200, back.text
    assert (back.json()["state"], back.json()["reason"]) == ("rolled_back", "the reviews got worse")
    for i in range(12):
        read = await mcp.post("resources/read", {"_meta": client_meta(f"agent-{i}"), "uri": uri},
                              **{"Mcp-Name": uri})  # fmt: skip
        assert "one" in read.json()["result"]["contents"][0]["text"]
    audit = (await api.client.get(f"{T}/audit", headers=admin)).json()
    actions = [entry["action"] for entry in (audit["items"] if isinstance(audit, dict) else audit)]
    assert "rollout.start" in actions and "rollout.rollback" in actions


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"version": 2, "steps": [10, 50]}, 422, "the last step is 100"),
        ({"version": 2, "steps": [50, 10, 100]}, 422, "each above the one before"),
        ({"version": 1}, 422, "serves version 1 already"),
        ({"version": 9}, 404, "no version 9"),
    ],
)
async def test_what_may_not_start_says_why(
    api: Api, acme: dict[str, str], body: dict[str, Any], status: int, says: str
) -> None:
    refused = await api.client.put(ROLLOUT, json=body, headers=auth(acme["publisher"]))
    assert refused.status_code == status, refused.text
    assert says in refused.text


async def test_one_live_rollout_roles_approvals_and_tests(api: Api, acme: dict[str, str]) -> None:
    body = {"version": 2, "steps": [50, 100]}
    as_editor = await api.client.put(ROLLOUT, json=body, headers=auth(acme["editor"]))
    assert as_editor.status_code == 403 and "publisher" in as_editor.text  # production is protected
    missing = await api.client.get(ROLLOUT, headers=auth(acme["reader"]))
    assert missing.status_code == 404
    first = await api.client.put(ROLLOUT, json=body, headers=auth(acme["publisher"]))
    assert first.status_code == 201, first.text
    again = await api.client.put(ROLLOUT, json=body, headers=auth(acme["publisher"]))
    assert again.status_code == 409 and "roll it back first" in again.text
    paused = await api.client.post(ROLLOUT + "/pause", headers=auth(acme["publisher"]))
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    assert (
        await api.client.post(ROLLOUT + "/pause", headers=auth(acme["publisher"]))
    ).status_code == 409
    assert (
        await api.client.post(ROLLOUT + "/resume", headers=auth(acme["publisher"]))
    ).status_code == 200
    assert (
        await api.client.post(ROLLOUT + "/rollback", headers=auth(acme["publisher"]))
    ).status_code == 200
    ended = await api.client.post(ROLLOUT + "/promote", headers=auth(acme["publisher"]))
    assert ended.status_code == 409 and "no live rollout" in ended.text
    # A failing stored test, and a label that needs approvals.
    tests = [{"name": "says-hello", "arguments": {"who": "Ann"}, "expect": {"contains": ["Hello"]}}]
    patched = await api.client.patch(
        f"{T}/prompts/greet", json={"tests": tests}, headers=auth(acme["admin"])
    )
    assert patched.status_code == 200, patched.text
    failing = await api.client.put(ROLLOUT, json=body, headers=auth(acme["publisher"]))
    assert failing.status_code == 409 and "says-hello" in failing.text
    await api.client.patch(f"{T}/prompts/greet", json={"tests": []}, headers=auth(acme["admin"]))
    gated = await api.client.patch(
        T, json={"approvals": {"production": 1}}, headers=auth(acme["admin"])
    )
    assert gated.status_code == 200, gated.text
    needs = await api.client.put(ROLLOUT, json=body, headers=auth(acme["publisher"]))
    assert needs.status_code == 409 and "change request" in needs.text
    glass = await api.client.put(
        ROLLOUT, json={**body, "reason": "hotfix"}, headers=auth(acme["admin"])
    )
    assert glass.status_code == 201, glass.text


async def test_tool_calls_follow_the_same_rule(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection
) -> None:
    """render_prompt as a tool, for clients that show no prompts: the same sides, kept or not."""
    on = await api.client.patch(T, json={"mcp_tools": True}, headers=auth(acme["admin"]))
    assert on.status_code == 200, on.text
    started = await api.client.put(ROLLOUT, json={"version": 2, "steps": [50, 100]},
                                   headers=auth(acme["publisher"]))  # fmt: skip
    assert started.status_code == 201, started.text
    salt = await salt_of(superuser)
    mcp = Stateless(api.client, "/mcp/acme", {})
    for i in range(30):
        client = f"tool-agent-{i}"
        want = expected(salt, f"anonymous:{client}/1", 50)
        for _ in range(2):
            called = await mcp.post("tools/call", {"_meta": client_meta(client), "name": "render_prompt",
                                    "arguments": {"name": "greet", "arguments": {"who": "x"}}},
                                    **{"Mcp-Name": "render_prompt"})  # fmt: skip
            assert called.status_code == 200, called.text
            result = called.json()["result"]
            assert result.get("isError") is not True, result
            assert result["structuredContent"]["version"] == want, client
            side = result["_meta"][RECEIPT]["rollout"]["side"]
            assert side == ("new" if want == 2 else "old"), client
