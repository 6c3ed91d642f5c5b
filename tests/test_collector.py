"""How a serving worker runs Python's cycle collector (registry/collector.py): every pause timed,
the survivors of each collection of the two older generations frozen, a complete collection now
and then; and what makes freezing safe: no kind of request leaves garbage that only the collector
could free."""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import subprocess
import sys
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest

from bench.inproc import call
from registry import collector, metrics
from registry.app import create_app
from registry.config import load_settings
from registry.events.cache import Lru, TenantScoped
from tests.conftest import OPERATOR_TOKEN, ROOT, SIMPLE, Api, PgServer
from tests.mcp.conftest import serve_tools_and_a_skill
from tests.mcp.test_stateless import REVISION, meta


@pytest.fixture
def policy() -> Iterator[collector.Policy]:
    """This process's collector run by a fresh ``Policy`` (nothing frozen before), no complete
    collection until a test asks for one; the interpreter's own again afterwards."""
    gc.collect()
    gc.unfreeze()
    gc.callbacks[:] = [c for c in gc.callbacks if not isinstance(c, collector.Policy)]
    installed = collector.install()
    assert collector.install() is installed  # once per process, however often asked
    installed.unfreeze_every = 10**9
    try:
        yield installed
    finally:
        gc.callbacks[:] = [c for c in gc.callbacks if not isinstance(c, collector.Policy)]
        gc.unfreeze()


class Node:
    pass


def _count(generation: str) -> float:
    metrics.flush()
    return float(sum(bucket.get() for bucket in metrics.GC_PAUSE.labels(generation)._buckets))


def test_full_collections_are_timed_and_freeze_their_survivors(policy: collector.Policy) -> None:
    before = _count("2")
    cycle = Node()
    cycle.self = cycle  # type: ignore[attr-defined]
    alive = weakref.ref(cycle)
    gc.collect()  # the first: the cycle is reachable, so it survives and is frozen
    assert gc.get_freeze_count() > 0
    del cycle  # now garbage that only the collector can free, and frozen
    gc.collect()  # the second walks only what came since: the frozen cycle stays
    assert alive() is not None
    policy.full = policy.unfreeze_every - 1
    gc.collect()  # a complete one: everything handed back first, so the cycle is freed
    assert alive() is None
    assert gc.get_freeze_count() > 0  # and what survived it frozen again
    assert _count("2") == before + 3


def test_the_survivors_of_the_middle_generation_are_frozen_too(policy: collector.Policy) -> None:
    """What the caches gathered since the last full collection is frozen at the next collection of
    generation 1, not left for a full collection to walk."""
    before = _count("1")
    gc.collect(2)
    frozen = gc.get_freeze_count()
    kept = [Node() for _ in range(1000)]  # a cache filling
    gc.collect(1)
    assert gc.get_freeze_count() >= frozen + len(kept)
    assert not gc.get_objects(generation=2)  # the oldest left empty
    assert _count("1") == before + 1
    frozen = gc.get_freeze_count()
    young = [Node() for _ in range(100)]
    gc.collect(0)  # the youngest's survivors go on to the middle one, not frozen
    assert gc.get_freeze_count() == frozen
    assert young


def _turn_over(cache: Lru[Node], start: int, count: int) -> None:
    for key in range(start, start + count):
        cache.put(key, Node())  # a new entry kept, the oldest one freed


@pytest.mark.parametrize("installed", [True, False])
def test_a_cache_turning_over_starts_young_collections(
    policy: collector.Policy, installed: bool
) -> None:
    """A full cache frees an old entry's objects as it keeps a new one's, so the interpreter's
    count of allocations less deallocations stays flat and never starts a collection: the new
    entries would pile up in generation 0 for one long collection to walk. The entries a cache
    drops start young collections instead. (Without the policy, what the interpreter does: the
    pile-up this guards against.)"""
    if not installed:
        collector.uninstall(policy)
    cache: Lru[Node] = Lru("turnover", 5_000)
    _turn_over(cache, 0, 5_000)
    gc.collect(2)  # the full cache, old (frozen by the policy)
    collections_before = _count("0") + _count("1")
    _turn_over(cache, 5_000, 5_000)  # every entry replaced
    young = len(gc.get_objects(generation=0))
    if installed:
        assert young < 1_000  # at most EVICTIONS_PER_COLLECTION entries since the last
        assert _count("0") + _count("1") >= collections_before + 5_000 // 64
    else:
        assert young >= 5_000  # the pile-up: every new entry unwalked


def test_an_invalidation_starts_no_collection(policy: collector.Policy) -> None:
    """A tenant's change drops its entries without keeping others in their place: the frees only
    lower the interpreter's count, and what is kept afterwards counts up from there. Counting
    them too would run a collection every 64 entries of the loop that drops them (0.4-0.5 ms more
    for a tenant of 5,000 entries)."""
    cache: TenantScoped[list[Node]] = TenantScoped("invalidated", 100_000)
    tenant = uuid.uuid4()
    for key in range(5_000):
        cache.keep(tenant, key, [Node()])
    gc.collect(1)
    collections_before = _count("0") + _count("1") + _count("2")
    cache.invalidate(tenant)
    assert cache.held(tenant) == 0
    assert _count("0") + _count("1") + _count("2") == collections_before


def test_without_freezing_the_pauses_are_still_timed(policy: collector.Policy) -> None:
    policy.freeze = False
    gc.collect(1)
    frozen = gc.get_freeze_count()
    _ = [Node() for _ in range(100)]
    gc.collect(1)
    gc.collect(2)
    assert gc.get_freeze_count() == frozen


# --- no request leaves cyclic garbage ----------------------------------------------------------

Make = Callable[[int], Awaitable[tuple[int, bytes]]]


async def _requests(api: Api) -> dict[str, tuple[Make, int]]:
    """Each kind of request a worker serves all day, by name: how to make the n-th, and its
    status."""
    keys = await api.tenant("cycles")
    publisher = {"authorization": keys["publisher"]}  # as ASGI has them: lower case
    made = await api.client.post(
        "/api/v1/tenants/cycles/prompts", json={**SIMPLE, "labels": ["production"]},
        headers=publisher,
    )  # fmt: skip
    assert made.status_code == 201, made.text
    parent = {
        "name": "letter", "labels": ["production"], "as_tool": True,
        "arguments": [{"name": "who", "required": True}],
        "messages": [{"role": "user", "content": {
            "type": "text", "text": "{{#who}}Dear {{> greet@production}}{{/who}} Regards."}}],
    }  # fmt: skip
    made = await api.client.post("/api/v1/tenants/cycles/prompts", json=parent, headers=publisher)
    assert made.status_code == 201, made.text
    await serve_tools_and_a_skill(api, "cycles", keys)
    app = api.app
    mcp = "/mcp/cycles"
    reader = {"content-type": "application/json", "accept": "application/json, text/event-stream",
              "mcp-protocol-version": REVISION, "authorization": keys["reader"]}  # fmt: skip
    writer = {"content-type": "application/json", **publisher}

    def rpc(method: str, params: dict[str, Any], name: str | None = None, **extra: str) -> Make:
        headers = {**reader, "mcp-method": method, **({"mcp-name": name} if name else {}), **extra}

        def make(n: int) -> Awaitable[tuple[int, bytes]]:
            body = {"jsonrpc": "2.0", "id": n, "method": method,
                    "params": {"_meta": meta(), **params}}  # fmt: skip
            return call(app, "POST", mcp, headers, json.dumps(body).encode())

        return make

    def fresh(n: int) -> Awaitable[tuple[int, bytes]]:
        return rpc(
            "prompts/get", {"name": "letter", "arguments": {"who": f"reader {n}"}}, "letter"
        )(n)

    def missing(n: int) -> Awaitable[tuple[int, bytes]]:  # compiles again: expands the partial
        caches = app.mcp.caches
        caches.clear()
        caches.versions.clear()
        caches.seen_once.clear()
        return rpc("prompts/get", {"name": "letter", "arguments": {"who": "Ada"}}, "letter")(n)

    def version(n: int) -> Awaitable[tuple[int, bytes]]:
        body = {
            **SIMPLE,
            "messages": [
                {
                    "role": "user",
                    "content": {"type": "text", "text": f"Hello {{{{who}}}}, take {n}"},
                }
            ],
        }
        del body["name"], body["title"], body["description"]
        return call(app, "POST", "/api/v1/tenants/cycles/prompts/greet/versions", writer,
                     json.dumps(body).encode())  # fmt: skip

    def move(n: int) -> Awaitable[tuple[int, bytes]]:
        return call(app, "PUT", "/api/v1/tenants/cycles/prompts/greet/labels/staging", writer,
                     json.dumps({"version": 1 + n % 2}).encode())  # fmt: skip

    kept = rpc("prompts/get", {"name": "letter", "arguments": {"who": "Ada"}}, "letter")
    tool = rpc("tools/call", {"name": "letter", "arguments": {"who": "Ada"}}, "letter")
    skill = "skill://code-review/SKILL.md"
    stranger = rpc("prompts/list", {}, authorization="Bearer not-a-key-0000000000000000")

    def rest_read(n: int) -> Awaitable[tuple[int, bytes]]:
        return call(app, "GET", "/api/v1/tenants/cycles/prompts/greet", publisher, b"")

    return {
        "prompts/get, kept": (kept, 200),
        "prompts/get, new arguments": (fresh, 200),
        "prompts/get, compiled again": (missing, 200),
        "prompts/list": (rpc("prompts/list", {}), 200),
        "tools/list": (rpc("tools/list", {}), 200),
        "tools/call": (tool, 200),
        "resources/read": (rpc("resources/read", {"uri": skill}, skill), 200),
        "an unknown prompt": (rpc("prompts/get", {"name": "nope", "arguments": {}}, "nope"), 200),
        "a key that is not one": (stranger, 403),
        "REST read": (rest_read, 200),
        "REST version write": (version, 201),
        "REST label move": (move, 200),
    }


def test_no_request_leaves_garbage_only_the_collector_could_free(
    pg_server: PgServer, db_name: str
) -> None:
    """A worker freezes what survives its collections (registry/collector.py): an object frozen
    while in use that ends up in an unreachable cycle is freed only by the rare complete
    collection. So no request may end in such a cycle: with the collector off, each kind of request
    leaves nothing for it to find (a recursive nested function did, once per compiled version).
    Checked in a process of its own: in this one, what other tests left running (threads of
    servers, clients and subprocess readers) may leave garbage of their own meanwhile."""
    ran = subprocess.run(
        [sys.executable, "-m", "tests.test_collector", pg_server.url(db_name)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    [line] = [line for line in ran.stdout.splitlines() if line.startswith(_FOUND)]
    found = json.loads(line.removeprefix(_FOUND))
    assert not found, found


_FOUND = "left for the collector: "


async def _leftovers(database_url: str) -> dict[str, list[tuple[str, int]]]:
    """Per kind of request, what ten of them left for the collector (the most common types)."""
    settings = load_settings(
        database_url=database_url, operator_token=OPERATOR_TOKEN, gc_freeze=False
    )
    app = create_app(settings)
    found = {}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            requests = await _requests(Api(client, app))
        for name, (make, status) in requests.items():
            for n in range(3):  # warm: caches, code paths, the statements prepared
                got, body = await make(n)
                assert got == status, (name, body[:300])
            gc.collect()
            gc.disable()
            try:
                gc.set_debug(gc.DEBUG_SAVEALL)
                for n in range(3, 13):
                    await make(n)
                freed = gc.collect()
                kinds = collections.Counter(type(o).__qualname__ for o in gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
            if freed:
                found[name] = kinds.most_common(5)
    return found


if __name__ == "__main__":
    print(_FOUND + json.dumps(asyncio.run(_leftovers(sys.argv[1]))))
