"""The cheapest possible prompts/get miss on this stack, side by side with the registry's; with
``--workload page``, the cheapest possible answer of a prompts/list page.

    python -m bench.floor [--workload miss|page] [--duration 10] [--warmup 3] [--connections 16,64]
                          [--rounds 2]

On the seeded database (REGISTRY_DATA_DIR or REGISTRY_DATABASE_URL; the 1,000-tenant dataset
makes nearly every registry request a miss), the same random prompts/get requests (bench/run's
targets: a random production prompt of a random bench tenant) go in turns to ``registry serve``
and to ``floor_app`` under uvicorn, two workers each: an ASGI endpoint that parses the JSON-RPC
request and reads the prompt's first message with one prepared primary-key select on a plain
asyncpg pool (as the connecting role: no row-level security), the keys of every prompt read once
at start. Nothing is kept between requests: every request is that one round trip. It does less than
any registry miss (no label resolution, no arguments, no rendering, no caller, no tenant), so its
CPU per request, the server's and PostgreSQL's, is the floor a miss cannot go under here. Prints a
Markdown table (each round) and the registry's cost over the floor's.

``--workload page``: the first prompts/list page of bench-big (as bench/run's list workload asks
for it), from the registry, against ``page_floor_app``: an ASGI endpoint that reads each request's
body and answers the very bytes the registry answered that page with (read from it once at start),
parsing and checking nothing. Sending that many bytes over the socket is what a page costs at least.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import asyncpg
import httpx
import orjson

from bench.run import (
    ROOT,
    _embedded_url,
    list_request,
    make_targets,
    postmaster_of,
    server,
    uvicorn,
    worker_pids,
    wrk,
)
from bench.seed import BIG_TENANT

# One row per prompt served under production: its message at position 0, by the table's key.
_KEYS = """
SELECT t.slug, l.prompt_name, l.tenant_id, l.prompt_id, l.version
  FROM labels l JOIN tenants t ON t.id = l.tenant_id
 WHERE l.label = 'production'
"""
_MESSAGE = """
SELECT content FROM prompt_messages
 WHERE tenant_id = $1 AND prompt_id = $2 AND version = $3 AND position = 0
"""


def floor_app() -> Any:
    """The floor: one prepared primary-key select per request (REGISTRY_DATABASE_URL)."""
    from registry.db.connect import asyncpg_arguments

    url = os.environ["REGISTRY_DATABASE_URL"]
    state: dict[str, Any] = {}
    headers = [(b"content-type", b"application/json")]

    async def start() -> None:
        state["pool"] = await asyncpg.create_pool(**asyncpg_arguments(url), min_size=8, max_size=8)
        rows = await state["pool"].fetch(_KEYS)
        state["keys"] = {(r["slug"], r["prompt_name"]): tuple(r)[2:] for r in rows}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await state["pool"].close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        request: dict[str, Any] = orjson.loads(raw) if raw else {"id": None, "params": {}}
        name = request["params"].get("name")
        key = state["keys"].get((scope["path"].rsplit("/", 1)[-1], name))
        if key is None:  # the readiness probe, or a name not served
            body = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {}})
        else:
            content = await state["pool"].fetchval(_MESSAGE, *key)
            result = {"messages": [{"role": "user", "content": orjson.loads(content)}]}
            body = orjson.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def page_floor_app() -> Any:
    """The floor of a page: the answer in the file BENCH_FLOOR_PAGE, sent to every request."""
    with open(os.environ["BENCH_FLOOR_PAGE"], "rb") as page:
        body = page.read()
    headers = [(b"content-type", b"application/json")]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # no lifespan work
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


def first_page(url: str, tenant: str) -> bytes:
    """The registry's answer to the first prompts/list page of ``tenant``, as bench/run asks."""
    request, headers = list_request()
    answer = httpx.post(f"{url}/mcp/{tenant}", json=request, headers=headers, timeout=60)
    answer.raise_for_status()
    if "result" not in answer.json():
        raise RuntimeError(f"prompts/list of {tenant} answered {answer.text[:500]}")
    return answer.content


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/floor", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["miss", "page"], default="miss")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--connections", default="16,64")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    from registry.config import load_settings

    settings = load_settings()
    url = os.environ.get("REGISTRY_DATABASE_URL") or _embedded_url(settings)
    targets = ROOT / "bench" / "results" / "floor-targets.tsv"
    targets.parent.mkdir(parents=True, exist_ok=True)
    connections = [int(c) for c in args.connections.split(",")]
    rows: list[tuple[str, int, dict[str, Any]]] = []
    registry_cmd = [sys.executable, "-m", "registry", "serve", "--workers", "2"]
    with server(registry_cmd, {}, "/readyz") as registry:  # starts the embedded server, if any
        postmaster = asyncio.run(postmaster_of(url))
        if args.workload == "page":
            page = targets.with_name("floor-page.json")
            page.write_bytes(first_page(registry.url, BIG_TENANT))
            what = f"the first page of {BIG_TENANT}, {page.stat().st_size:,} bytes"
            path, script = f"/mcp/{BIG_TENANT}", ["list", ""]
            factory, env = "bench.floor:page_floor_app", {"BENCH_FLOOR_PAGE": str(page)}
        else:
            what = f"{asyncio.run(make_targets(url, targets)):,} targets"
            path = ""
            script = ["targets", str(targets)]
            factory, env = "bench.floor:floor_app", {"REGISTRY_DATABASE_URL": url}
        with server(uvicorn(factory, 2), env, "/mcp/-", timeout=300) as floor:
            for _ in range(args.rounds):
                for name, running in (("registry", registry), ("floor", floor)):
                    for c in connections:
                        figures = wrk(
                            running.url + path, c, args.duration, args.warmup, *script,
                            server_pids=worker_pids(running.pid), postmaster=postmaster,
                        )  # fmt: skip
                        rows.append((name, c, figures))
                        print(name, c, figures, file=sys.stderr)
    print(table(rows, what))


def table(rows: list[tuple[str, int, dict[str, Any]]], what: str) -> str:
    lines = [
        f"| server | connections | requests/s | p50 ms | p99 ms | server CPU ms | PostgreSQL CPU ms "
        f"| in all ms | errors |  ({what})",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c, f in rows:
        cpu = f["server_cpu_ms"] + f["postgres_cpu_ms"]
        lines.append(
            f"| {name} | {c} | {f['rps']:,.0f} | {f['p50_ms']:.2f} | {f['p99_ms']:.2f} "
            f"| {f['server_cpu_ms']:.3f} | {f['postgres_cpu_ms']:.3f} | {cpu:.3f} | {f['errors']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
