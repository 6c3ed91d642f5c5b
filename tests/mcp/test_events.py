"""The Events extension's poll delivery, driven by a client written from the draft
(tests/mcp/events_client.py): declared in server/discover, each type listed with its schemas,
every change delivered once and in order to the subscriptions it concerns (by type, name, label),
a backlog drained in batches with nothing lost or repeated, a cursor that opens only for its
tenant, type and arguments, a gap said as ``truncated``, and the draft's errors by code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest

from registry import signing
from registry.skills.provenance import entry_document, manifest_digest
from tests.conftest import SIMPLE, Api, auth
from tests.mcp.conftest import RawMcp
from tests.mcp.events_client import EventsClient, EventsError, Subscription
from tests.mcp.test_stateless import Stateless, meta

T = "/api/v1/tenants/acme"
TYPES = {"prompt.changed", "skill.changed", "rollout.changed", "change_request.changed",
         "tenant.changed", "library.changed"}  # fmt: skip
SKILL_MD = "---\nname: review\ndescription: d\n---\nOne\n"
SKILL: dict[str, Any] = {
    "name": "review", "labels": ["production"], "files": [{"path": "SKILL.md", "text": SKILL_MD}],
}  # fmt: skip


@pytest.fixture
def settings_overrides(tmp_path: Path) -> dict[str, object]:
    key = tmp_path / "signing-key.pem"  # skills/get signs the manifests a host holds
    signing.make_key_file(key)
    return {"snapshot_key_file": key}


@pytest.fixture
async def acme(api: Api) -> dict[str, str]:
    return await api.tenant("acme", public_read=True)


def client(api: Api, key: str | None, tenant: str = "acme") -> EventsClient:
    headers = auth(key) if key else {}
    return EventsClient(Stateless(api.client, f"/mcp/{tenant}", headers))


async def write(api: Api, key: str, path: str, body: dict[str, Any]) -> None:
    answer = await api.client.post(f"{T}{path}", json=body, headers=auth(key))
    assert answer.status_code in (200, 201), answer.text


async def test_changes_reach_the_subscriptions_they_concern_once_and_in_order(
    api: Api, acme: dict[str, str]
) -> None:
    events = client(api, acme["publisher"])
    assert await events.offered()
    assert set(await events.types()) == TYPES
    every = Subscription("prompt.changed", {})
    greet = Subscription("prompt.changed", {"name": "greet"})
    staged = Subscription("prompt.changed", {"label": "staging"})
    skills = Subscription("skill.changed", {})
    requests = Subscription("change_request.changed", {})
    for subscription in (every, greet, staged, skills, requests):
        assert await events.poll(subscription) == []  # null: from now on
        assert subscription.cursor is not None
    await write(api, acme["publisher"], "/prompts", {**SIMPLE, "labels": ["production"]})
    await write(api, acme["publisher"], "/prompts", {**SIMPLE, "name": "other"})
    second = {"arguments": SIMPLE["arguments"],
              "messages": [{"role": "user", "content": {"type": "text", "text": "Hi {{who}}"}}]}  # fmt: skip
    await write(api, acme["publisher"], "/prompts/greet/versions", second)
    moved = await api.client.put(f"{T}/prompts/greet/labels/staging", json={"version": 2},
                                 headers=auth(acme["publisher"]))  # fmt: skip
    assert moved.status_code == 200, moved.text
    await write(api, acme["publisher"], "/skills", SKILL)
    move = {"prompt": "greet", "label": "production", "version": 2}
    await write(api, acme["editor"], "/change-requests", {"description": "v2", "moves": [move]})

    delivered = await events.poll(every)  # each write's rows (a version, the labels it moved)
    names = [e["data"]["prompt"] for e in delivered]
    runs = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
    assert runs == ["greet", "other", "greet"], names
    seqs = [e["data"]["seq"] for e in delivered]
    assert seqs == sorted(seqs)
    assert {e["data"]["prompt"] for e in await events.poll(greet)} == {"greet"}
    labelled = await events.poll(staged)  # a staging move, and changes of every label
    assert any(e["data"]["label"] == "staging" for e in labelled)
    assert all(e["data"]["label"] in ("staging", None) for e in labelled)
    assert {e["data"]["skill"] for e in await events.poll(skills)} == {"review"}
    opened = await events.poll(requests)
    assert [e["data"]["kind"] for e in opened] == ["change_request.opened"]
    for subscription in (every, greet, staged, skills, requests):  # nothing twice
        assert await events.poll(subscription) == []


async def test_a_backlog_drains_in_batches_and_a_gap_is_said(
    api: Api, acme: dict[str, str], superuser: asyncpg.Connection
) -> None:
    events = client(api, acme["publisher"])
    start = Subscription("prompt.changed", {})
    await events.poll(start)
    for index in range(7):
        await write(api, acme["publisher"], "/prompts", {**SIMPLE, "name": f"p{index}"})
    whole = Subscription("prompt.changed", {}, cursor=start.cursor)
    batched = Subscription("prompt.changed", {}, cursor=start.cursor)
    everything = await events.poll(whole)
    assert [e["data"]["prompt"] for e in everything] == [f"p{i}" for i in range(7)]
    assert await events.poll(batched, maxEvents=2) == everything  # hasMore drained, none lost
    # Older rows leave the log (retention): a cursor from before them is a gap, said once.
    tenant = await superuser.fetchval("SELECT id FROM tenants WHERE slug = 'acme'")
    await superuser.execute("SET session_replication_role = replica")  # past its immutability
    await superuser.execute(
        "DELETE FROM change_log WHERE tenant_id = $1 AND seq <= "
        "(SELECT min(seq) + 2 FROM change_log WHERE tenant_id = $1)",
        tenant,
    )
    late = Subscription("prompt.changed", {}, cursor=start.cursor)
    kept = await events.poll(late)
    assert late.gaps == 1, late  # said once, and what the log still holds comes after it
    assert kept and kept == everything[len(everything) - len(kept) :]
    # maxAgeMs: events older than the floor are skipped, and that is a gap too.
    await superuser.execute(
        "UPDATE change_log SET created_at = now() - interval '1 hour' WHERE tenant_id = $1", tenant
    )
    await superuser.execute("RESET session_replication_role")
    aged = Subscription("prompt.changed", {}, cursor=start.cursor)
    assert await events.poll(aged, maxAgeMs=60_000) == [] and aged.gaps >= 1


async def test_refusals_carry_the_drafts_codes(api: Api, acme: dict[str, str]) -> None:
    events = client(api, acme["publisher"])
    mine = Subscription("prompt.changed", {"name": "greet"})
    await events.poll(mine)
    cases: list[tuple[dict[str, Any], int]] = [
        ({"name": "email.received", "arguments": {}, "cursor": None}, -32023),
        ({"name": "prompt.changed", "arguments": {"tone": "x"}, "cursor": None}, -32602),
        ({"name": "prompt.changed", "arguments": {"name": 3}, "cursor": None}, -32602),
        ({"name": "prompt.changed", "arguments": {}, "cursor": mine.cursor}, -32602),  # other args
        ({"name": "skill.changed", "arguments": {"name": "greet"}, "cursor": mine.cursor}, -32602),
        ({"name": "prompt.changed", "arguments": {}, "cursor": "made.up"}, -32602),
        ({"name": "prompt.changed", "arguments": {}, "maxEvents": 0}, -32602),
    ]
    for params, code in cases:
        with pytest.raises(EventsError) as refused:
            await events.call("events/poll", params)
        assert refused.value.code == code, (params, refused.value)
    with pytest.raises(EventsError) as unknown:
        await events.call("events/poll", {"name": "nope", "arguments": {}})
    assert unknown.value.data == {"kind": "event"}
    other = await api.tenant("beta")  # a cursor opens for its own tenant only
    with pytest.raises(EventsError) as elsewhere:
        await client(api, other["publisher"], "beta").call(
            "events/poll", {"name": "prompt.changed", "arguments": {"name": "greet"},
                            "cursor": mine.cursor},
        )  # fmt: skip
    assert elsewhere.value.code == -32602
    # An anonymous caller of a public tenant follows prompts and skills on a published label only.
    stranger = client(api, None)
    assert set(await stranger.types()) == {"prompt.changed", "skill.changed"}
    for name, arguments in (("prompt.changed", {}), ("prompt.changed", {"label": "staging"}),
                            ("change_request.changed", {"label": "production"})):  # fmt: skip
        with pytest.raises(EventsError) as anonymous:
            await stranger.call("events/poll", {"name": name, "arguments": arguments})
        assert anonymous.value.code == -32024, (name, arguments)
    published = Subscription("prompt.changed", {"label": "production"})
    await stranger.poll(published)
    await write(api, acme["publisher"], "/prompts", {**SIMPLE, "labels": ["production"]})
    await write(api, acme["publisher"], "/prompts", {**SIMPLE, "name": "draft", "labels": []})
    seen = await stranger.poll(published)
    assert {e["data"]["prompt"] for e in seen} == {"greet"}, seen
    assert all(e["data"]["label"] in ("production", None) for e in seen)
    session = RawMcp(api.client, "/mcp/acme", headers=auth(acme["publisher"]))
    await session.initialize("2025-11-25")  # the draft is defined from 2026-07-28 only
    assert (await session.error("events/list"))["code"] == -32601


async def test_a_skill_event_names_the_manifest_its_label_serves_now(
    api: Api, acme: dict[str, str]
) -> None:
    """A host that loaded skill review from production holds its manifest's digest; a version moved
    to staging is no event of its subscription, and moving production is one whose digest is what
    skills/get serves now (so the host refreshes exactly then)."""
    await write(api, acme["publisher"], "/skills", SKILL)
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["publisher"]))

    async def held() -> str:
        answer = await mcp.post("skills/get", {"_meta": meta(), "uri": "skill://review/SKILL.md"})
        signed, _ = entry_document(answer.json()["result"]["skill"])
        return manifest_digest(signed)

    loaded = await held()
    events = client(api, acme["publisher"])
    watched = Subscription("skill.changed", {"name": "review", "label": "production"})
    await events.poll(watched)
    two = {"files": [{"path": "SKILL.md", "text": SKILL_MD + "Two\n"}],
           "labels": ["staging"]}  # fmt: skip
    await write(api, acme["publisher"], "/skills/review/versions", two)
    assert await events.poll(watched) == []  # a version and a staging move: not production's
    moved = await api.client.put(f"{T}/skills/review/labels/production", json={"version": 2},
                                 headers=auth(acme["publisher"]))  # fmt: skip
    assert moved.status_code == 200, moved.text
    (event,) = await events.poll(watched)
    served = event["data"]["served"]
    assert served["version"] == 2 and served["digest"] != loaded
    assert served["digest"] == await held()  # what skills/get serves now, exactly
