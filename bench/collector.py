"""Full-collection pauses of one worker with warm caches, with the registry's collector policy
(``registry/collector.py``) and without it: the app in this process, its caches filled by prompts/get
of many distinct prompts (the targets file bench/run writes), then full collections timed while
requests go on between them.

    REGISTRY_DATA_DIR=... python -m bench.collector TARGETS [--prompts 10000] [--rounds 8]

Each side runs in a process of its own (this one starts both, in turns, ``--turns`` times), so
neither inherits the other's heap; printed: per side, the first full collection after warming (it
walks everything either way), the median and the longest of the others, the objects the collector
tracks, the resident size at the end, and what the caches grew by per prompt asked for.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", type=Path)
    parser.add_argument("--prompts", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--side", choices=("policy", "plain"), help=argparse.SUPPRESS)
    args = parser.parse_args()
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
