"""A stateless prompts/get (or another request whose answers are kept: a tool call, a skill read)
answered from the answer cache is answered again from its bytes
(registry.mcp.replay): the same answer with its own id, byte for byte what the full path sends, and
only while every check of the full path would decide the same (the listener live, the tenant, the
caller and the answer still the ones remembered)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from prometheus_client import REGISTRY

from registry import http_protocol, metrics, tokens
from registry.mcp import caching
from registry.mcp.core import Core
from registry.mcp.http import McpEndpoint
from registry.mcp.replay import Replays
from tests.conftest import SIMPLE, Api, auth, serving_over_a_socket
from tests.mcp.conftest import CONFORMANCE_PROMPTS, add_prompts, serve_tools_and_a_skill
from tests.mcp.test_directory import eventually
from tests.mcp.test_stateless import Stateless, meta

ARGS = {"arg1": "one", "arg2": "two"}
NAME = "test_prompt_with_arguments"


@pytest.fixture(params=["in process", "over a socket"])
async def api(api: Api, request: pytest.FixtureRequest) -> AsyncIterator[Api]:
    """Every test twice: through the ASGI app, and under uvicorn with `registry serve`'s protocol,
    which sends a kept answer itself when the request's body came with its head
    (registry.http_protocol)."""
    if request.param == "in process":
        yield api
        return
    async with (
        serving_over_a_socket(api.app) as (url, _),
        httpx.AsyncClient(base_url=url) as client,
    ):
        yield Api(client, api.app)


@pytest.fixture
def full_path(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompts/get requests that reached the protocol core (not answered from their bytes)."""
    seen: list[str] = []
    call = Core.call

    async def counted(self: Core, *args: Any, **kwargs: Any) -> Any:
        seen.append(args[-1].method)
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(Core, "call", counted)
    return seen


async def _get(client: Stateless, **headers: str | None) -> httpx.Response:
    return await client.post(
        "prompts/get", {"_meta": meta(), "name": NAME, "arguments": ARGS}, **headers
    )


async def _acme(api: Api, **tenant: object) -> tuple[dict[str, str], Stateless]:
    keys = await api.tenant("acme", **tenant)
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    return keys, Stateless(api.client, "/mcp/acme", auth(keys["reader"]))


async def test_the_same_bytes_get_the_kept_answer_with_their_own_id(
    api: Api, full_path: list[str]
) -> None:
    _, client = await _acme(api)
    answers = [await _get(client) for _ in range(4)]
    assert len(full_path) == 2  # rendered, then kept (asked twice); the next ones from their bytes
    assert [a.json()["id"] for a in answers] == [1, 2, 3, 4]
    assert all(a.status_code == 200 for a in answers)
    assert answers[1].json()["result"] == answers[2].json()["result"] == answers[3].json()["result"]

    # Byte for byte what the full path sends for the same id: a header it does not read makes the
    # request another one (answered by the full path from the answer cache), same id as the last.
    client.next_id -= 1
    full = await _get(client, **{"X-Trace": "1"})
    assert len(full_path) == 3
    assert full.content == answers[3].content
    assert full.headers["content-type"] == answers[3].headers["content-type"]
    assert int(answers[3].headers["content-length"]) == len(answers[3].content)

    # The same fields in another order (clients, and their threads, order them as they please).
    reordered = await api.client.post(
        "/mcp/acme",
        content=answers[0].request.content,
        headers=list(reversed(answers[0].request.headers.raw)),
    )
    assert reordered.json()["result"] == answers[3].json()["result"]
    assert len(full_path) == 3

    # A string id, and an id that is no JSON-RPC id, which the full path refuses.
    body = {"jsonrpc": "2.0", "method": "prompts/get",
            "params": {"_meta": meta(), "name": NAME, "arguments": ARGS}}  # fmt: skip
    headers = {**client.headers, "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get",
               "Mcp-Name": NAME}  # fmt: skip
    named = await api.client.post("/mcp/acme", json={**body, "id": "x"}, headers=headers)
    assert named.json()["id"] == "x" and named.json()["result"] == answers[3].json()["result"]
    calls = len(full_path)
    refused = await api.client.post("/mcp/acme", json={**body, "id": True}, headers=headers)
    assert refused.status_code == 400 and "error" in refused.json(), refused.text
    notified = await api.client.post("/mcp/acme", json=body, headers=headers)
    assert notified.status_code == 202
    assert len(full_path) == calls  # neither reached the core: refused, and a notification


async def test_headers_the_full_path_checks_are_part_of_the_request(
    api: Api, full_path: list[str]
) -> None:
    _, client = await _acme(api)
    for _ in range(3):
        assert (await _get(client)).status_code == 200
    mismatch = await _get(client, **{"Mcp-Name": "test_simple_prompt"})
    assert mismatch.status_code == 400, mismatch.text
    assert "Mcp-Name" in mismatch.json()["error"]["message"]
    other_key = Stateless(api.client, "/mcp/acme", {"Authorization": "Bearer nope"})
    assert (await _get(other_key)).status_code == 403  # a key this tenant does not have


async def test_an_allowed_origin_is_answered_again_with_its_cors_headers(
    api: Api, full_path: list[str]
) -> None:
    keys, _ = await _acme(api)
    browser = Stateless(
        api.client, "/mcp/acme", {**auth(keys["reader"]), "Origin": "http://localhost:5173"}
    )
    answers = [await _get(browser) for _ in range(3)]
    assert len(full_path) == 2
    for answer in answers:
        assert answer.headers["access-control-allow-origin"] == "http://localhost:5173"
        assert answer.headers["vary"] == "Origin"
    evil = Stateless(
        api.client, "/mcp/acme", {**auth(keys["reader"]), "Origin": "https://evil.example"}
    )
    assert (await _get(evil)).status_code == 403


def _forget(api: Api, what: str) -> Callable[[], None]:
    caches = api.app.mcp.caches

    def forget() -> None:
        [tenant] = caches.directory.tenants._keys  # one tenant in this test
        tenant_id = uuid.UUID(int=tenant)
        if what == "tenant":
            caches.directory.tenants.invalidate(tenant_id)
        elif what == "caller":
            caches.directory.principals.invalidate(tenant_id)
        elif what == "stale caller":  # due for its use to be recorded: checked in the database
            for key in list(caches.directory.principals._keys[tenant]):
                principal, _ = caches.directory.principals.lru.peek(key)
                caches.directory.principals.keep(tenant_id, key, (principal, 0.0))
        elif what == "answer":
            caches.answers.invalidate(tenant_id)

    return forget


@pytest.mark.parametrize("what", ["tenant", "caller", "stale caller", "answer", "listener"])
async def test_anything_the_full_path_would_check_again_sends_it_there(
    api: Api, full_path: list[str], what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, client = await _acme(api)
    for _ in range(3):
        assert (await _get(client)).status_code == 200
    assert len(full_path) == 2
    replays = api.app.mcp.caches.replays
    [[key]] = [list(keys) for keys in replays._keys.values()]  # one tenant, one request
    kept = replays.lru.peek(key)
    if what == "listener":  # not hearing changes: nothing remembered is trusted
        monkeypatch.setattr(api.app.mcp.caches, "live", lambda: False)
    else:
        _forget(api, what)()
    assert (await _get(client)).status_code == 200
    assert len(full_path) == 3
    if what != "listener":  # the outdated entry is gone (or kept anew): it holds no old answer
        assert replays.lru.peek(key) is not kept


async def test_a_revoked_key_and_a_closed_tenant_are_refused(
    api: Api, full_path: list[str]
) -> None:
    keys, _ = await _acme(api, public_read=True)
    created = await api.client.post(
        "/api/v1/tenants/acme/keys", json={"role": "reader"}, headers=auth(keys["admin"])
    )
    client = Stateless(api.client, "/mcp/acme", auth(f"Bearer {created.json()['secret']}"))
    anonymous = Stateless(api.client, "/mcp/acme", {})
    for _ in range(3):
        assert (await _get(client)).status_code == 200
        assert (await _get(anonymous)).status_code == 200
    assert len(full_path) == 4
    revoked = await api.client.delete(
        f"/api/v1/tenants/acme/keys/{created.json()['id']}", headers=auth(keys["admin"])
    )
    assert revoked.status_code == 204

    async def refused() -> bool:
        return (await _get(client)).status_code == 403

    await eventually(refused)
    closed = await api.client.patch(
        "/api/v1/tenants/acme", json={"public_read": False}, headers=auth(keys["admin"])
    )
    assert closed.status_code == 200, closed.text
    assert (await _get(anonymous)).status_code == 401


async def test_a_new_version_is_served_at_once(api: Api, full_path: list[str]) -> None:
    keys, client = await _acme(api)
    for _ in range(3):
        assert (await _get(client)).status_code == 200
    [prompt] = [p for p in CONFORMANCE_PROMPTS if p["name"] == NAME]
    written = await api.client.post(
        f"/api/v1/tenants/acme/prompts/{NAME}/versions",
        json={**{k: v for k, v in prompt.items() if k != "name"}, "description": "second",
              "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )  # fmt: skip
    assert written.status_code == 201, written.text
    assert (await _get(client)).json()["result"]["description"] == "second"


async def test_tool_calls_and_skill_reads_are_answered_again_and_counted_so(
    api: Api, full_path: list[str]
) -> None:
    """Every method whose answers are kept (caching.KEPT) is answered again from its bytes, and
    counted in the metrics under its own name."""
    keys, client = await _acme(api)
    marked = await api.client.patch(
        f"/api/v1/tenants/acme/prompts/{NAME}",
        json={"as_tool": True},
        headers=auth(keys["publisher"]),
    )
    assert marked.status_code == 200, marked.text
    await serve_tools_and_a_skill(api, "acme", keys)
    uri, folder = "skill://code-review/SKILL.md", "skill://code-review/references"
    for method, params, name in (
        ("tools/call", {"name": NAME, "arguments": ARGS}, NAME),
        ("resources/read", {"uri": uri}, uri),
        ("skills/get", {"uri": uri}, uri),
        ("resources/directory/read", {"uri": folder}, folder),
    ):
        before = _ok(method)
        answers = [
            await client.post(method, {"_meta": meta(), **params}, **{"Mcp-Name": name})
            for _ in range(4)
        ]
        assert [a.status_code for a in answers] == [200] * 4, answers[0].text
        assert answers[1].json()["result"] == answers[3].json()["result"]
        assert answers[3].json()["id"] == client.next_id
        assert full_path.count(method) == 2, full_path  # the last two from their bytes
        assert _ok(method) == before + 4


async def test_a_lists_pages_are_answered_again_while_their_cursors_are_young(
    api: Api, full_path: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list's pages (caching.KEPT_PAGES) are kept like a prompts/get; the cursor to the next page
    a page carries expires, so it is sent again only while that cursor has half its life left, and
    a page asked with a cursor only while that cursor still opens."""
    keys, client = await _acme(api)
    # Pages of one: every page but the last carries a cursor to the next.
    paged = await api.client.patch(
        "/api/v1/tenants/acme", json={"page_size": 1}, headers=auth(keys["admin"])
    )
    assert paged.status_code == 200, paged.text
    clock = [tokens.now()]
    monkeypatch.setattr(tokens, "now", lambda: clock[0])
    life = api.app.mcp.core.settings.session_idle_seconds

    def lists() -> int:
        return full_path.count("prompts/list")

    async def first() -> httpx.Response:
        return await client.post("prompts/list", {"_meta": meta()})

    async def after(cursor: str) -> httpx.Response:
        return await client.post("prompts/list", {"_meta": meta(), "cursor": cursor})

    answers = [await first() for _ in range(4)]
    assert lists() == 2  # listed, then kept; the next ones from their bytes
    assert [a.json()["id"] for a in answers] == [1, 2, 3, 4]
    cursor = answers[3].json()["result"]["nextCursor"]
    assert answers[1].json()["result"] == answers[3].json()["result"]
    seconds = [await after(cursor) for _ in range(3)]  # every client that read the kept first page
    assert lists() == 4
    second = seconds[2].json()["result"]["prompts"]
    assert second == seconds[0].json()["result"]["prompts"]
    assert second != answers[3].json()["result"]["prompts"]

    clock[0] += life / 2 - 1  # the kept cursors still have more than half their life
    assert (await first()).json()["result"]["nextCursor"] == cursor
    assert lists() == 4
    clock[0] += 2  # now less: listed again, with a cursor made now, which opens
    again = await first()
    assert lists() == 5
    fresh = again.json()["result"]["nextCursor"]
    assert fresh != cursor
    assert (await after(fresh)).json()["result"]["prompts"] == second

    # The first cursor opens until its life ends: its page is listed again (its own next cursor
    # was made too long ago) and kept, but not past the moment the cursor stops opening.
    for _ in range(3):
        assert (await after(cursor)).json()["result"]["prompts"] == second
    assert lists() == 8
    clock[0] += life / 2 - 0.5  # past the first cursor's life, not yet half of its page's cursor's
    expired = await after(cursor)
    assert lists() == 9
    assert "expired cursor" in expired.json()["error"]["message"], expired.text

    # Kept again from then on, until the tenant changes: a new prompt is listed at once.
    clock[0] += 1
    for _ in range(2):
        await first()
    calls = lists()
    kept = (await first()).json()["result"]["nextCursor"]
    assert lists() == calls
    added = await api.client.post(
        "/api/v1/tenants/acme/prompts",
        json={**SIMPLE, "name": "a_first", "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )
    assert added.status_code == 201, added.text
    listed = (await first()).json()["result"]
    assert listed["prompts"][0]["name"] == "a_first"
    assert listed["nextCursor"] != kept


async def test_a_first_page_may_be_larger_than_any_other_kept_answer(
    api: Api, full_path: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list's first page is kept up to caching.PAGE_ANSWER_MAX_BYTES, past the bound on other
    answers (here made smaller than both answers)."""
    _, client = await _acme(api)
    monkeypatch.setattr(caching, "ANSWER_MAX_BYTES", 64)
    for _ in range(4):
        assert (await _get(client)).status_code == 200
        assert (await client.post("prompts/list", {"_meta": meta()})).status_code == 200
    assert full_path.count("prompts/get") == 4  # too large to keep: rendered each time
    assert full_path.count("prompts/list") == 2  # kept, then sent from the request's bytes


def _ok(method: str) -> float:
    metrics.flush()
    labels = {"kind": "mcp", "name": method, "outcome": "ok"}
    return REGISTRY.get_sample_value("registry_requests_total", labels) or 0.0


@pytest.mark.parametrize("api", ["over a socket"], indirect=True)
@pytest.mark.parametrize("join_below", [64 * 1024, 0], ids=["head and body joined", "apart"])
async def test_the_protocol_sends_kept_answers_itself_pipelined_or_not(
    api: Api, monkeypatch: pytest.MonkeyPatch, join_below: int
) -> None:
    """A kept answer whose request came whole in one read is written by the HTTP protocol without
    a task (the endpoint never sees it), pipelined requests in their order; a request whose body
    comes in a later read gets its task as soon as its head is read, and the same answer. A long
    answer goes to the transport beside its head (here: every answer)."""
    monkeypatch.setattr(http_protocol, "_JOIN_BELOW", join_below)
    entered: list[str] = []
    reached = asyncio.Event()
    endpoint = McpEndpoint.__call__

    async def counted(self: McpEndpoint, scope: Any, receive: Any, send: Any) -> None:
        entered.append(scope["method"])
        reached.set()
        await endpoint(self, scope, receive, send)

    monkeypatch.setattr(McpEndpoint, "__call__", counted)
    _, client = await _acme(api)
    identified: list[bytes] = []
    identify = Replays.identify

    def digested(scope: Any, body: bytes) -> Any:
        identified.append(body)
        return identify(scope, body)

    monkeypatch.setattr(Replays, "identify", staticmethod(digested))
    answers = [await _get(client) for _ in range(3)]
    assert len(entered) == 2  # rendered, then kept; the third from its bytes, by the protocol
    assert len(identified) == 3  # once each: the task takes the protocol's digest
    assert [a.json()["id"] for a in answers] == [1, 2, 3]
    client.next_id = 1
    again = await _get(client)  # the protocol's answer to the full path's request of the same id
    assert again.content == answers[1].content
    assert {k: v for k, v in again.headers.items() if k != "date"} == {
        k: v for k, v in answers[1].headers.items() if k != "date"
    }
    assert len(entered) == 2

    sent = answers[0].request
    where = urlsplit(str(api.client.base_url))
    reader, writer = await asyncio.open_connection(where.hostname, where.port)

    def request(request_id: int) -> tuple[bytes, bytes]:
        body = json.loads(sent.content)
        body["id"] = request_id  # the same members in the same order, another id
        content = json.dumps(body).encode()
        head = [b"POST /mcp/acme HTTP/1.1"]
        head += [b"%s: %s" % (k, v) for k, v in sent.headers.raw if k.lower() != b"content-length"]
        head.append(b"content-length: %d" % len(content))
        return b"\r\n".join(head) + b"\r\n\r\n", content

    writer.write(b"".join(request(7) + request(8)))  # pipelined: two requests in one write
    assert [await _answer(reader) for _ in range(2)] == [
        (7, _result(answers)),
        (8, _result(answers)),
    ]
    assert len(entered) == 2
    reached.clear()
    head, body = request(9)
    writer.write(head)  # its body comes later: the task starts without it, and waits for it
    await asyncio.wait_for(reached.wait(), timeout=30)
    writer.write(body)
    assert await _answer(reader) == (9, _result(answers))
    assert len(entered) == 3
    writer.close()


def _result(answers: list[httpx.Response]) -> Any:
    return answers[1].json()["result"]


async def _answer(reader: asyncio.StreamReader) -> tuple[Any, Any]:
    """The id and result of the next answer on a raw connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:] if line)
    answer = json.loads(await reader.readexactly(int(fields[b"content-length"])))
    return answer["id"], answer["result"]
