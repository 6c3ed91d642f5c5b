"""The serve ledger end to end in process: every serving path counts (MCP prompts/get from the full
path, the answer cache and the kept bytes; tools/call; skills/get, resources/read and directory
reads; the REST render and /served), a flush writes the counts, and the questions answer them by
every dimension, with keyset pages, clear errors and no other tenant's rows."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import SIMPLE, Api, auth
from tests.mcp.conftest import RawMcp
from tests.mcp.test_stateless import CLIENT, Stateless, meta

T = "/api/v1/tenants/acme"
SKILL = [{"path": "SKILL.md", "text": "---\nname: review\ndescription: d\n---\nCheck it.\n"},
         {"path": "docs/notes.md", "text": "notes"}]  # fmt: skip


def version_body(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "arguments": SIMPLE["arguments"]}  # fmt: skip


@pytest.fixture
async def acme(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme")
    tools = await api.client.patch(T, json={"mcp_tools": True}, headers=auth(keys["admin"]))
    assert tools.status_code == 200, tools.text
    made = await api.client.post(
        f"{T}/prompts", json={**SIMPLE, "labels": ["production"], "as_tool": True},
        headers=auth(keys["publisher"]),
    )  # fmt: skip
    assert made.status_code == 201, made.text
    idle = await api.client.post(
        f"{T}/prompts", json={**SIMPLE, "name": "unused", "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )  # fmt: skip
    assert idle.status_code == 201, idle.text
    skill = await api.client.post(
        f"{T}/skills", json={"name": "review", "files": SKILL, "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )  # fmt: skip
    assert skill.status_code == 201, skill.text
    return keys


async def named(mcp: Stateless, method: str, target: str, params: dict[str, Any]) -> None:
    """A request whose target the Mcp-Name header mirrors (tools/call, resources/read, ...)."""
    answer = await mcp.post(method, {"_meta": meta(), **params}, **{"Mcp-Name": target})
    assert answer.status_code == 200, answer.text
    assert "error" not in answer.json() and not answer.json()["result"].get("isError"), answer.text


async def usage(api: Api, keys: dict[str, str], **query: Any) -> dict[str, Any]:
    answer = await api.client.get(f"{T}/usage", params=query, headers=auth(keys["reader"]))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_every_serving_path_counts_once_per_answer(api: Api, acme: dict[str, str]) -> None:
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    for _ in range(4):  # the full path twice, then the answer cache, then the kept bytes
        await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    await mcp.result("prompts/get", {"name": "greet@1", "arguments": {"who": "Bo"}})
    tools = await mcp.result("tools/list")
    tool = next(t["name"] for t in tools["tools"] if "greet" in t["name"])
    await named(mcp, "tools/call", tool, {"name": tool, "arguments": {"who": "Cy"}})
    await named(mcp, "skills/get", "skill://review/SKILL.md", {"uri": "skill://review/SKILL.md"})
    notes = "skill://review/docs/notes.md"
    await named(mcp, "resources/read", notes, {"uri": notes})
    listed = await mcp.post(
        "resources/directory/read", {"_meta": meta(), "uri": "skill://review/docs"}
    )
    assert "result" in listed.json(), listed.text  # an extension's method: no official schema
    rendered = await api.client.post(
        f"{T}/prompts/greet/render", json={"arguments": {"who": "Di"}},
        headers={**auth(acme["reader"]), "User-Agent": "my-app/2.0"},
    )  # fmt: skip
    assert rendered.status_code == 200, rendered.text
    served = await api.client.get(f"{T}/served", headers=auth(acme["reader"]))
    assert served.status_code == 200
    assert await api.app.state.ledger.flush() > 0

    page = await usage(api, acme, by="version,label,surface,client")
    rows = {
        (r["kind"], r["name"], r["version"], r["label"], r["surface"], r["client"]): r["answers"]
        for r in page["rows"]
    }
    client = f"{CLIENT['name']}/{CLIENT['version']}"
    assert rows[("prompt", "greet", 1, "production", "prompts/get", client)] == 4
    assert rows[("prompt", "greet", 1, "", "prompts/get", client)] == 1  # asked by version
    assert rows[("prompt", "greet", 1, "production", "tools/call", client)] == 1
    assert rows[("skill", "review", 1, "production", "skills/get", client)] == 1
    assert rows[("skill", "review", 1, "production", "resources/read", client)] == 1
    assert rows[("skill", "review", 1, "production", "resources/directory/read", client)] == 1
    assert rows[("prompt", "greet", 1, "production", "rest/render", "my-app/2.0")] == 1
    served_rows = [k for k in rows if k[4] == "rest/served"]
    assert {k[1] for k in served_rows} == {"greet", "unused"}
    assert sum(rows.values()) == 4 + 1 + 1 + 1 + 1 + 1 + 1 + 2
    # The caller is the reader's key, named as the audit log and the console name it.
    by_caller = await usage(api, acme, by="caller", name="greet")
    (row,) = by_caller["rows"]
    assert row["caller"].startswith("key:") and row["answers"] == 4 + 1 + 1 + 1 + 1
    assert "reader" in by_caller["names"][row["caller"]]
    assert row["first"] <= row["last"]


async def test_versions_over_time_after_a_move_and_the_questions(
    api: Api, acme: dict[str, str]
) -> None:
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    added = await api.client.post(
        f"{T}/prompts/greet/versions", json=version_body("Hi {{who}}"),
        headers=auth(acme["editor"]),
    )  # fmt: skip
    assert added.status_code == 201, added.text
    moved = await api.client.put(
        f"{T}/prompts/greet/labels/production", json={"version": 2},
        headers=auth(acme["publisher"]),
    )  # fmt: skip
    assert moved.status_code == 200, moved.text
    for _ in range(3):
        await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    await api.app.state.ledger.flush()

    versions = await usage(api, acme, name="greet", by="version,minute")
    assert {r["version"]: 0 for r in versions["rows"]} == {1: 0, 2: 0}
    assert sum(r["answers"] for r in versions["rows"] if r["version"] == 2) == 3
    assert versions["source"] == "minutes"
    assert all(r["at"] is not None for r in versions["rows"])
    by_day = await usage(api, acme, name="greet", by="version,day")
    assert by_day["source"] == "days"
    assert [(r["version"], r["answers"]) for r in by_day["rows"]] == [(1, 1), (2, 3)]
    top = await usage(api, acme, sort="answers")
    assert top["rows"][0]["name"] == "greet"

    idle = await api.client.get(f"{T}/usage/idle", headers=auth(acme["reader"]))
    assert idle.status_code == 200, idle.text
    assert [(e["kind"], e["name"]) for e in idle.json()["idle"]] == [
        ("prompt", "unused"), ("skill", "review"),
    ]  # fmt: skip
    reach = await api.client.get(
        f"{T}/usage/reach", params={"kind": "prompt", "name": "greet", "label": "production"},
        headers=auth(acme["reader"]),
    )  # fmt: skip
    assert reach.status_code == 200, reach.text
    assert (reach.json()["answers"], reach.json()["callers"], reach.json()["clients"]) == (4, 1, 1)


async def test_pages_walk_every_row_once(api: Api, acme: dict[str, str]) -> None:
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    for who in ("a", "b", "c"):
        await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": who}})
        given = {"name": "unused", "arguments": {"who": who}}
        await named(
            mcp, "tools/call", "render_prompt", {"name": "render_prompt", "arguments": given}
        )
    await named(mcp, "skills/get", "skill://review/SKILL.md", {"uri": "skill://review/SKILL.md"})
    await api.app.state.ledger.flush()
    for sort in ("key", "answers"):
        whole = (await usage(api, acme, by="surface", sort=sort))["rows"]
        assert len(whole) == 3
        walked: list[dict[str, Any]] = []
        cursor = None
        while True:
            query = {"by": "surface", "sort": sort, "limit": 1}
            page = await usage(api, acme, **query, **({"cursor": cursor} if cursor else {}))
            walked += page["rows"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert walked == whole


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"by": "version,colour"}, "by"),
        ({"by": "day,hour"}, "by"),
        ({"from": "2026-01-01T00:00:00"}, "from"),
        ({"from": "2026-11-02T00:00:00Z", "to": "2026-11-01T00:00:00Z"}, "to"),
        ({"sort": "size"}, "sort"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"kind": "tool"}, "kind"),
        ({"version": "0"}, "version"),
    ],
)
async def test_bad_questions_are_told_what_is_wrong(
    api: Api, acme: dict[str, str], query: dict[str, str], field: str
) -> None:
    answer = await api.client.get(f"{T}/usage", params=query, headers=auth(acme["reader"]))
    assert answer.status_code == 422, answer.text
    assert field in answer.text


async def test_a_tenant_sees_only_its_own_ledger(api: Api, acme: dict[str, str]) -> None:
    other = await api.tenant("other")
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    await api.app.state.ledger.flush()
    theirs = await api.client.get("/api/v1/tenants/other/usage", headers=auth(other["reader"]))
    assert theirs.status_code == 200 and theirs.json()["rows"] == []
    for path in ("usage", "usage/idle", "usage/reach?kind=prompt&name=greet&label=production"):
        refused = await api.client.get(f"{T}/{path}", headers=auth(other["admin"]))
        assert refused.status_code in (401, 403), (path, refused.text)
    assert (await usage(api, acme))["rows"][0]["answers"] == 1


async def test_counts_of_a_failed_flush_wait_for_the_next(api: Api, acme: dict[str, str]) -> None:
    ledger = api.app.state.ledger
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    pool = ledger.pool

    async def gone() -> Any:
        raise OSError("the database is away")

    ledger.pool = gone
    assert await ledger.flush() == 0
    ledger.pool = pool
    await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    assert await ledger.flush() >= 1  # both answers: one counter, or two across a minute's end
    rows = (await usage(api, acme))["rows"]
    assert sum(r["answers"] for r in rows) == 2


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
async def test_a_session_counts_its_cached_answers_under_its_client(
    api: Api, acme: dict[str, str], revision: str
) -> None:
    session = RawMcp(api.client, "/mcp/acme", headers=auth(acme["reader"]))
    await session.initialize(revision)
    for _ in range(3):  # the full path twice, then the answer cache
        await session.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    await api.app.state.ledger.flush()
    rows = (await usage(api, acme, by="surface,client"))["rows"]
    counted = {(r["name"], r["surface"], r["client"]): r["answers"] for r in rows}
    assert counted[("greet", "prompts/get", "registry-tests/1")] == 3
