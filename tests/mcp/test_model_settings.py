"""A version's model config, typed arguments on the wire and templated resource URIs: written and
checked over REST, carried by diff, export and import, and served over MCP in every revision, each
answer checked against the revision's schema."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, auth
from tests.mcp.conftest import CONFORMANCE_PROMPTS, RawMcp, add_prompts
from tests.mcp.test_stateless import Stateless

CONFIG_KEY = "dev.prompt-registry/config"
ARGUMENTS_KEY = "dev.prompt-registry/arguments"
SESSION_REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]

CONFIG: dict[str, Any] = {
    "model": "gpt-5-mini",
    "temperature": 0.2,
    "top_p": 0.9,
    "max_tokens": 800,
    "stop": ["###"],
    "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
    "response_format": {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    },
    "reasoning_effort": "low",  # a provider's own setting, kept as given
}

TYPED: dict[str, Any] = {
    "name": "typed",
    "arguments": [
        {"name": "tone", "description": "how to sound", "enum": ["warm", "dry"], "default": "warm"},
        {"name": "ticket", "required": True, "pattern": "[A-Z]+-[0-9]+", "max_length": 12},
    ],
    "messages": [{"role": "user", "content": {"type": "text", "text": "{{tone}} {{ticket}}"}}],
    "config": CONFIG,
}


@pytest.fixture
async def acme(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], [TYPED])
    return keys


async def test_config_is_part_of_the_version(api: Api, acme: dict[str, str]) -> None:
    base = "/api/v1/tenants/acme/prompts/typed"
    prompt = (await api.client.get(base, headers=auth(acme["reader"]))).json()
    assert prompt["latest"]["config"] == CONFIG
    same = {k: v for k, v in TYPED.items() if k != "name"}
    again = await api.client.post(f"{base}/versions", json=same, headers=auth(acme["editor"]))
    assert again.status_code == 200 and again.json()["created"] is False  # same content, same hash
    warmer = {**same, "config": {**CONFIG, "temperature": 0.7}}
    changed = await api.client.post(f"{base}/versions", json=warmer, headers=auth(acme["editor"]))
    assert changed.status_code == 201 and changed.json()["version"] == 2  # config is content
    diff = (await api.client.get(f"{base}/diff?from=1&to=2", headers=auth(acme["reader"]))).json()
    assert diff["metadata"]["config"]["before"]["temperature"] == 0.2
    assert diff["metadata"]["config"]["after"]["temperature"] == 0.7
    rendered = await api.client.post(
        f"{base}/render",
        json={"arguments": {"ticket": "OPS-1"}, "version": 2},
        headers=auth(acme["reader"]),
    )
    assert rendered.status_code == 200, rendered.text
    assert rendered.json()["config"]["temperature"] == 0.7


async def test_export_and_import_keep_the_config(api: Api, acme: dict[str, str]) -> None:
    bundle = await api.client.get("/api/v1/tenants/acme/export", headers=auth(acme["admin"]))
    assert bundle.status_code == 200, bundle.text
    keys = await api.tenant("other")
    loaded = await api.client.post(
        "/api/v1/tenants/other/import", json=bundle.json(), headers=auth(keys["admin"])
    )
    assert loaded.status_code == 200, loaded.text
    prompt = await api.client.get(
        "/api/v1/tenants/other/prompts/typed", headers=auth(keys["reader"])
    )
    assert prompt.json()["latest"]["config"] == CONFIG


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"temperature": 3}, "temperature"),
        ({"response_format": {"type": "no-such-type"}}, "not a valid JSON Schema"),
        ({"response_format": {"properties": {"a": {"minLength": -1}}}}, "properties/a/minLength"),
        ({"stop": [""]}, "stop"),
        ({"bad key!": 1}, "invalid key 'bad key!'"),
        ({"blob": "x" * 70_000}, "the most is 65,536"),
        ({"tools": ["lookup"]}, "tools"),
    ],
)
async def test_a_bad_config_is_refused_naming_it(
    api: Api, acme: dict[str, str], config: dict[str, Any], named: str
) -> None:
    body = {**{k: v for k, v in TYPED.items() if k != "name"}, "config": config}
    refused = await api.client.post(
        "/api/v1/tenants/acme/prompts/typed/versions", json=body, headers=auth(acme["editor"])
    )
    assert refused.status_code == 422, refused.text
    assert named in refused.text


@pytest.mark.parametrize("revision", SESSION_REVISIONS)
async def test_session_revisions_carry_config_and_argument_schema(
    api: Api, acme: dict[str, str], revision: str
) -> None:
    mcp = RawMcp(api.client, "/mcp/acme", headers=auth(acme["reader"]))
    await mcp.initialize(revision)
    got = await mcp.result("prompts/get", {"name": "typed", "arguments": {"ticket": "OPS-7"}})
    assert got["_meta"][CONFIG_KEY] == CONFIG
    assert got["messages"][0]["content"]["text"] == "warm OPS-7"
    listed = (await mcp.result("prompts/list"))["prompts"][0]
    assert [a["name"] for a in listed["arguments"]] == ["tone", "ticket"]  # the base list stays
    if revision < "2025-06-18":  # Prompt has no _meta before 2025-06-18
        assert "_meta" not in listed
        return
    assert listed["_meta"][ARGUMENTS_KEY] == {
        "type": "object",
        "properties": {
            "tone": {"type": "string", "description": "how to sound", "enum": ["warm", "dry"],
                     "default": "warm"},
            "ticket": {"type": "string", "maxLength": 12, "pattern": "[A-Z]+-[0-9]+"},
        },
        "required": ["ticket"],
    }  # fmt: skip


async def test_stateless_revision_carries_them_too(api: Api, acme: dict[str, str]) -> None:
    client = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    got = await client.result("prompts/get", {"name": "typed", "arguments": {"ticket": "A-1"}})
    assert got["_meta"][CONFIG_KEY]["model"] == "gpt-5-mini"
    listed = await client.result("prompts/list")
    assert listed["prompts"][0]["_meta"][ARGUMENTS_KEY]["required"] == ["ticket"]


# --- templated resource URIs ------------------------------------------------------------------

LINKED = {
    "name": "linked",
    "arguments": [{"name": "path", "required": True}, {"name": "doc", "required": True}],
    "messages": [
        {"role": "user", "content": {"type": "resource", "resource": {
            "uri": "file:///{{path}}", "mimeType": "text/plain", "text": "Read {{path}}."}}},
        {"role": "user", "content": {"type": "resource_link", "uri": "https://docs.example/{{doc}}",
                                     "name": "the doc"}},
    ],
}  # fmt: skip


async def test_templated_uris_render_with_the_arguments(api: Api, acme: dict[str, str]) -> None:
    await add_prompts(api, "acme", acme["publisher"], [LINKED])
    mcp = RawMcp(api.client, "/mcp/acme", headers=auth(acme["reader"]))
    await mcp.initialize("2025-11-25")
    got = await mcp.result(
        "prompts/get", {"name": "linked", "arguments": {"path": "src/a.py", "doc": "guide#top"}}
    )
    assert got["messages"][0]["content"]["resource"]["uri"] == "file:///src/a.py"
    assert got["messages"][0]["content"]["resource"]["text"] == "Read src/a.py."
    assert got["messages"][1]["content"]["uri"] == "https://docs.example/guide#top"
    bad = await mcp.error(
        "prompts/get", {"name": "linked", "arguments": {"path": "my file.py", "doc": "x"}}
    )
    assert bad["code"] == -32602
    assert "'path'" in bad["message"] and "not a valid absolute URI" in bad["message"]
    rest = await api.client.post(
        "/api/v1/tenants/acme/prompts/linked/render",
        json={"arguments": {"path": "ok", "doc": "a b"}},
        headers=auth(acme["reader"]),
    )
    assert rest.status_code == 422 and "'doc'" in rest.text


@pytest.mark.parametrize(
    ("uri", "named"),
    [
        ("not a uri", "messages[0].content.resource.uri"),
        ("relative/path", "messages[0].content.resource.uri"),
        ("file:///{{nope}}", "unknown variable 'nope'"),
        ("file:///{{#path}}", "never closed"),
    ],
)
async def test_a_bad_literal_or_template_uri_is_refused_when_written(
    api: Api, acme: dict[str, str], uri: str, named: str
) -> None:
    body = {
        "name": "broken",
        "arguments": [{"name": "path"}],
        "messages": [{"role": "user", "content": {"type": "resource", "resource": {
            "uri": uri, "text": "x"}}}],
    }  # fmt: skip
    refused = await api.client.post(
        "/api/v1/tenants/acme/prompts", json=body, headers=auth(acme["editor"])
    )
    assert refused.status_code == 422, refused.text
    assert named in refused.text


async def test_the_conformance_fixture_puts_the_callers_uri_into_the_resource(
    api: Api,
) -> None:
    keys = await api.tenant("conf")
    await add_prompts(api, "conf", keys["publisher"], CONFORMANCE_PROMPTS)
    mcp = RawMcp(api.client, "/mcp/conf", headers=auth(keys["reader"]))
    await mcp.initialize("2025-11-25")
    got = await mcp.result(
        "prompts/get",
        {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://x/1"}},
    )
    assert got["messages"][0]["content"]["resource"]["uri"] == "test://x/1"
