"""Every kind of artifact through every workflow (issue 66): one test per kind and workflow, made
from the registry's table of kinds, so a kind added to the table without its cells fails here.

A kind's cells differ only in what its content is (``KindCase``): the workflows are written once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from registry.artifacts.kinds import ARTIFACT_KINDS
from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"
CR = f"{T}/change-requests"
SKILL_MD = "---\nname: review\ndescription: How we review\n---\n# Review {n}\n"


@dataclass(frozen=True)
class KindCase:
    """What differs between kinds, seen from outside: a first version, a next one, a test case
    that passes on the first and fails on the second."""

    name: str
    first: dict[str, Any]
    next: Callable[[int], dict[str, Any]]
    case: dict[str, Any]


def _prompt_version(n: int) -> dict[str, Any]:
    text = f"Hello {{{{who}}}}! (v{n})"
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "arguments": SIMPLE["arguments"]}  # fmt: skip


CASES = {
    "prompt": KindCase(
        name="greet",
        first={**SIMPLE, "messages": _prompt_version(1)["messages"]},
        next=_prompt_version,
        case={"name": "v1", "arguments": {"who": "Ann"}, "expect": {"contains": ["(v1)"]}},
    ),
    "skill": KindCase(
        name="review",
        first={"name": "review", "files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=1)}]},
        next=lambda n: {"files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=n)}]},
        case={"name": "v1", "expect": {"contains": ["# Review 1"]}},
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
