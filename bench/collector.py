"""Full-collection pauses of one worker with warm caches, with the registry's collector policy
(``registry/collector.py``) and without it: the app in this process, its caches filled by prompts/get
of many distinct prompts (the targets file bench/run writes), then full collections timed while
requests go on between them.

    REGISTRY_DATA_DIR=... python -m bench.collector TARGETS [--prompts 10000] [--rounds 8]

Each side runs in a process of its own (this one starts both, in turns, ``--turns`` times), so
neither inherits the other's heap; printed: per side, the first full collection after warming (it
walks everything either way), the median and the longest of the others, the objects the collector
tracks, the resident size at the end, and what the caches grew by per prompt asked for.

``--turnover REQUESTS`` measures instead every collection while the caches turn over: REQUESTS
prompts/get drawn at random from the first ``--among`` targets (30,000 of the 1,000-tenant
dataset's: more compiled versions than a worker keeps), in this process, the code importable from
``PYTHONPATH`` (two checkouts are compared by running it from each, in turns). Printed (JSON) per
generation: how many collections, the median, the 99th percentile and the longest pause; and the
CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from bench.inproc import META, call

MCP = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "prompts/get",
}


def targets(path: Path, count: int) -> list[tuple[str, bytes, dict[str, str]]]:
    found = []
    for line in path.read_text().splitlines()[:count]:
        endpoint, name, arguments = line.split("\t")
        body = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get",
                "params": {"_meta": META, "name": name, "arguments": json.loads(arguments)}}  # fmt: skip
        found.append((endpoint, json.dumps(body).encode(), {**MCP, "mcp-name": name}))
    return found


async def side(path: Path, count: int, rounds: int, policy: bool) -> dict[str, Any]:
    from registry import collector
    from registry.app import create_app

    app = create_app()
    async with app.router.lifespan_context(app):
        if not policy:  # the interpreter's own collector, as before the policy
            gc.callbacks[:] = [c for c in gc.callbacks if not isinstance(c, collector.Policy)]
        work = targets(path, count)
        empty = psutil.Process().memory_info().rss
        for endpoint, body, headers in work:  # warm: every version read, compiled and kept
            status, answer = await call(app, "POST", endpoint, headers, body)
            if status != 200 or b'"result"' not in answer:
                raise RuntimeError(f"prompts/get answered {status}: {answer[:300]!r}")
        for endpoint, body, headers in work:  # asked twice: the answers are kept too
            await call(app, "POST", endpoint, headers, body)
        cached = psutil.Process().memory_info().rss
        pauses = []
        for round_ in range(rounds):
            for endpoint, body, headers in work[round_ :: max(1, rounds)]:  # requests between
                await call(app, "POST", endpoint, headers, body)
            started = time.perf_counter()
            gc.collect()
            pauses.append(1000 * (time.perf_counter() - started))
        return {
            "policy": policy,
            "first_ms": pauses[0],
            "others_median_ms": statistics.median(pauses[1:]),
            "others_max_ms": max(pauses[1:]),
            "tracked": len(gc.get_objects()),
            "frozen": gc.get_freeze_count(),
            "rss_mib": psutil.Process().memory_info().rss / 2**20,
            # What the caches grew by, per prompt asked for (its version compiled, its label
            # resolved, its answer kept), measured before the timed collections.
            "kib_per_cached_prompt": (cached - empty) / 1024 / len(work),
        }


async def turnover(path: Path, requests: int, among: int, seed: int) -> dict[str, Any]:
    """Every collection's pause while ``requests`` random prompts/get of ``among`` targets turn the
    caches over."""
    import random

    from registry.app import create_app

    work = targets(path, among)
    pick = random.Random(seed)  # noqa: S311 - a load's order, not a secret
    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    started = [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(1000 * (time.perf_counter() - started[0]))

    app = create_app()
    async with app.router.lifespan_context(app):
        gc.callbacks.append(timed)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(requests):
            endpoint, body, headers = work[pick.randrange(len(work))]
            status, answer = await call(app, "POST", endpoint, headers, body)
            if status != 200 or b'"result"' not in answer:
                raise RuntimeError(f"prompts/get answered {status}: {answer[:300]!r}")
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        gc.callbacks.remove(timed)
    found: dict[str, Any] = {"requests": requests, "cpu_us": 1e6 * cpu / requests,
                             "per_s": requests / wall}  # fmt: skip
    for generation, times in pauses.items():
        times.sort()
        found[f"gen{generation}"] = {
            "count": len(times),
            "median_ms": statistics.median(times) if times else 0.0,
            "p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))] if times else 0.0,
            "max_ms": times[-1] if times else 0.0,
            "total_ms": sum(times),
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", type=Path)
    parser.add_argument("--prompts", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--turnover", type=int, metavar="REQUESTS")
    parser.add_argument("--among", type=int, default=30_000, help="targets --turnover draws from")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--side", choices=("policy", "plain"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.turnover:
        from registry.db.attach import attached_database

        with attached_database() as url:  # the embedded server of REGISTRY_DATA_DIR
            os.environ["REGISTRY_DATABASE_URL"] = url.replace("+asyncpg", "")
            found = asyncio.run(turnover(args.targets, args.turnover, args.among, args.seed))
            print(json.dumps(found))
        return
    if args.side:
        found = asyncio.run(side(args.targets, args.prompts, args.rounds, args.side == "policy"))
        print(json.dumps(found))
        return
    from registry.db.attach import attached_database

    results: dict[str, list[dict[str, Any]]] = {"plain": [], "policy": []}
    with attached_database() as url:  # the embedded server, for both sides
        env = {**os.environ, "REGISTRY_DATABASE_URL": url.replace("+asyncpg", "")}
        for name in ("plain", "policy") * args.turns:
            ran = subprocess.run(  # noqa: S603 - this module, again
                [sys.executable, "-m", "bench.collector", str(args.targets), "--side", name,
                 "--prompts", str(args.prompts), "--rounds", str(args.rounds)],
                capture_output=True, text=True, check=False, env=env,
            )  # fmt: skip
            if ran.returncode:
                sys.exit(ran.stderr[-3000:])
            results[name].append(json.loads(ran.stdout.strip().splitlines()[-1]))
            print(name, results[name][-1], file=sys.stderr)
    print("| collector | first full collection ms | later ones: median ms | longest ms "
          "| tracked objects | frozen | RSS MiB | KiB per cached prompt |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        for run in runs:
            print(
                f"| {name} | {run['first_ms']:.1f} | {run['others_median_ms']:.1f} | "
                f"{run['others_max_ms']:.1f} | {run['tracked']:,} | {run['frozen']:,} | "
                f"{run['rss_mib']:.0f} | {run['kib_per_cached_prompt']:.1f} |"
            )


if __name__ == "__main__":
    main()
