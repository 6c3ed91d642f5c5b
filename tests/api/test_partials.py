"""Partials: locked when the parent version is written, so a parent renders the same forever; an
explicit refresh locks anew; the impact query, the diff, export and import, refusals at write time,
and MCP prompts/get all understand them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from registry.prompts.partials import MAX_DEPTH
from tests.conftest import Api, auth
from tests.mcp.conftest import RawMcp

T = "/api/v1/tenants/acme"


def text(body: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": body}}], **extra}


class Acme:
    def __init__(self, api: Api, keys: dict[str, str]) -> None:
        self.api, self.keys = api, keys

    async def create(self, name: str, body: str, **extra: Any) -> httpx.Response:
        return await self.api.client.post(
            f"{T}/prompts", json={"name": name, **text(body, **extra)},
            headers=auth(self.keys["publisher"]),
        )  # fmt: skip

    async def version(self, name: str, body: str, **extra: Any) -> httpx.Response:
        return await self.api.client.post(
            f"{T}/prompts/{name}/versions", json=text(body, **extra),
            headers=auth(self.keys["publisher"]),
        )  # fmt: skip

    async def move(self, name: str, label: str, version: int) -> None:
        moved = await self.api.client.put(
            f"{T}/prompts/{name}/labels/{label}", json={"version": version},
            headers=auth(self.keys["publisher"]),
        )  # fmt: skip
        assert moved.status_code == 200, moved.text

    async def render(self, name: str, arguments: dict[str, str], **select: Any) -> str:
        rendered = await self.api.client.post(
            f"{T}/prompts/{name}/render", json={"arguments": arguments, **select},
            headers=auth(self.keys["reader"]),
        )  # fmt: skip
        assert rendered.status_code == 200, rendered.text
        return str(rendered.json()["messages"][0]["content"]["text"])

    async def get(self, path: str) -> Any:
        answer = await self.api.client.get(f"{T}{path}", headers=auth(self.keys["reader"]))
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture
async def acme(api: Api) -> Acme:
    tenant = Acme(api, await api.tenant("acme"))
    made = await tenant.create("tone", "Be {{style}}.", labels=["production"],
                               arguments=[{"name": "style", "default": "kind"}])  # fmt: skip
    assert made.status_code == 201, made.text
    made = await tenant.create(
        "answer", "{{> tone}} Answer about {{topic}}.", labels=["production"],
        arguments=[{"name": "topic", "required": True}, {"name": "style", "default": "kind"}],
    )  # fmt: skip
    assert made.status_code == 201, made.text
    return tenant


async def test_a_parent_renders_its_locked_child(acme: Acme) -> None:
    assert await acme.render("answer", {"topic": "billing"}) == "Be kind. Answer about billing."
    version = await acme.get("/prompts/answer/versions/1")
    assert version["partials"] == [{"ref": "tone", "version": 1}]


async def test_publishing_a_shared_partial_does_not_change_a_parent_in_production(
    acme: Acme,
) -> None:
    written = await acme.version("tone", "Be {{style}} and brief.",
                                 arguments=[{"name": "style", "default": "kind"}])  # fmt: skip
    assert written.status_code == 201, written.text
    await acme.move("tone", "production", 2)
    # The parent still serves what it locked, over REST and MCP alike.
    assert await acme.render("answer", {"topic": "x"}) == "Be kind. Answer about x."
    mcp = RawMcp(acme.api.client, "/mcp/acme", headers=auth(acme.keys["reader"]))
    await mcp.initialize("2025-11-25")
    got = await mcp.result("prompts/get", {"name": "answer", "arguments": {"topic": "x"}})
    assert got["messages"][0]["content"]["text"] == "Be kind. Answer about x."
    # The impact query says which labels a refresh would change.
    impact = await acme.get("/prompts/tone/impact")
    production = next(e for e in impact if "production" in e["labels"])
    assert production == {
        "prompt": "answer", "version": 1, "labels": ["latest", "production"], "ref": "tone",
        "locked_version": 1, "current_version": 2, "stale": True,
    }  # fmt: skip
    # An explicit refresh writes a new parent version; production moves only when told.
    refreshed = await acme.api.client.post(
        f"{T}/prompts/answer/refresh", json={}, headers=auth(acme.keys["editor"])
    )
    assert refreshed.status_code == 201, refreshed.text
    assert refreshed.json()["version"] == 2
    assert await acme.render("answer", {"topic": "x"}) == "Be kind. Answer about x."
    assert await acme.render("answer", {"topic": "x"}, version=2) == (
        "Be kind and brief. Answer about x."
    )
    again = await acme.api.client.post(
        f"{T}/prompts/answer/refresh", json={}, headers=auth(acme.keys["editor"])
    )
    assert again.status_code == 200 and again.json()["created"] is False  # nothing to refresh
    diff = await acme.get("/prompts/answer/diff?from=1&to=2")
    assert diff["partials"] == [{"ref": "tone", "before": 1, "after": 2}]


async def test_label_and_version_selectors(acme: Acme) -> None:
    await acme.version("tone", "Be {{style}}, staging.", arguments=[{"name": "style"}])
    await acme.move("tone", "staging", 2)
    made = await acme.create(
        "pinned", "{{> tone@staging}}|{{> tone@1}}", arguments=[{"name": "style"}]
    )
    assert made.status_code == 201, made.text
    assert await acme.render("pinned", {"style": "calm"}, label="latest") == (
        "Be calm, staging.|Be calm."
    )
    locks = (await acme.get("/prompts/pinned/versions/1"))["partials"]
    assert locks == [{"ref": "tone@1", "version": 1}, {"ref": "tone@staging", "version": 2}]


async def test_restore_keeps_the_old_locks(acme: Acme) -> None:
    await acme.version(
        "tone", "Be {{style}}, v2.", arguments=[{"name": "style", "default": "kind"}]
    )
    await acme.move("tone", "production", 2)
    await acme.api.client.post(f"{T}/prompts/answer/refresh", json={},
                               headers=auth(acme.keys["editor"]))  # fmt: skip
    restored = await acme.api.client.post(
        f"{T}/prompts/answer/versions/1/restore", headers=auth(acme.keys["editor"])
    )
    assert restored.status_code in (200, 201), restored.text
    number = restored.json()["version"]
    assert (await acme.get(f"/prompts/answer/versions/{number}"))["partials"] == [
        {"ref": "tone", "version": 1}
    ]


@pytest.mark.parametrize(
    ("name", "body", "arguments", "named"),
    [
        ("a", "{{> nobody}}", [], "no prompt 'nobody'"),
        ("b", "{{> tone@qa}}", [{"name": "style"}], "no version labelled 'qa'"),
        ("c", "{{> tone@9}}", [{"name": "style"}], "no version 9"),
        ("d", "{{> tone}}", [], "uses 'style', which is not an argument of this prompt"),
        ("tone", "{{> answer}}", [{"name": "style"}, {"name": "topic"}], "cycle (tone > answer > tone)"),
    ],
)  # fmt: skip
async def test_bad_partials_are_refused_naming_them(
    acme: Acme, name: str, body: str, arguments: list[dict[str, Any]], named: str
) -> None:
    if name == "tone":
        refused = await acme.version(name, body, arguments=arguments)
    else:
        refused = await acme.create(name, body, arguments=arguments)
    assert refused.status_code == 422, refused.text
    assert named in refused.json()["detail"]


async def test_a_child_must_be_one_text_message(acme: Acme) -> None:
    two = {"name": "two", "labels": ["production"], "messages": [
        {"role": "user", "text": "one"}, {"role": "assistant", "text": "two"}]}  # fmt: skip
    made = await acme.api.client.post(
        f"{T}/prompts", json=two, headers=auth(acme.keys["publisher"])
    )
    assert made.status_code == 201, made.text
    refused = await acme.create("uses-two", "{{> two}}")
    assert refused.status_code == 422 and "a partial is one text message" in refused.text


async def test_depth_beyond_the_limit_is_refused_with_the_path(acme: Acme) -> None:
    previous = None
    for level in range(MAX_DEPTH + 2):  # level0 alone; levelN includes N levels below it
        name = f"level{level}"
        body = f"{level}" + (f"{{{{> {previous}}}}}" if previous else "")
        made = await acme.create(name, body, labels=["production"])
        if level <= MAX_DEPTH:
            assert made.status_code == 201, made.text
        else:
            assert made.status_code == 422, made.text
            assert f"nest more than {MAX_DEPTH} levels" in made.text
            assert "level6 > level5 > level4 > level3 > level2 > level1 > level0" in made.text
        previous = name
    assert await acme.render("level5", {}) == "543210"


async def test_a_child_in_use_cannot_be_deleted(acme: Acme) -> None:
    headers = auth(acme.keys["admin"])
    await acme.api.client.post(f"{T}/prompts/tone/archive", headers=headers)
    refused = await acme.api.client.delete(f"{T}/prompts/tone", headers=headers)
    assert refused.status_code == 409 and "'answer'" in refused.text


async def test_export_then_import_into_an_empty_tenant_keeps_the_locks(acme: Acme) -> None:
    await acme.version(
        "tone", "Be {{style}}, v2.", arguments=[{"name": "style", "default": "kind"}]
    )
    await acme.move("tone", "production", 2)  # the parent still locks version 1
    bundle = await acme.api.client.get(f"{T}/export?versions=labelled",
                                       headers=auth(acme.keys["reader"]))  # fmt: skip
    assert bundle.status_code == 200, bundle.text
    document = bundle.json()
    document["prompts"].sort(key=lambda p: p["name"])  # the parent ('answer') comes first
    keys = await acme.api.tenant("empty")
    loaded = await acme.api.client.post(
        "/api/v1/tenants/empty/import", json=document, headers=auth(keys["publisher"])
    )
    assert loaded.status_code == 200, loaded.text
    rendered = await acme.api.client.post(
        "/api/v1/tenants/empty/prompts/answer/render", json={"arguments": {"topic": "x"}},
        headers=auth(keys["reader"]),
    )  # fmt: skip
    assert rendered.json()["messages"][0]["content"]["text"] == "Be kind. Answer about x."
    again = await acme.api.client.post(
        "/api/v1/tenants/empty/import", json=document, headers=auth(keys["publisher"])
    )
    assert again.json()["versions_created"] == 0  # idempotent, locks included


async def test_what_one_render_produces_is_bounded(acme: Acme) -> None:
    """A leaf inserting a value, included ten times at each of five levels: a small request would
    multiply its value 100,000 times. Refused while rendering (REST 422, MCP -32602) naming the
    bound, and when written where the longest value is known."""
    a = [{"name": "a"}]
    assert (
        await acme.create("fan0", "{{a}}", labels=["production"], arguments=a)
    ).status_code == 201
    for level in range(1, 6):
        body = f"{{{{> fan{level - 1}}}}}" * 10
        made = await acme.create(f"fan{level}", body, labels=["production"], arguments=a)
        assert made.status_code == 201, made.text
    assert len(await acme.render("fan5", {"a": "x"})) == 100_000  # small values still render
    refused = await acme.api.client.post(
        f"{T}/prompts/fan5/render", json={"arguments": {"a": "x" * 5000}},
        headers=auth(acme.keys["reader"]),
    )  # fmt: skip
    assert refused.status_code == 422, refused.text[:500]
    assert "longer than 2,000,000 characters" in refused.json()["detail"]
    mcp = RawMcp(acme.api.client, "/mcp/acme", headers=auth(acme.keys["reader"]))
    await mcp.initialize("2025-11-25")
    error = await mcp.error("prompts/get", {"name": "fan5", "arguments": {"a": "x" * 5000}})
    assert error["code"] == -32602 and "REGISTRY_MAX_RENDERED_CHARS" in error["message"]
    # Known when written: every value of 'a' may be 100 characters long.
    bounded = [{"name": "a", "max_length": 100}]
    written = await acme.create("fan-top", "{{> fan4}}" * 10, arguments=bounded)
    assert written.status_code == 422, written.text
    assert "10,000,000 characters" in written.json()["detail"]
    # Levels of partials cannot build a huge template either: size is measured before expanding.
    wide = await acme.create("fan-wide", "{{> fan4}}" * 100, arguments=a)
    assert wide.status_code == 422, wide.text
    assert "characters of text and tags" in wide.json()["detail"]
