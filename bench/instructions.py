"""Instructions per request, counted by valgrind's callgrind: what one request costs the worker,
repeatable run after run and unmoved by whatever else the machine is doing (its CPU time on this
shared machine moves by a third between runs). Requests go through the ASGI app in process, as in
bench/inproc, on the default event loop.

    REGISTRY_DATABASE_URL=postgresql://... python -m bench.instructions [--requests 100] [WORKLOAD ...]

Workloads: ``rest-read`` (a prompt read through the admin API), ``rest-write`` (a new version of it,
new content each time), ``rest-publish`` (the same, moving the protected label ``production`` onto
it, as the fan-out's writes do), ``rest-move`` (the label ``staging`` moved between two versions of
it), ``mcp-get`` (a prompts/get answered from memory), ``mcp-miss`` (one that misses the worker's
caches), ``mcp-get-rollout`` and ``mcp-miss-rollout`` (the same while a rollout of the prompt is
live: the caller placed, the answer kept per side), ``tx-orm`` and ``tx-driver`` (the empty
transaction every REST request opens, through the ORM session and on the plain asyncpg pool:
bench/inproc's ``empty_transactions``). Each is counted in two processes of its own under
callgrind, both with the same start and warm-up and the instrumentation on only around the measured
requests: one with a few of them, one with ``--requests`` more; their difference over ``--requests`` is one
request's count, what the two have in common cancelling out. PostgreSQL's work is not counted: it
runs in processes of its own. Run it from each of two checkouts against a migrated database of its
own to compare them; it uses tenant ``inproc`` (as bench/inproc does).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from bench import inproc

WORKLOADS = (
    "rest-read", "rest-write", "rest-publish", "rest-move", "mcp-get", "mcp-miss", "tx-orm",
    "tx-driver", "mcp-get-rollout", "mcp-miss-rollout",
)  # fmt: skip
WARM = 30  # requests before the count, in both processes
FEW = 10  # requests counted in the shorter process


async def _requests(app: Any, workload: str) -> Callable[[], Awaitable[None]]:
    """One request of ``workload``, checked."""
    await inproc.prepare(app)
    rest = {"authorization": inproc.MCP["authorization"], "content-type": "application/json"}
    get, get_body = inproc.prompts_get()
    caches = app.mcp.caches
    written = iter(range(1, 1 << 40))

    async def one(method: str, path: str, headers: dict[str, str], body: bytes, ok: int) -> None:
        status, answer = await inproc.call(app, method, path, headers, body)
        if status != ok:
            raise RuntimeError(f"{workload}: {status} {answer[:300]!r}")

    async def rest_read() -> None:
        await one("GET", inproc.PROMPT_PATH, rest, b"", 200)

    async def rest_write() -> None:
        body = inproc.version_body(f"{os.getpid()}.{next(written)}")
        await one("POST", f"{inproc.PROMPT_PATH}/versions", rest, body, 201)

    async def rest_publish() -> None:
        body = inproc.version_body(f"{os.getpid()}.{next(written)}", ("production",))
        await one("POST", f"{inproc.PROMPT_PATH}/versions", rest, body, 201)

    if workload == "rest-move":  # a second version to move the label to and from
        await one(
            "POST",
            f"{inproc.PROMPT_PATH}/versions",
            rest,
            inproc.version_body(f"move {os.getpid()}"),
            201,
        )
    moves = iter(range(1 << 40))

    async def rest_move() -> None:
        body = b'{"version": %d}' % (1 + next(moves) % 2)
        await one("PUT", f"{inproc.PROMPT_PATH}/labels/staging", rest, body, 200)

    async def mcp_get() -> None:
        await one("POST", "/mcp/inproc", get, get_body, 200)

    async def mcp_miss() -> None:
        inproc.forget_served(caches)
        await one("POST", "/mcp/inproc", get, get_body, 200)

    if workload.endswith("-rollout"):  # a new version, half the callers on it
        body = inproc.version_body(f"rollout {os.getpid()}")
        status, answer = await inproc.call(
            app, "POST", f"{inproc.PROMPT_PATH}/versions", rest, body
        )
        if status != 201:
            raise RuntimeError(f"{workload}: {status} {answer[:300]!r}")
        version = json.loads(answer)["version"]
        plan = b'{"version": %d, "steps": [50, 100], "min_seconds": 86400}' % version
        status, answer = await inproc.call(
            app, "PUT", f"{inproc.PROMPT_PATH}/labels/production/rollout", rest, plan
        )
        if status not in (201, 409):  # 409: live already, from an earlier process
            raise RuntimeError(f"{workload}: {status} {answer[:300]!r}")
    chosen: dict[str, Callable[[], Awaitable[None]]] = {
        "rest-read": rest_read, "rest-write": rest_write, "rest-publish": rest_publish,
        "rest-move": rest_move, "mcp-get": mcp_get, "mcp-miss": mcp_miss,
        "mcp-get-rollout": mcp_get, "mcp-miss-rollout": mcp_miss,
    }  # fmt: skip
    empty = inproc.empty_transactions(app)
    chosen["tx-orm"], chosen["tx-driver"] = empty["orm"], empty["driver"]
    return chosen[workload]


def _instrument(on: bool) -> None:
    """Callgrind's instrumentation on or off in this process (nothing outside valgrind)."""
    if os.environ.get("BENCH_UNDER_CALLGRIND"):
        control = shutil.which("callgrind_control") or "callgrind_control"
        subprocess.run(  # noqa: S603 - valgrind's own tool, our arguments
            [control, "-i", "on" if on else "off", str(os.getpid())],
            check=True, capture_output=True,
        )  # fmt: skip


async def _inner(workloads: list[str], requests: int) -> None:
    """``requests`` requests of each workload after its warm-up, counted when under callgrind (the
    counting runs one workload per process; the smoke test runs them all in one)."""
    os.environ["REGISTRY_OPERATOR_TOKEN"] = inproc.OPERATOR
    from registry.app import create_app  # after the token is in the environment

    app = create_app()
    async with app.router.lifespan_context(app):
        for workload in workloads:
            request = await _requests(app, workload)
            for _ in range(WARM):
                await request()
            _instrument(True)
            for _ in range(requests):
                await request()
            _instrument(False)
            if workload.endswith("-rollout"):  # ended, so no other workload runs beside it
                rest = {"authorization": inproc.MCP["authorization"]}
                path = f"{inproc.PROMPT_PATH}/labels/production/rollout/rollback"
                await inproc.call(app, "POST", path, rest, b"")


def _counted(workload: str, requests: int) -> int:
    """Instructions callgrind counted around ``requests`` requests in a process of their own."""
    with tempfile.TemporaryDirectory() as folder:
        ran = subprocess.run(  # noqa: S603 - valgrind running this module again
            [shutil.which("valgrind") or "valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={folder}/out", sys.executable, "-m", "bench.instructions",
             "--inner", workload, str(requests)],
            env={**os.environ, "BENCH_UNDER_CALLGRIND": "1"}, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
    found = re.search(r"Collected : (\d+)", ran.stderr)
    if ran.returncode != 0 or found is None:
        raise RuntimeError(f"{workload} under callgrind failed:\n{ran.stderr[-3000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD", help=", ".join(WORKLOADS))
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument(
        "--inner", nargs=2, metavar=("WORKLOADS", "REQUESTS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    inner = args.inner[0].split(",") if args.inner else []
    unknown = sorted({*args.workloads, *inner} - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload {unknown[0]!r}: choose among {', '.join(WORKLOADS)}")
    if args.inner:
        asyncio.run(_inner(inner, int(args.inner[1])))
        return
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind (with callgrind_control) is needed: apt-get install valgrind")
    for workload in args.workloads or WORKLOADS:
        few = _counted(workload, FEW)
        more = _counted(workload, FEW + args.requests)
        print(f"{workload}: {(more - few) / args.requests:,.0f} instructions per request "
              f"({args.requests} requests)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
