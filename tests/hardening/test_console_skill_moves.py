"""The console's page of a change request that moves a skill answers as the REST view does
(Hardening IV, finding 8: it answered 500), its file diffs escaped; and the MCP junk of finding 8
(a NUL in a query) is a -32602 naming the place, never a -32603."""

from __future__ import annotations

from tests.api.conftest import Api, auth
from tests.mcp.test_stateless import Stateless, meta

T = "/api/v1/tenants/acme"


def _skill_md(text: str) -> str:
    return f"---\nname: review\ndescription: How we review\n---\n# Review\n\n{text}\n"


async def test_the_page_of_a_request_moving_a_skill_shows_its_file_diff(api: Api) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    first = {"name": "review", "labels": ["production"],
             "files": [{"path": "SKILL.md", "text": _skill_md("Check the tests.")}]}  # fmt: skip
    assert (await api.client.post(f"{T}/skills", json=first, headers=admin)).status_code == 201
    second = {"files": [{"path": "SKILL.md", "text": _skill_md("<script>x()</script> docs.")}]}
    written = await api.client.post(f"{T}/skills/review/versions", json=second, headers=admin)
    assert written.status_code == 201, written.text
    gated = await api.client.patch(T, json={"approvals": {"production": 1}}, headers=admin)
    assert gated.status_code == 200, gated.text
    body = {
        "description": "v2",
        "moves": [{"skill": "review", "label": "production", "version": 2}],
    }
    opened = await api.client.post(f"{T}/change-requests", json=body, headers=auth(keys["editor"]))
    assert opened.status_code == 201, opened.text
    rest = await api.client.get(f"{T}/change-requests/1", headers=auth(keys["editor"]))
    assert rest.status_code == 200, rest.text

    origin = {"Origin": "http://test"}
    signed = await api.client.post(
        "/ui/acme/login", data={"key": keys["publisher"].removeprefix("Bearer ")}, headers=origin
    )
    assert signed.status_code == 303, signed.text
    page = await api.client.get("/ui/acme/change-requests/1")
    assert page.status_code == 200, page.text[:3000]
    assert "Skill" in page.text and "/ui/acme/skills/review" in page.text
    assert "+&lt;script&gt;x()&lt;/script&gt; docs." in page.text
    assert "<script>x()" not in page.text
    assert "By editor (key " in page.text and "key:" not in page.text  # names, not ids


async def test_a_nul_in_any_param_is_invalid_params_naming_it(api: Api) -> None:
    keys = await api.tenant("acme")
    on = await api.client.patch(T, json={"mcp_tools": True}, headers=auth(keys["admin"]))
    assert on.status_code == 200, on.text
    client = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    for method, params, name in (
        ("tools/call", {"name": "find_prompts", "arguments": {"query": "\u0000"}}, "find_prompts"),
        ("prompts/get", {"name": "greet", "arguments": {"who": "a\u0000b"}}, "greet"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "x"},
                                 "argument": {"name": "t", "value": "\u0000"}}, None),
    ):  # fmt: skip
        headers = {"Mcp-Name": name} if name else {}
        answer = await client.post(method, {"_meta": meta(), **params}, **headers)
        error = answer.json()["error"]
        assert error["code"] == -32602, answer.text
        assert "NUL" in error["message"] and "Traceback" not in answer.text
