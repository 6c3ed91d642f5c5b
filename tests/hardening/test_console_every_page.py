"""Every console page answers a page on a tenant made as the quick start makes it (no identity
provider, no approvals) and on one with approvals on: "Connect a client" answered 500 on the first
(issue 67), the page of a skill's change request on the second (issue 65, finding 8)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.routing import APIRoute

from registry.app import ROUTERS
from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"
SKILL_MD = "---\nname: review\ndescription: How we review\n---\n# Review\n"


def _console_pages() -> list[str]:
    return sorted({
        route.path for router in ROUTERS for route in router.routes
        if isinstance(route, APIRoute) and route.path.startswith("/ui/{tenant}")
        and "GET" in (route.methods or set())
    })  # fmt: skip


def _filled(path: str) -> str:
    name = "review" if "/skills/" in path else "greet"
    return (
        path.replace("{tenant}", "acme").replace("{name}", name).replace("{version}", "1")
        .replace("{request_id}", "1")
    )  # fmt: skip


@pytest.mark.parametrize("approvals", [False, True], ids=["quick-start", "approvals"])
async def test_every_console_page_answers_a_page(api: Api, approvals: bool) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    made = await api.client.post(f"{T}/prompts", json={**SIMPLE, "labels": ["production"]},
                                 headers=admin)  # fmt: skip
    assert made.status_code == 201, made.text
    skill: dict[str, Any] = {"name": "review", "labels": ["production"],
                             "files": [{"path": "SKILL.md", "text": SKILL_MD}]}  # fmt: skip
    assert (await api.client.post(f"{T}/skills", json=skill, headers=admin)).status_code == 201
    if approvals:
        gated = await api.client.patch(T, json={"approvals": {"production": 1}}, headers=admin)
        assert gated.status_code == 200, gated.text
    moves = [{"prompt": "greet", "label": "staging", "version": 1},
             {"skill": "review", "label": "staging", "version": 1}]  # fmt: skip
    opened = await api.client.post(f"{T}/change-requests", json={"description": "d", "moves": moves},
                                   headers=auth(keys["editor"]))  # fmt: skip
    assert opened.status_code == 201, opened.text

    signed = await api.client.post(
        "/ui/acme/login", data={"key": keys["admin"].removeprefix("Bearer ")},
        headers={"Origin": "http://test"},
    )  # fmt: skip
    assert signed.status_code == 303, signed.text
    pages = _console_pages()
    assert "/ui/{tenant}/connect" in pages and len(pages) > 15
    for path in pages:
        if "/login" in path or "{sha256}" in path:  # signing in; a blob's bytes: not pages
            continue
        answer = await api.client.get(_filled(path))
        assert answer.status_code in (200, 303), (path, answer.status_code, answer.text[:1500])
        if answer.status_code == 200:
            assert answer.headers["content-type"].startswith("text/html"), path


async def test_an_unknown_console_address_is_a_console_page(api: Api) -> None:
    await api.tenant("acme")
    for path in ("/ui/acme/nowhere", "/ui/acme/prompts/x/y/z"):
        answer = await api.client.get(path)
        assert answer.status_code == 404, path
        assert answer.headers["content-type"].startswith("text/html"), path
        assert "Not found" in answer.text and "has no page at" in answer.text
    assert 'href="/ui/acme/prompts"' in (await api.client.get("/ui/acme/nowhere")).text
    api_404 = await api.client.get("/api/v1/nowhere")
    assert api_404.headers["content-type"].startswith("application/problem+json")


async def test_a_wrong_key_is_refused_before_the_method_is(api: Api) -> None:
    """A client probing the endpoint with a GET (no session) hears about its key first, as a POST
    would (issue 67: one showed "405" for a wrong key)."""
    keys = await api.tenant("acme")
    bad = {"Authorization": "Bearer prk_wrong"}
    posted = await api.client.post("/mcp/acme", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   headers={**bad, "Accept": "application/json, text/event-stream"})  # fmt: skip
    assert posted.status_code in (401, 403), posted.text
    for method in ("GET", "DELETE"):
        wrong = await api.client.request(method, "/mcp/acme", headers=bad)
        assert (wrong.status_code, wrong.json()) == (posted.status_code, posted.json()), method
        missing = await api.client.request(method, "/mcp/acme")
        assert missing.status_code == 401 and "www-authenticate" in missing.headers, method
        right = await api.client.request(method, "/mcp/acme", headers=auth(keys["reader"]))
        assert right.status_code == 405, (method, right.text)
