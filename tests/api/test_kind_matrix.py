"""Every kind of artifact through every workflow (issue 66): one test per kind and workflow, made
from the registry's table of kinds, so a kind added to the table without its cells fails here.

A kind's cells differ only in what its content is and how MCP serves it (``KindCase``): the
workflows are written once. The push/pull round trip of both kinds, with and without approvals, is
the live test ``tests/test_release_cli.py::test_push_release_moves_skills_too_and_proposes_nothing_twice``
(it runs the ``registry`` command against a server); webhooks carry the change-log rows checked
here (``tests/test_webhooks.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.events.changes import Change
from registry.revisions import ALL_REVISIONS, STATELESS_REVISIONS
from tests.api.conftest import SIMPLE, Api, auth
from tests.mcp.conftest import RawMcp
from tests.mcp.test_stateless import Stateless, meta

T = "/api/v1/tenants/acme"
CR = f"{T}/change-requests"
SKILL_MD = "---\nname: review\ndescription: How we review <b>code</b>\n---\n# Review {n}\n"
MARKUP = "<b>code</b>"  # in what each kind's console page shows: escaped there


@dataclass(frozen=True)
class KindCase:
    """What differs between kinds, seen from outside: a first version, a next one, a test case
    that passes on the first and fails on the second."""

    name: str
    first: dict[str, Any]
    next: Callable[[int], dict[str, Any]]
    case: dict[str, Any]
    mcp: tuple[str, dict[str, Any]]  # the MCP request that reads what a label serves of it
    served: Callable[[dict[str, Any]], str]  # its text, from that request's result


def _prompt_version(n: int) -> dict[str, Any]:
    text = f"Hello {{{{who}}}}! (v{n})"
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "arguments": SIMPLE["arguments"]}  # fmt: skip


CASES = {
    "prompt": KindCase(
        name="greet",
        first={
            **SIMPLE,
            "description": f"Says hello {MARKUP}",
            "messages": _prompt_version(1)["messages"],
        },
        next=_prompt_version,
        case={"name": "v1", "arguments": {"who": "Ann"}, "expect": {"contains": ["(v1)"]}},
        mcp=("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}}),
        served=lambda result: str(result["messages"][0]["content"]["text"]),
    ),
    "skill": KindCase(
        name="review",
        first={"name": "review", "files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=1)}]},
        next=lambda n: {"files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=n)}]},
        case={"name": "v1", "expect": {"contains": ["# Review 1"]}},
        mcp=("resources/read", {"uri": "skill://review/SKILL.md"}),
        served=lambda result: str(result["contents"][0]["text"]),
    ),
}


def test_every_kind_of_the_table_has_its_cells() -> None:
    assert set(CASES) == set(ARTIFACT_KINDS), "a kind without its cells (or cells of no kind)"


@pytest.fixture(params=sorted(ARTIFACT_KINDS))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Tenant:
    def __init__(self, api: Api, kind: str, keys: dict[str, str]) -> None:
        self.api, self.kind, self.case = api, kind, CASES[kind]
        self.secrets = keys
        self.keys = {role: auth(secret) for role, secret in keys.items()}
        self.base = f"{T}/{ARTIFACT_KINDS[kind].plural}/{self.case.name}"

    async def create(self, **extra: Any) -> None:
        made = await self.api.client.post(
            f"{T}/{ARTIFACT_KINDS[self.kind].plural}", json={**self.case.first, **extra},
            headers=self.keys["admin"],
        )  # fmt: skip
        assert made.status_code == 201, made.text

    async def version(self, n: int) -> None:
        wrote = await self.api.client.post(
            f"{self.base}/versions", json=self.case.next(n), headers=self.keys["admin"]
        )
        assert wrote.status_code == 201, wrote.text

    async def gate(self, label: str = "production", approvals: int = 1) -> None:
        gated = await self.api.client.patch(
            T, json={"protected_labels": [label], "approvals": {label: approvals}},
            headers=self.keys["admin"],
        )  # fmt: skip
        assert gated.status_code == 200, gated.text

    def move(self, label: str, version: int) -> dict[str, Any]:
        return {ARTIFACT_KINDS[self.kind].move_key: self.case.name, "label": label,
                "version": version}  # fmt: skip

    async def labels(self) -> dict[str, int]:
        got = await self.api.client.get(self.base, headers=self.keys["admin"])
        assert got.status_code == 200, got.text
        return dict(got.json()["labels"])


async def _tenant(api: Api, kind: str) -> Tenant:
    return Tenant(api, kind, await api.tenant("acme"))


async def test_tests_are_stored_patched_and_run(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create(tests=[t.case.case])
    await t.version(2)
    patched = await api.client.patch(t.base, json={"tests": [t.case.case]}, headers=t.keys["admin"])
    assert patched.status_code == 200, patched.text
    first = await api.client.post(f"{t.base}/test", json={"version": 1}, headers=t.keys["admin"])
    assert first.status_code == 200 and first.json()["passed"], first.text
    second = await api.client.post(f"{t.base}/test", json={"version": 2}, headers=t.keys["admin"])
    assert second.status_code == 200 and not second.json()["passed"], second.text


async def test_a_label_moves_directly_without_approvals(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    await t.version(2)
    moved = await api.client.put(
        f"{t.base}/labels/production", json={"version": 2}, headers=t.keys["publisher"]
    )
    assert moved.status_code == 200, moved.text
    assert (await t.labels())["production"] == 2


async def test_a_change_request_opens_is_approved_applies_and_goes_stale(
    api: Api, kind: str
) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    await t.version(2)
    await t.version(3)
    await t.gate()
    direct = await api.client.put(
        f"{t.base}/labels/production", json={"version": 2}, headers=t.keys["publisher"]
    )
    assert direct.status_code == 409, direct.text
    body = {"description": "two", "moves": [t.move("production", 2)]}
    first = await api.client.post(CR, json=body, headers=t.keys["publisher"])
    assert first.status_code == 201, first.text
    body = {"description": "three", "moves": [t.move("production", 3)]}
    second = await api.client.post(CR, json=body, headers=t.keys["publisher"])
    assert second.status_code == 201, second.text
    approved = await api.client.post(f"{CR}/1/approve", json={}, headers=t.keys["admin"])
    assert approved.status_code == 200 and approved.json()["state"] == "applied", approved.text
    assert (await t.labels())["production"] == 2
    stale = await api.client.get(f"{CR}/2", headers=t.keys["admin"])
    assert stale.json()["state"] == "stale", stale.text
    shown = stale.json()["names"][stale.json()["author"]]
    assert not shown.startswith("key:") and "(key " in shown, f"the author by name: {shown}"


async def test_archive_and_bring_back(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    archived = await api.client.post(
        f"{t.base}/archive", json={"archived": True}, headers=t.keys["admin"]
    )
    assert archived.status_code == 200, archived.text
    moved = await api.client.put(
        f"{t.base}/labels/production", json={"version": 1}, headers=t.keys["admin"]
    )
    assert moved.status_code == 409 and "archived" in moved.json()["detail"], moved.text
    back = await api.client.post(
        f"{t.base}/archive", json={"archived": False}, headers=t.keys["admin"]
    )
    assert back.status_code == 200, back.text


async def test_only_an_archived_one_is_deleted(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    kept = await api.client.delete(t.base, headers=t.keys["admin"])
    assert kept.status_code == 409 and "archive it before" in kept.json()["detail"], kept.text
    archived = await api.client.post(
        f"{t.base}/archive", json={"archived": True}, headers=t.keys["admin"]
    )
    assert archived.status_code == 200, archived.text
    gone = await api.client.delete(t.base, headers=t.keys["admin"])
    assert gone.status_code == 204, gone.text
    assert (await api.client.get(t.base, headers=t.keys["admin"])).status_code == 404


async def test_export_then_import_into_another_tenant(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"], tests=[t.case.case])
    await t.version(2)
    bundle = await api.client.get(f"{T}/export", headers=t.keys["admin"])
    assert bundle.status_code == 200, bundle.text
    other = {role: auth(secret) for role, secret in (await api.tenant("other")).items()}
    into = "/api/v1/tenants/other"
    loaded = await api.client.post(f"{into}/import", json=bundle.json(), headers=other["admin"])
    assert loaded.status_code == 200, loaded.text
    plural = ARTIFACT_KINDS[kind].plural
    there = await api.client.get(f"{into}/{plural}/{t.case.name}", headers=other["admin"])
    assert there.status_code == 200, there.text
    assert there.json()["labels"]["production"] == 1
    again = await api.client.post(f"{into}/import", json=bundle.json(), headers=other["admin"])
    assert again.status_code == 200, again.text


async def test_one_change_of_the_right_kind_per_move(
    api: Api, kind: str, superuser: asyncpg.Connection
) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    await t.version(2)
    before = await superuser.fetchval("SELECT coalesce(max(seq), 0) FROM change_log")
    moved = await api.client.put(
        f"{t.base}/labels/production", json={"version": 2}, headers=t.keys["admin"]
    )
    assert moved.status_code == 200, moved.text
    rows = await superuser.fetch("SELECT kind, label FROM change_log WHERE seq > $1", before)
    assert [r["kind"] for r in rows if r["label"] == "production"] == [
        ARTIFACT_KINDS[kind].event("label.move")
    ], rows


@pytest.mark.parametrize("revision", ALL_REVISIONS)
async def test_served_over_mcp_on_every_revision(api: Api, kind: str, revision: str) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    await t.version(2)  # production stays on version 1
    method, params = t.case.mcp
    if revision in STATELESS_REVISIONS:
        named = params.get("name") or params.get("uri")
        stateless = Stateless(api.client, "/mcp/acme", t.keys["reader"])
        answer = await stateless.post(method, {"_meta": meta(), **params}, **{"Mcp-Name": named})
        assert answer.status_code == 200, answer.text
        result = answer.json()["result"]
    else:
        session = RawMcp(api.client, "/mcp/acme", t.keys["reader"])
        await session.initialize(revision)
        result = await session.result(method, params)
    text = t.case.served(result)
    assert ("(v1)" if kind == "prompt" else "# Review 1") in text, text


async def test_the_console_shows_it_and_its_change_request_escaped(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    await t.version(2)
    await t.gate()
    body = {"description": f"move {MARKUP}", "moves": [t.move("production", 2)]}
    opened = await api.client.post(CR, json=body, headers=t.keys["publisher"])
    assert opened.status_code == 201, opened.text
    signed = await api.client.post(
        "/ui/acme/login", data={"key": t.secrets["admin"].removeprefix("Bearer ")},
        headers={"Origin": "http://test"},
    )  # fmt: skip
    assert signed.status_code == 303, signed.text
    plural = ARTIFACT_KINDS[kind].plural
    for path in (f"/ui/acme/{plural}/{t.case.name}", "/ui/acme/change-requests/1",
                 "/ui/acme/change-requests"):  # fmt: skip
        page = await api.client.get(path)
        assert page.status_code == 200, (path, page.text[:1500])
        assert MARKUP not in page.text, path  # never unescaped
    shown = (await api.client.get("/ui/acme/change-requests/1")).text
    assert "&lt;b&gt;code&lt;/b&gt;" in shown and "key:" not in shown


async def test_a_gated_labels_first_move_needs_a_change_request(api: Api, kind: str) -> None:
    t = await _tenant(api, kind)
    await t.create()
    await t.gate()
    first = await api.client.put(
        f"{t.base}/labels/production", json={"version": 1}, headers=t.keys["publisher"]
    )
    assert first.status_code == 409 and "change request" in first.json()["detail"], first.text
    assert "production" not in await t.labels()


async def test_a_new_version_moves_latest_with_one_change(
    api: Api, kind: str, superuser: asyncpg.Connection
) -> None:
    t = await _tenant(api, kind)
    await t.create()
    before = await superuser.fetchval("SELECT coalesce(max(seq), 0) FROM change_log")
    await t.version(2)
    rows = await superuser.fetch("SELECT kind, label FROM change_log WHERE seq > $1", before)
    assert [r["kind"] for r in rows if r["label"] == "latest"] == [
        ARTIFACT_KINDS[kind].event("label.move")
    ], rows


async def test_webhooks_and_the_change_stream_name_the_kind(
    api: Api, kind: str, superuser: asyncpg.Connection
) -> None:
    """One move, one delivery whose payload says which kind of artifact moved, as the change
    stream's event does."""
    t = await _tenant(api, kind)
    await t.create(labels=["production"])
    await t.version(2)
    await superuser.execute(
        "INSERT INTO webhook_endpoints (tenant_id, url, secret, created_by) SELECT id,"
        " 'https://hooks.example/x', 'whsec_x', 'test' FROM tenants WHERE slug = 'acme'"
    )
    before = await superuser.fetchval("SELECT coalesce(max(seq), 0) FROM change_log")
    moved = await api.client.put(
        f"{t.base}/labels/production", json={"version": 2}, headers=t.keys["admin"]
    )
    assert moved.status_code == 200, moved.text
    payloads = await superuser.fetch(
        "SELECT payload FROM webhook_deliveries WHERE (payload->'data'->>'seq')::bigint > $1",
        before,
    )
    data = [json.loads(row["payload"])["data"] for row in payloads]
    assert [(d["artifact"], d[kind], d["label"]) for d in data] == [
        (kind, t.case.name, "production")
    ], data
    row = await superuser.fetchrow(
        "SELECT seq, kind, label, created_at FROM change_log WHERE seq > $1", before
    )
    change = Change(row["seq"], row["kind"], None, row["label"], row["created_at"])
    assert change.data()["artifact"] == kind
