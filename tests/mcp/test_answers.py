"""A worker keeps the prompts/get answers it rendered (registry.mcp.caching.answer_key) once they
are asked for twice: the same request is answered again without rendering, with its own id, until
the tenant changes; what the key leaves out (who may read what, other arguments, notifications)
never gets someone else's answer."""

from __future__ import annotations

import tracemalloc
import uuid
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY

from registry import metrics
from registry.events.cache import MISSING
from registry.mcp import caching
from registry.mcp import tool_calls as mcp_tools
from registry.mcp.caching import McpCaches
from registry.prompts import as_tools as prompt_tools
from registry.prompts import hot_reads, rendering
from registry.skills import service as skill_service
from tests.conftest import Api, auth
from tests.mcp.conftest import (
    CONFORMANCE_PROMPTS,
    CONFORMANCE_SKILLS,
    RawMcp,
    add_prompts,
    serve_tools_and_a_skill,
)
from tests.mcp.test_stateless import Stateless, meta

ARGS = {"arg1": "one", "arg2": "two"}


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The descriptions of the versions rendered, one entry per rendering."""
    seen: list[str] = []
    render = rendering.render_compiled

    def counted(compiled: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(compiled.description)
        return render(compiled, *args, **kwargs)

    monkeypatch.setattr(rendering, "render_compiled", counted)
    return seen


async def _acme(api: Api) -> tuple[dict[str, str], Stateless]:
    """Tenant acme with the conformance prompts, and a stateless client with its reader key."""
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    return keys, Stateless(api.client, "/mcp/acme", auth(keys["reader"]))


async def _get(client: Stateless, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    response = await client.post(
        "prompts/get", {"_meta": meta(), "name": name, "arguments": arguments}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_the_same_request_is_answered_again_with_its_own_id(
    api: Api, renders: list[str]
) -> None:
    keys, client = await _acme(api)
    first = await _get(client, "test_prompt_with_arguments", ARGS)
    again = await _get(client, "test_prompt_with_arguments", ARGS)
    third = await _get(client, "test_prompt_with_arguments", ARGS)
    assert (first["id"], again["id"], third["id"]) == (1, 2, 3)
    assert first["result"] == again["result"] == third["result"]
    # Kept the second time it was asked for (requests that never repeat are not kept at all), so
    # the third answer was not rendered.
    assert renders == ["A prompt with required arguments"] * 2

    other = await _get(client, "test_prompt_with_arguments", {"arg1": "three", "arg2": "two"})
    text = other["result"]["messages"][0]["content"]["text"]
    assert text == "Prompt with arguments: arg1='three', arg2='two'"
    assert len(renders) == 3

    session = RawMcp(api.client, "/mcp/acme", auth(keys["reader"]))
    await session.initialize()
    params = {"name": "test_prompt_with_arguments", "arguments": ARGS}
    for _ in range(2):
        assert "result" in await session.call("prompts/get", params)
    notified = await api.client.post(  # the same params as a notification: no answer at all
        "/mcp/acme",
        json={"jsonrpc": "2.0", "method": "prompts/get", "params": params},
        headers=session._headers(),
    )
    assert (notified.status_code, notified.content) == (202, b"")
    assert len(renders) == 5  # twice more for the session's revision


async def test_a_change_of_the_tenant_is_served_at_once(api: Api, renders: list[str]) -> None:
    keys, client = await _acme(api)
    for _ in range(2):
        assert (await _get(client, "test_simple_prompt", {}))["result"]["description"] == (
            "A simple prompt without arguments"
        )
    simple = {k: v for k, v in CONFORMANCE_PROMPTS[0].items() if k != "name"}
    written = await api.client.post(
        "/api/v1/tenants/acme/prompts/test_simple_prompt/versions",
        json={**simple, "description": "second", "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )
    assert written.status_code == 201, written.text
    # This worker wrote it: its answers of the tenant are dropped as the write commits.
    assert (await _get(client, "test_simple_prompt", {}))["result"]["description"] == "second"
    assert renders == ["A simple prompt without arguments"] * 2 + ["second"]


async def test_an_anonymous_caller_never_gets_a_key_holders_answer(
    api: Api, renders: list[str]
) -> None:
    keys = await api.tenant("acme", public_read=True)
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS, label="staging")
    published = await api.client.put(
        "/api/v1/tenants/acme/prompts/test_simple_prompt/labels/production",
        json={"version": 1},
        headers=auth(keys["publisher"]),
    )
    assert published.status_code == 200, published.text
    holder = Stateless(api.client, "/mcp/acme/staging", auth(keys["reader"]))
    anonymous = Stateless(api.client, "/mcp/acme/staging", {})
    for client in (holder, holder):
        assert "result" in await _get(client, "test_prompt_with_arguments", ARGS)
    refused = await anonymous.post(
        "prompts/get", {"_meta": meta(), "name": "test_prompt_with_arguments", "arguments": ARGS}
    )
    assert refused.status_code == 401, refused.text

    # A pinned version on the published label: the holder's answer is not the anonymous caller's.
    holder_published = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    pinned = {"_meta": meta(), "name": "test_simple_prompt@1"}
    assert (await holder_published.post("prompts/get", pinned)).status_code == 200
    assert (await holder_published.post("prompts/get", pinned)).status_code == 200
    anonymous_published = Stateless(api.client, "/mcp/acme", {})
    assert "error" in (await anonymous_published.post("prompts/get", pinned)).json()
    assert renders.count("A simple prompt without arguments") == 2


def _counted(outcome: str) -> tuple[float, float]:
    """prompts/get requests counted with this outcome, and the observations of their latency, as
    the process's metrics registry reports them."""
    metrics.flush()
    name = {"kind": "mcp", "name": "prompts/get"}
    requests = REGISTRY.get_sample_value("registry_requests_total", {**name, "outcome": outcome})
    latency = REGISTRY.get_sample_value("registry_request_seconds_count", name)
    return requests or 0.0, latency or 0.0


async def test_an_answer_sent_again_is_counted_like_a_rendered_one(
    api: Api, renders: list[str]
) -> None:
    _, client = await _acme(api)
    ok, observed = _counted("ok")
    errors, _ = _counted("error")
    for _ in range(3):
        await _get(client, "test_prompt_with_arguments", ARGS)
    missing = await _get(client, "no_such_prompt", ARGS)
    assert "error" in missing
    assert len(renders) == 2  # the third answer was sent again
    assert _counted("ok") == (ok + 3, observed + 4)
    assert _counted("error")[0] == errors + 1


def test_an_answer_is_kept_the_second_time_its_own_tenant_asks() -> None:
    """Tenants ask the same questions (a first page, a prompt of the same name): one tenant's
    request does not count as the first sighting of another's."""
    caches, first, second = McpCaches(), uuid.uuid4(), uuid.uuid4()
    key = b"prompts/list\0production\0" + b"2026-07-28\0" + b"0\0{}"

    def ask(tenant: uuid.UUID) -> None:
        generation = caches.answers.generation(tenant)
        caching.remember_answer(caches, tenant, key, {"result": {"prompts": []}}, generation)

    ask(first)
    ask(second)
    assert caches.answers.get(first, key) is MISSING
    assert caches.answers.get(second, key) is MISSING
    ask(second)
    assert caches.answers.get(second, key) is not MISSING
    assert caches.answers.get(first, key) is MISSING


def test_a_kept_answer_holds_no_more_memory_than_its_bytes() -> None:
    """orjson hands back bytes that keep the whole buffer it wrote into (16 KB for a 1.2 KB
    result); the caches weigh what they keep by its length, so a kept answer is copied to it."""
    text = "Summarise the ticket for the on-call engineer. " * 25  # a result of about 1.2 KB
    assert len(orjson.dumps({"text": text})) > 1000
    caches, tenant = McpCaches(), uuid.uuid4()
    generation = caches.answers.generation(tenant)
    keys = [b"answer %d" % n for n in range(200)]
    for key in keys:  # asked once: marked, not kept
        caching.remember_answer(caches, tenant, key, {"result": {"text": text}}, generation)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for key in keys:  # asked again: kept
            caching.remember_answer(caches, tenant, key, {"result": {"text": text}}, generation)
        held = (tracemalloc.get_traced_memory()[0] - before) / len(keys)
    finally:
        tracemalloc.stop()
    assert all(caches.answers.get(tenant, key) is not MISSING for key in keys)
    encoded = len(orjson.dumps({"text": text}))
    assert held < 1.5 * encoded, f"{held:.0f} bytes held per answer of {encoded}"


REPLY = {
    "name": "support.reply", "as_tool": True, "labels": ["production"],
    "arguments": [{"name": "topic", "required": True}],
    "messages": [{"role": "user", "content": {"type": "text", "text": "About {{topic}}."}}],
}  # fmt: skip
SKILL_MD = "skill://code-review/SKILL.md"


async def _tools_and_a_skill(
    api: Api, *prompts: dict[str, Any]
) -> tuple[dict[str, str], Stateless]:
    """Tenant acme with ``prompts`` written, its tools on and the code-review skill on production;
    its keys, and a stateless client with its reader key."""
    keys = await api.tenant("acme")
    for prompt in prompts:
        made = await api.client.post(
            "/api/v1/tenants/acme/prompts", json=prompt, headers=auth(keys["publisher"])
        )
        assert made.status_code == 201, made.text
    await serve_tools_and_a_skill(api, "acme", keys)
    return keys, Stateless(api.client, "/mcp/acme", auth(keys["reader"]))


async def _new_skill_md(api: Api, publisher: dict[str, str], text: str) -> None:
    """A new version of the code-review skill on production, its SKILL.md ``text``."""
    files = [{"path": "SKILL.md", "text": text}, *CONFORMANCE_SKILLS[1]["files"][1:]]
    written = await api.client.post(
        "/api/v1/tenants/acme/skills/code-review/versions",
        json={"files": files, "labels": ["production"]},
        headers=publisher,
    )
    assert written.status_code == 201, written.text


async def test_tool_calls_and_skill_reads_are_kept_until_the_tenant_changes(
    api: Api, renders: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools/call (a marked prompt's tool, render_prompt), skills/get and resources/read answers
    are kept as prompts/get's are, and dropped by the change that alters them: an unmarked tool,
    a new skill version, the tenant's tools turned off; find_prompts' pages are never kept."""
    read: list[str] = []
    served_file, find, of_tool = skill_service.served_file, mcp_tools._find, hot_reads.served_tool

    async def counted_file(*args: Any, **kwargs: Any) -> Any:
        read.append(args[-1])
        return await served_file(*args, **kwargs)

    async def counted_find(*args: Any, **kwargs: Any) -> Any:
        read.append("find")
        return await find(*args, **kwargs)

    async def counted_tool(*args: Any, **kwargs: Any) -> Any:
        read.append(f"tool {args[-1]}")
        return await of_tool(*args, **kwargs)

    monkeypatch.setattr(skill_service, "served_file", counted_file)
    monkeypatch.setattr(mcp_tools, "_find", counted_find)
    monkeypatch.setattr(hot_reads, "served_tool", counted_tool)
    keys, client = await _tools_and_a_skill(api, REPLY)
    publisher, skill = auth(keys["publisher"]), CONFORMANCE_SKILLS[1]

    async def ask(method: str, params: dict[str, Any], name: str) -> dict[str, Any]:
        response = await client.post(method, {"_meta": meta(), **params}, **{"Mcp-Name": name})
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await ask("tools/call", {"name": name, "arguments": arguments}, name)

    async def skill_md() -> dict[str, Any]:
        return await ask("resources/read", {"uri": SKILL_MD}, SKILL_MD)

    called = [await tool("support_reply", {"topic": "billing"}) for _ in range(3)]
    assert called[0]["result"] == called[2]["result"]
    assert called[2]["result"]["content"][0]["text"] == "About billing."
    rendered = [
        await tool("render_prompt", {"name": "support.reply", "arguments": {"topic": "x"}})
        for _ in range(3)
    ]
    assert rendered[2]["result"]["content"][0]["text"] == "About x."
    assert len(renders) == 4  # each rendered twice, then kept
    texts = [(await skill_md())["result"]["contents"][0]["text"] for _ in range(3)]
    entries = [(await ask("skills/get", {"uri": SKILL_MD}, SKILL_MD))["result"] for _ in range(3)]
    assert texts[2] == skill["files"][0]["text"] and entries[0] == entries[2]
    for _ in range(3):
        assert "result" in await tool("find_prompts", {"query": "support"})
    # New arguments each time: rendered each time, the tool's prompt and version resolved once.
    for topic in ("a", "b", "c"):
        text = (await tool("support_reply", {"topic": topic}))["result"]["content"][0]["text"]
        assert text == f"About {topic}."
    assert len(renders) == 7
    assert read == ["tool support_reply", "SKILL.md", "SKILL.md", "find", "find", "find"]

    # A new version of the skill on the label: read anew at once (this worker wrote it).
    second = "---\nname: code-review\ndescription: How we review a change\n---\n# Review, v2\n"
    await _new_skill_md(api, publisher, second)
    assert (await skill_md())["result"]["contents"][0]["text"] == second
    digest = (await ask("skills/get", {"uri": SKILL_MD}, SKILL_MD))["result"]["skill"]
    assert digest["resources"] != entries[0]["skill"]["resources"]

    # The prompt unmarked: its tool is gone at once; the tenant's tools off: tools/call is too.
    unmarked = await api.client.patch(
        "/api/v1/tenants/acme/prompts/support.reply", json={"as_tool": False}, headers=publisher
    )
    assert unmarked.status_code == 200, unmarked.text
    assert (await tool("support_reply", {"topic": "billing"}))["error"]["code"] == -32602
    for _ in range(2):  # kept again
        assert "result" in await tool(
            "render_prompt", {"name": "support.reply", "arguments": {"topic": "x"}}
        )
    off = await api.client.patch(
        "/api/v1/tenants/acme", json={"mcp_tools": False}, headers=auth(keys["admin"])
    )
    assert off.status_code == 200, off.text
    refused = await client.post(
        "tools/call",
        {
            "_meta": meta(),
            "name": "render_prompt",
            "arguments": {"name": "support.reply", "arguments": {"topic": "x"}},
        },
        **{"Mcp-Name": "render_prompt"},
    )
    assert refused.status_code == 404 and refused.json()["error"]["code"] == -32601, refused.text


async def test_tool_skill_and_resource_lists_are_kept_until_the_tenant_changes(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools/list, skills/list and resources/list pages are read once and kept as prompts/list's
    are (each page's cursor made afresh, so the next page is reached from a kept one), and
    resources/directory/read answers as prompts/get's are; a new marked prompt, a new skill version
    and a revision that shapes the entries otherwise are each read anew; a label no prompt ever had
    is refused, never kept."""
    read: list[str] = []
    tools_of, skills_of = prompt_tools.served_tools, skill_service.served_skills

    async def counted_tools(*args: Any, **kwargs: Any) -> Any:
        read.append(f"tools after {kwargs['after']}")
        return await tools_of(*args, **kwargs)

    async def counted_skills(*args: Any, **kwargs: Any) -> Any:
        read.append(f"skill {kwargs['name']}" if kwargs.get("name") else "skills")
        return await skills_of(*args, **kwargs)

    monkeypatch.setattr(prompt_tools, "served_tools", counted_tools)
    monkeypatch.setattr(skill_service, "served_skills", counted_skills)
    monkeypatch.setattr(mcp_tools, "PAGE", 1)  # two marked prompts: two pages
    keys, client = await _tools_and_a_skill(api, REPLY, {**REPLY, "name": "support.triage"})
    publisher = auth(keys["publisher"])

    async def ask(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await client.post(method, {"_meta": meta(), **(params or {})})
        assert response.status_code == 200, response.text
        assert "result" in response.json(), response.text
        return dict(response.json()["result"])

    async def walk() -> list[str]:
        first = await ask("tools/list")
        second = await ask("tools/list", {"cursor": first["nextCursor"]})
        assert "nextCursor" not in second
        return [tool["name"] for tool in first["tools"] + second["tools"]]

    walks = [await walk() for _ in range(3)]
    assert (
        walks[0] == walks[2] == ["find_prompts", "render_prompt", "support_reply", "support_triage"]
    )
    skill_lists = [await ask("skills/list") for _ in range(3)]
    resource_lists = [await ask("resources/list") for _ in range(3)]
    folders = [
        await ask("resources/directory/read", {"uri": "skill://code-review/"}) for _ in range(3)
    ]
    assert skill_lists[0] == skill_lists[2] and resource_lists[0] == resource_lists[2]
    assert folders[0] == folders[2]
    assert [r["name"] for r in folders[0]["resources"]] == ["SKILL.md", "references"]
    assert read == [
        "tools after None", "tools after support.reply", "skills", "skills",
        "skill code-review", "skill code-review",  # kept the second time asked for, as prompts/get
    ]  # fmt: skip

    # A label no prompt ever had is told (as prompts/list tells it), and nothing is kept for it.
    typo = Stateless(api.client, "/mcp/acme/prodution", auth(keys["reader"]))
    for method in ("tools/list", "skills/list", "resources/list") * 2:
        refused = (await typo.post(method, {"_meta": meta()})).json()
        assert "prodution" in refused["error"]["message"], refused
    assert read[-6:] == ["tools after None", "skills", "skills"] * 2

    # Another revision shapes the entries otherwise (no titles, no annotations): a page of its own.
    read.clear()
    session = RawMcp(api.client, "/mcp/acme", auth(keys["reader"]))
    await session.initialize("2024-11-05")
    older = await session.result("tools/list")
    assert "annotations" not in older["tools"][0] and "title" not in older["tools"][0]
    assert read == ["tools after None"]

    # A third marked prompt and a new version of the skill: read anew at once.
    read.clear()
    third = {**REPLY, "name": "support.close"}
    made = await api.client.post("/api/v1/tenants/acme/prompts", json=third, headers=publisher)
    assert made.status_code == 201, made.text
    first = await ask("tools/list")
    assert [t["name"] for t in first["tools"]] == ["find_prompts", "render_prompt", "support_close"]
    second = "---\nname: code-review\ndescription: How we review it now\n---\n# Review, v2\n"
    await _new_skill_md(api, publisher, second)
    listed = (await ask("resources/list"))["resources"][0]
    assert listed["description"] == "How we review it now" and listed["size"] == len(second)
    entry = (await ask("skills/list"))["skills"][0]
    assert entry["frontmatter"]["description"] == "How we review it now"
    assert read == ["tools after None", "skills", "skills"]
