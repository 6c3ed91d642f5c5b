"""The registry's own work per MCP request, without an HTTP server: prompts/get and prompts/list
(2026-07-28) called through the ASGI app, answered from memory and (prompts/get) not, so that two
checkouts can be compared on what they do themselves (run it from each checkout, in turns, against a
migrated database of its own).

    REGISTRY_DATABASE_URL=postgresql://... python -m bench.inproc [--calls 5000] [--profile]

Creates tenant ``inproc`` (with an operator token it sets itself), a key, one prompt (offered as a
tool too) and one skill; prints the fastest and the median of five runs of ``--calls`` calls
(microseconds per call: prompts/get, prompts/list, tools/call of the prompt's tool and
resources/read of the skill's SKILL.md, tools/list, skills/list and resources/list, each asked the
same way each time, with this process's CPU time per call), and the CPU time of a
tools/call with new arguments each time, of a prompts/get that misses the worker's caches, of a
prompt read through the admin API (each a fifth as many calls), of a version write (a tenth; their
wall time would include PostgreSQL's), and of the empty transaction every REST request opens,
through the ORM session and on the driver alone;
``--profile`` adds cProfile's top functions for prompts/get.

``--memory TENANTS PROMPTS`` measures instead what a worker keeps per tenant and per cached prompt:
it writes TENANTS tenants of PROMPTS prompts each (``mem-*``, once), then asks for every prompt
three times (rendered, kept, then answered from the request's bytes) and each tenant's first page,
and prints the memory Python allocated and kept for them (tracemalloc), and the growth of the
resident size in a first pass without tracemalloc.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

OPERATOR = "inproc-operator-token-0123456789abcdef"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "inproc", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MCP = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
}


def _scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5555), "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip


async def call(app: Any, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
    """One request through the ASGI app; returns (status, body)."""
    sent = False
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays until the answer is sent
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(_scope(method, path, headers), receive, send)
    return status, b"".join(chunks)


async def prepare(app: Any) -> None:
    operator = {"content-type": "application/json", "authorization": f"Bearer {OPERATOR}"}
    status, body = await call(app, "POST", "/api/v1/tenants", operator, b'{"slug": "inproc"}')
    assert status in (201, 409), body
    status, body = await call(
        app, "POST", "/api/v1/tenants/inproc/keys", operator, b'{"role": "publisher"}'
    )
    assert status == 201, body
    writer = {
        "content-type": "application/json",
        "authorization": f"Bearer {json.loads(body)['secret']}",
    }
    prompt = {
        "name": "p1",
        "arguments": [{"name": "topic"}],
        "messages": [{"role": "user", "content": {"type": "text", "text": "About {{topic}}"}}],
    }
    status, body = await call(
        app, "POST", "/api/v1/tenants/inproc/prompts", writer, json.dumps(prompt).encode()
    )
    assert status in (201, 409), body
    status, body = await call(
        app, "PUT", "/api/v1/tenants/inproc/prompts/p1/labels/production", writer, b'{"version": 1}'
    )
    assert status == 200, body
    # The prompt as a tool, and a skill: what tools/call and resources/read serve.
    status, body = await call(
        app, "PATCH", "/api/v1/tenants/inproc", operator, b'{"mcp_tools": true}'
    )
    assert status == 200, body
    status, body = await call(app, "PATCH", PROMPT_PATH, writer, b'{"as_tool": true}')
    assert status == 200, body
    status, body = await call(app, "POST", "/api/v1/tenants/inproc/skills", writer, json.dumps({
        "name": "s1", "labels": ["production"], "files": [{"path": "SKILL.md", "text": SKILL}],
    }).encode())  # fmt: skip
    assert status in (201, 409), body
    MCP["authorization"] = writer["authorization"]


# The requests both this harness and bench/instructions send (after ``prepare``): prompts/get of p1
# over MCP, a read of p1 and a new version of it through the admin API.
PROMPT_PATH = "/api/v1/tenants/inproc/prompts/p1"


def prompts_get() -> tuple[dict[str, str], bytes]:
    """The headers and body of a prompts/get of p1."""
    return mcp_request("prompts/get", "p1", {"name": "p1", "arguments": {"topic": "billing"}})


SKILL = "---\nname: s1\ndescription: Review a change\n---\n# Review\n\n1. Tests pass.\n"
SKILL_URI = "skill://s1/SKILL.md"


def mcp_request(
    method: str, name: str | None = None, params: dict[str, Any] | None = None
) -> tuple[dict[str, str], bytes]:
    """The headers and body of a request of ``method`` for ``name`` (its Mcp-Name, if it has one)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                       "params": {"_meta": META, **(params or {})}}).encode()  # fmt: skip
    headers = {**MCP, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers, body


def tool_call(topic: str = "billing") -> tuple[dict[str, str], bytes]:
    """A tools/call of p1's tool."""
    return mcp_request("tools/call", "p1", {"name": "p1", "arguments": {"topic": topic}})


def version_body(take: str, labels: tuple[str, ...] = ()) -> bytes:
    """A new version of p1, its text naming ``take`` (so that every write writes a version), moving
    ``labels`` onto it."""
    text = f"About {{{{topic}}}}, take {take}"
    return json.dumps({"arguments": [{"name": "topic"}], "labels": list(labels), "messages": [
        {"role": "user", "content": {"type": "text", "text": text}}]}).encode()  # fmt: skip


def forget_served(caches: Any) -> None:
    """A worker that has not seen the prompt: its label's resolution, its compiled version and its
    answer forgotten (the tenant and the caller stay known, as they do under load)."""
    caches.resolved.clear()
    caches.versions.clear()
    caches.answers.clear()


async def _time(
    app: Any,
    headers: dict[str, str],
    body: bytes | Callable[[], bytes],
    calls: int,
    before: Callable[[], None] | None = None,
    *,
    method: str = "POST",
    path: str = "/mcp/inproc",
    expect: tuple[int, bytes] = (200, b'"result"'),
) -> list[tuple[float, float]]:
    """Five runs of ``calls`` calls (``before`` runs ahead of each; ``body`` may make a new body
    for each): per call, sorted, the wall time and this process's CPU time in microseconds."""
    made = body if callable(body) else lambda: body
    for _ in range(min(2000 if before is None else 200, calls)):  # warm: caches, code paths
        status, answer = await call(app, method, path, headers, made())
    assert status == expect[0], answer
    assert expect[1] in answer, answer
    runs = []
    for _ in range(5):
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            if before is not None:
                before()
            await call(app, method, path, headers, made())
        runs.append(
            (
                (time.perf_counter() - started) / calls * 1e6,
                (time.process_time() - cpu) / calls * 1e6,
            )
        )
    return sorted(runs)


TEXT = (
    "You are helping {{audience}} with {{topic}}. Answer in plain words, cite the page of the "
    "handbook each step comes from, and say when a step needs someone with more rights. "
    "Keep the answer under two hundred words; end with one question that checks it was understood."
)


async def _fill(app: Any, tenants: int, prompts: int) -> dict[str, dict[str, str]]:
    """Tenants ``mem-N`` with ``prompts`` prompts each, written unless there already; per tenant,
    the headers its reader sends."""
    operator = {"content-type": "application/json", "authorization": f"Bearer {OPERATOR}"}
    readers = {}
    for t in range(tenants):
        slug = f"mem-{t}"
        status, body = await call(app, "POST", "/api/v1/tenants", operator,
                                  json.dumps({"slug": slug}).encode())  # fmt: skip
        assert status in (201, 409), body
        status, body = await call(app, "POST", f"/api/v1/tenants/{slug}/keys", operator,
                                  b'{"role": "publisher"}')  # fmt: skip
        assert status == 201, body
        key = {"content-type": "application/json",
               "authorization": f"Bearer {json.loads(body)['secret']}"}  # fmt: skip
        for n in range(prompts):
            prompt = {
                "name": f"p{n}",
                "description": f"Helps with topic {n}",
                "labels": ["production"],
                "arguments": [{"name": "topic", "required": True}, {"name": "audience"}],
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": f"{n}: {TEXT}"}},
                    {"role": "assistant", "content": {"type": "text", "text": "Understood."}},
                ],
            }
            status, body = await call(app, "POST", f"/api/v1/tenants/{slug}/prompts", key,
                                      json.dumps(prompt).encode())  # fmt: skip
            assert status in (201, 409), body
        readers[slug] = {**MCP, "authorization": key["authorization"]}
    return readers


def _resident() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _memory(app: Any, tenants: int, prompts: int) -> None:
    import gc
    import tracemalloc

    readers = await _fill(app, tenants, prompts)
    caches = app.mcp.caches
    sizes: list[int] = []

    async def ask(slug: str, headers: dict[str, str], n: int) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {
            "_meta": META, "name": f"p{n}",
            "arguments": {"topic": "billing", "audience": "new staff"}}}).encode()  # fmt: skip
        get = {**headers, "mcp-method": "prompts/get", "mcp-name": f"p{n}"}
        for _ in range(3):  # rendered, kept, then answered from the request's bytes
            status, answer = await call(app, "POST", f"/mcp/{slug}", get, body)
            if status != 200 or b'"result"' not in answer:
                raise RuntimeError(f"prompts/get of p{n} in {slug}: {status} {answer[:200]!r}")
        sizes.append(len(answer))

    async def page(slug: str, headers: dict[str, str]) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompts/list",
                           "params": {"_meta": META}}).encode()  # fmt: skip
        status, answer = await call(app, "POST", f"/mcp/{slug}",
                                    {**headers, "mcp-method": "prompts/list"}, body)  # fmt: skip
        if status != 200 or b'"prompts"' not in answer:
            raise RuntimeError(f"prompts/list in {slug}: {status} {answer[:200]!r}")

    def forget() -> None:
        caches.clear()
        caches.versions.clear()
        caches.seen_once.clear()
        gc.collect()

    async def measure(taken: Callable[[], int]) -> tuple[int, int, int, int]:
        forget()
        base = taken()
        for slug, headers in readers.items():
            await ask(slug, headers, 0)
        first = taken()
        for slug, headers in readers.items():
            for n in range(1, prompts):
                await ask(slug, headers, n)
        gc.collect()
        every = taken()
        for slug, headers in readers.items():
            await page(slug, headers)
        gc.collect()
        return base, first, every, taken()

    resident = await measure(_resident)
    tracemalloc.start()
    traced = await measure(lambda: tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    assert len(caches.replays.lru) == tenants * prompts, "not every answer was kept"
    for name, (base, first, every, paged) in (("allocated", traced), ("resident", resident)):
        per_prompt = (every - first) / (tenants * (prompts - 1))
        per_tenant = (first - base) / tenants - per_prompt
        print(
            f"{name}: {per_prompt:,.0f} bytes per cached prompt, {per_tenant / 1024:,.1f} KiB per "
            f"tenant (its first request, less one prompt), {(paged - every) / tenants / 1024:,.1f} "
            f"KiB per tenant's first page of {prompts} prompts"
        )
    print(f"answers of {sum(sizes) / len(sizes):,.0f} bytes on average; {tenants} tenants of "
          f"{prompts} prompts")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--memory", type=int, nargs=2, metavar=("TENANTS", "PROMPTS"))
    args = parser.parse_args()
    os.environ["REGISTRY_OPERATOR_TOKEN"] = OPERATOR
    from registry.app import create_app  # after the token is in the environment

    app = create_app()
    async with app.router.lifespan_context(app):
        if args.memory:
            await _memory(app, *args.memory)
            return
        await prepare(app)
        get, get_body = prompts_get()
        for name, headers, body in (
            ("prompts/get", get, get_body),
            ("prompts/list", *mcp_request("prompts/list")),
            ("tools/call", *tool_call()),
            ("resources/read", *mcp_request("resources/read", SKILL_URI, {"uri": SKILL_URI})),
            ("tools/list", *mcp_request("tools/list")),
            ("skills/list", *mcp_request("skills/list")),
            ("resources/list", *mcp_request("resources/list")),
        ):
            runs = await _time(app, headers, body, args.calls)
            cpu = sorted(run[1] for run in runs)
            print(f"{name}: {runs[0][0]:.1f} µs per call at best, median {runs[2][0]:.1f}; "
                  f"CPU median {cpu[2]:.1f}")  # fmt: skip
        # New arguments each time: rendered each time, from the worker's compiled version.
        topics = iter(range(1 << 40))
        cpu = sorted(run[1] for run in await _time(
            app, tool_call()[0], lambda: tool_call(f"t{next(topics)}")[1], args.calls // 5))  # fmt: skip
        print(f"tools/call, new arguments each time: {cpu[0]:.1f} µs of this process's CPU per "
              f"call at best, median {cpu[2]:.1f}")  # fmt: skip
        # A miss: the version resolved, read (one round trip), compiled and rendered.
        assert app.mcp is not None
        caches = app.mcp.caches
        cpu = sorted(run[1] for run in await _time(
            app, get, get_body, args.calls // 5, lambda: forget_served(caches)))  # fmt: skip
        print(
            f"prompts/get, not in memory: {cpu[0]:.1f} µs of this process's CPU per call at best, "
            f"median {cpu[2]:.1f}"
        )
        # The admin API: a prompt read, and a version write (new content each time, so each
        # writes a version, moves the latest label, and appends its audit and change rows).
        rest = {"authorization": MCP["authorization"]}
        cpu = sorted(run[1] for run in await _time(
            app, rest, b"", args.calls // 5, method="GET", path=PROMPT_PATH,
            expect=(200, b'"latest_version"')))  # fmt: skip
        print(f"REST prompt read: {cpu[0]:.1f} µs of this process's CPU per call at best, "
              f"median {cpu[2]:.1f}")  # fmt: skip
        written = iter(range(1, 1 << 40))
        cpu = sorted(run[1] for run in await _time(
            app, {**rest, "content-type": "application/json"},
            lambda: version_body(f"{os.getpid()}.{next(written)}"), args.calls // 10,
            method="POST", path=f"{PROMPT_PATH}/versions",
            expect=(201, b'"created":true')))  # fmt: skip
        print(f"REST version write: {cpu[0]:.1f} µs of this process's CPU per call at best, "
              f"median {cpu[2]:.1f}")  # fmt: skip
        orm, driver = await _entry_costs(app, max(1, args.calls // 10))
        print(
            f"empty tenant transaction, ORM session: {orm:.1f} µs of this process's CPU, median "
            "(BEGIN, the statement entering the tenant with the caller's key, COMMIT)"
        )
        print(f"empty tenant transaction, driver alone: {driver:.1f} µs of this process's CPU, "
              "median (the same three round trips on a connection of the plain asyncpg pool)")  # fmt: skip
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.calls):
                await call(app, "POST", "/mcp/inproc", get, get_body)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(30)


def empty_transactions(app: Any) -> dict[str, Callable[[], Awaitable[None]]]:
    """The transaction every REST request opens, with nothing in it (BEGIN, the statement that
    enters the tenant and reads the caller's key, COMMIT), two ways: ``orm``, through the ORM
    session as the registry opens it (``named_tenant_tx``); ``driver``, the same three round trips
    on a connection of the plain asyncpg pool. Tenant ``inproc`` and its key (``prepare``)."""
    from registry.db import repository as repo
    from registry.db.connect import APP_ROLE
    from registry.tenants import service as tenants

    db = app.state.db
    key_hash = tenants.hash_secret(MCP["authorization"].removeprefix("Bearer "))
    compiled = repo._ENTER_NAMED_TENANT_WITH_KEY.compile(dialect=db.engine.dialect)
    values = compiled.construct_params(
        {"role": APP_ROLE, "slug": "inproc", "secret_hash": key_hash}
    )
    sql, arguments = str(compiled), [values[name] for name in compiled.positiontup or ()]

    async def orm() -> None:
        async with db.named_tenant_tx("inproc", key_hash=key_hash) as (_, tenant, key):
            if tenant is None or key is None:
                raise RuntimeError("the ORM entry found no tenant inproc or no key")

    async def driver() -> None:
        async with (await db.reads()).acquire() as connection, connection.transaction():
            row = await connection.fetchrow(sql, *arguments)
            if row is None or row["id_1"] is None:
                raise RuntimeError("the driver's entry found no tenant inproc or no key")

    return {"orm": orm, "driver": driver}


async def _entry_costs(app: Any, transactions: int) -> tuple[float, float]:
    """The CPU of ``empty_transactions`` each way (medians of five runs, µs per transaction)."""
    ways = empty_transactions(app)
    runs: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(5):
        for name, one in ways.items():
            for _ in range(20):
                await one()
            started = time.process_time()
            for _ in range(transactions):
                await one()
            runs[name].append((time.process_time() - started) / transactions * 1e6)
    return sorted(runs["orm"])[2], sorted(runs["driver"])[2]


if __name__ == "__main__":
    asyncio.run(main())
