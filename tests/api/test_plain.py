"""The plain routes of a version write, a label move and a prompt read (registry.api.plain): their
ordinary case answered without FastAPI's routing, byte for byte as the FastAPI route answers it;
every other request answered by that route, as before; and no other route shadowed."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Route

from registry.api import prompts
from registry.api.auth import require_credential
from registry.api.plain import PlainRoute
from registry.app import ROUTERS
from registry.prompts import at_once
from tests.api.conftest import Api

P = "/api/v1/tenants/acme/prompts"
WRITE = f"{P}/ask/versions"
ROUTE = "POST /api/v1/tenants/{tenant}/prompts/{name}/versions"


def body(text: str) -> dict[str, Any]:
    return {
        "arguments": [{"name": "who", "required": True}],
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "labels": ["staging"],
    }


@pytest.fixture
async def keys(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme")
    created = await api.client.post(
        P, json={"name": "ask", **body("Hi {{who}}")}, headers={"Authorization": keys["editor"]}
    )
    assert created.status_code == 201, created.text
    return keys


@pytest.fixture
def answered(api: Api) -> list[int]:
    """The status of each request the plain routes answered themselves (not passed on)."""
    routes = [route for route in api.app.router.routes if isinstance(route, PlainRoute)]
    assert {(r.method, r.path) for r in routes} == {
        ("GET", "/api/v1/tenants/{tenant}/prompts/{name}"),
        ("POST", "/api/v1/tenants/{tenant}/prompts/{name}/versions"),
        ("PUT", "/api/v1/tenants/{tenant}/prompts/{name}/labels/{label}"),
    }
    assert api.app.router.routes[: len(routes)] == routes  # ahead of every other route
    seen: list[int] = []
    for route in routes:
        endpoint: Callable[..., Awaitable[Any]] = route.endpoint

        async def counted(request: Any, raw: bytes, endpoint: Any = endpoint) -> Any:
            response = await endpoint(request, raw)
            if response is not None:
                seen.append(response.status_code)
            return response

        route.endpoint = counted
    return seen


def test_the_plain_endpoints_do_all_that_their_routes_dependencies_do() -> None:
    """A plain endpoint skips FastAPI's dependencies: it checks the credential itself (the router's
    one dependency). A dependency added to either route must be done by its plain endpoint too;
    this fails until it is looked at."""
    plain = {(method, path) for method, path, _ in prompts.PLAIN}
    routes = [
        route
        for route in prompts.router.routes
        if isinstance(route, APIRoute) and (method_of(route), route.path) in plain
    ]
    assert len(routes) == len(plain)
    for route in routes:
        assert [d.call for d in route.dependant.dependencies] == [require_credential], route.path


def test_a_plain_route_takes_no_other_routes_requests(api: Api) -> None:
    """A plain route comes first: a path it matches must be its own route's alone (a literal path
    such as /prompts/export, declared by any router, would be answered by the plain one instead).
    Every route of every router the app includes, and the app's own, is looked at."""
    plain = [route for route in api.app.router.routes if isinstance(route, PlainRoute)]
    routes = [
        (method, route.path)
        for route in [*(r for router in ROUTERS for r in router.routes), *api.app.router.routes]
        if isinstance(route, Route)  # FastAPI's and the console's; a PlainRoute is not one
        for method in route.methods or ()
    ]
    # Not looking at nothing: the routes the plain ones stand in front of are among them.
    assert {(route.method, route.path) for route in plain} <= set(routes)
    for route in plain:
        for method, path in routes:
            if method != route.method or path == route.path:
                continue
            sample = re.sub(r"\{[^}]+\}", "x", path)  # one segment for each parameter
            assert route.path_regex.match(sample) is None, (route.path, path)


def method_of(route: APIRoute) -> str:
    assert route.methods is not None and len(route.methods) == 1
    return next(iter(route.methods))


def same_answer(plain: httpx.Response, routed: httpx.Response) -> None:
    assert (plain.status_code, plain.content) == (routed.status_code, routed.content)
    for header in (
        "content-type",
        "content-length",
        "etag",
        "cache-control",
        "x-content-type-options",
    ):
        assert plain.headers.get(header) == routed.headers.get(header), header


async def test_the_plain_answer_is_the_routes_byte_for_byte(
    api: Api, keys: dict[str, str], answered: list[int]
) -> None:
    editor = {"Authorization": keys["editor"]}
    created_before = await created_count(api)
    written = await api.client.post(WRITE, json=body("Hello {{who}}"), headers=editor)
    assert written.status_code == 201 and written.json()["labels_moved"] == ["staging"]
    assert written.headers["etag"] == '"2"' and answered == [201]
    # The same content again: nothing new, 200; a query string (false is the default) sends the
    # request to the FastAPI route, whose answer is the same bytes.
    plain = await api.client.post(WRITE, json=body("Hello {{who}}"), headers=editor)
    routed = await api.client.post(
        f"{WRITE}?dry_run=false", json=body("Hello {{who}}"), headers=editor
    )
    assert plain.status_code == 200 and plain.json()["created"] is False
    same_answer(plain, routed)
    assert answered == [201, 200]
    # If-Match, once, is the ordinary case too; a stale one is refused as the route refuses it.
    stale = {**editor, "If-Match": '"1"'}
    plain = await api.client.post(WRITE, json=body("Hey {{who}}"), headers=stale)
    routed = await api.client.post(f"{WRITE}?force=false", json=body("Hey {{who}}"), headers=stale)
    assert plain.status_code == 412
    same_answer(plain, routed)
    # Counted under the route's template (the one 201 here is the plain route's).
    assert await created_count(api) == created_before + 1


async def created_count(api: Api) -> float:
    """The route's 201 answers so far, as /metrics counts them (in this process, every test's)."""
    metrics = await api.client.get("/metrics", headers=api.operator)
    counted = f'registry_requests_total{{kind="rest",name="{ROUTE}",outcome="201"}} '
    found = [line for line in metrics.text.splitlines() if line.startswith(counted)]
    return float(found[0].removeprefix(counted)) if found else 0.0


async def test_a_plain_label_move_is_the_routes_byte_for_byte(
    api: Api, keys: dict[str, str], answered: list[int]
) -> None:
    editor = {"Authorization": keys["editor"]}
    await api.client.post(WRITE, json=body("Hello {{who}}"), headers=editor)
    moved = await api.client.put(f"{P}/ask/labels/staging", json={"version": 2}, headers=editor)
    assert moved.status_code == 200 and moved.json()["version"] == 2
    # There already: the same answer both ways, the FastAPI route's (with a query) and the plain.
    plain = await api.client.put(f"{P}/ask/labels/staging", json={"version": 2}, headers=editor)
    routed = await api.client.put(
        f"{P}/ask/labels/staging?force=false", json={"version": 2}, headers=editor
    )
    same_answer(plain, routed)
    # Refused the same way: a protected label needs the publisher role.
    plain = await api.client.put(f"{P}/ask/labels/production", json={"version": 2}, headers=editor)
    routed = await api.client.put(
        f"{P}/ask/labels/production?force=false", json={"version": 2}, headers=editor
    )
    assert plain.status_code == 403
    same_answer(plain, routed)
    labels = await api.client.get(f"{P}/ask/labels", headers=editor)
    assert labels.json() == {"latest": 2, "staging": 2}
    assert answered == [201, 200, 200]


# Requests that are not the ordinary case, or that fail: content, headers, the status both answer.
OTHERS: list[tuple[bytes, dict[str, Any], int]] = [
    (b'{"messages": [', {"Content-Type": "application/json"}, 422),  # not JSON
    (b"[1, 2]", {"Content-Type": "application/json"}, 422),  # not an object
    (b'{"messages": "no"}', {"Content-Type": "application/json"}, 422),  # not a version
    (b'{"messages": [{"role": "user", "text": "a"}]}', {"Content-Type": "text/plain"}, 422),
    (b'{"messages": [{"role": "user", "text": "a"}]}', {"If-Match": "1, 2"}, 422),
    (b'{"messages": [{"role": "user", "text": "a"}]}', {"If-Match": ["9", "1"]}, 412),
    (b'{"messages": [{"role": "user", "text": "a"}]}', {"Authorization": ""}, 401),
]


async def test_other_requests_are_the_routes_to_answer(
    api: Api, keys: dict[str, str], answered: list[int]
) -> None:
    """None changes anything, so all are sent to the same prompt, each both ways."""
    for content, headers, status in OTHERS:
        given = {"Authorization": keys["editor"], "Content-Type": "application/json", **headers}
        sent = [  # a list repeats a header
            (name, value)
            for name, values in given.items()
            for value in (values if isinstance(values, list) else [values])
            if value
        ]
        plain = await api.client.post(WRITE, content=content, headers=sent)
        routed = await api.client.post(f"{WRITE}?dry_run=false", content=content, headers=sent)
        assert plain.status_code == status, (headers, plain.text)
        same_answer(plain, routed)
    assert answered == []  # none answered by the plain route


async def test_a_plain_prompt_read_is_the_routes_byte_for_byte(
    api: Api, keys: dict[str, str], answered: list[int]
) -> None:
    reader = {"Authorization": keys["reader"]}
    plain = await api.client.get(f"{P}/ask", headers=reader)
    routed = await api.client.get(f"{P}/ask?fresh=1", headers=reader)  # a query: the route's
    assert plain.status_code == 200 and plain.json()["name"] == "ask"
    same_answer(plain, routed)
    # Held already (If-None-Match): 304 both ways; a prompt that is not there: 404 both ways.
    held = {**reader, "If-None-Match": plain.headers["etag"]}
    plain = await api.client.get(f"{P}/ask", headers=held)
    routed = await api.client.get(f"{P}/ask?fresh=1", headers=held)
    assert plain.status_code == 304
    same_answer(plain, routed)
    plain = await api.client.get(f"{P}/nothing", headers=reader)
    routed = await api.client.get(f"{P}/nothing?fresh=1", headers=reader)
    assert plain.status_code == 404
    same_answer(plain, routed)
    assert answered == [200, 304]  # the 404 was raised, not answered: the app's handler wrote it
    # No credential: the route's dependency answers 401, as for every prompts route.
    refused = await api.client.get(f"{P}/ask")
    assert refused.status_code == 401
    assert answered == [200, 304]


async def test_a_remembered_callers_write_is_one_call_and_the_routes_answer(
    api: Api, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ordinary write of a key goes through the whole transaction, which settles the key
    and lets the worker remember it; the next is written in one call (registry.prompts.at_once),
    its answer the one the route gives (the prompt as it reads back, the ETag); a revoked key is
    refused at once, whether or not the worker has heard of the revocation yet."""
    written_at_once: list[bool] = []
    one_call = at_once.create_version

    async def observed(*args: Any, **kwargs: Any) -> Any:
        result = await one_call(*args, **kwargs)
        written_at_once.append(result is not None)
        return result

    monkeypatch.setattr(at_once, "create_version", observed)
    editor = {"Authorization": keys["editor"]}

    def new(text: str) -> dict[str, Any]:
        return {k: v for k, v in body(text).items() if k != "labels"}  # no label but latest

    first = await api.client.post(WRITE, json=new("One {{who}}"), headers=editor)
    assert first.status_code == 201 and written_at_once == []  # not remembered yet
    second = await api.client.post(WRITE, json=new("Two {{who}}"), headers=editor)
    assert second.status_code == 201 and written_at_once == [True]
    read = await api.client.get(f"{P}/ask", headers=editor)
    assert second.json()["prompt"] == read.json() and second.headers["etag"] == '"3"'
    routed = await api.client.post(
        f"{WRITE}?dry_run=false", json=new("Three {{who}}"), headers=editor
    )
    assert written_at_once == [True]  # the route's: a query string is not the ordinary case
    assert routed.status_code == 201 and routed.headers["etag"] == '"4"'
    assert set(routed.json()) == set(second.json())
    assert {k: v for k, v in second.json().items() if k not in ("version", "detail", "prompt")} == {
        k: v for k, v in routed.json().items() if k not in ("version", "detail", "prompt")
    }
    # Revoked through the API: refused the next moment, nothing written.
    listed = await api.client.get("/api/v1/tenants/acme/keys", headers=api.operator)
    key_id = next(k["id"] for k in listed.json() if k["role"] == "editor")
    revoked = await api.client.delete(f"/api/v1/tenants/acme/keys/{key_id}", headers=api.operator)
    assert revoked.status_code == 204
    refused = await api.client.post(WRITE, json=new("Four {{who}}"), headers=editor)
    assert (refused.status_code, refused.json()["code"]) == (403, "api_key_refused"), refused.text
    latest = await api.client.get(f"{P}/ask", headers={"Authorization": keys["admin"]})
    assert latest.json()["latest_version"] == 4
