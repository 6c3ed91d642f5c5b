"""The HTTP server's share of a cached answer: the bare ASGI ceiling and the registry's cached
prompts/get of the peer set, each under uvicorn and under granian, in turns, in one run.

    python -m bench.servers [--duration 8] [--warmup 4] [--connections 16,64] [--workers 1]
                            [--rounds 2]

Needs wrk, granian (``pip install granian``; not a dependency of the registry) and a seeded database
(bench/seed). Both servers load the same factories (``registry.app:create_app`` on the seeded
database, ``bench.peers:bare_app``); each combination is measured ``--rounds`` times, alternating,
so that a drift of the shared machine shows as spread instead of as a difference. Prints a Markdown
table (median of the rounds, and the spread of requests/s).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import sys
from typing import Any

from bench.peers import PEER_PROMPTS, PEER_TENANT
from bench.run import server, uvicorn, wrk


def granian(factory: str, workers: int) -> list[str]:
    return [
        sys.executable, "-m", "granian", "--interface", "asgi", "--factory",
        "--workers", str(workers), "--log-level", "warning", "--host", "127.0.0.1", factory,
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/servers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--connections", default="16,64")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        sys.exit("bench/servers needs wrk: apt-get install wrk")
    if importlib.util.find_spec("granian") is None:
        sys.exit("bench/servers needs granian: pip install granian")
    from registry.db.attach import attached_database

    connections = [int(c) for c in args.connections.split(",")]
    rows: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    with attached_database() as url:
        apps = [
            ("registry", "registry.app:create_app", f"/mcp/{PEER_TENANT}", "/readyz", url),
            ("bare ASGI", "bench.peers:bare_app", "/mcp", "/mcp", None),
        ]
        for _ in range(args.rounds):
            for app, factory, path, ready, database in apps:
                for name, command in (("uvicorn", uvicorn), ("granian", granian)):
                    env = {"REGISTRY_DATABASE_URL": database} if database else {}
                    with server(command(factory, args.workers), env, ready) as running:
                        for c in connections:
                            figures = wrk(
                                running.url + path, c, args.duration, args.warmup,
                                "get", "1", str(PEER_PROMPTS), "peer",
                            )  # fmt: skip
                            rows.setdefault((app, name, c), []).append(figures)
                            print(app, name, c, figures, file=sys.stderr)
    print(table(rows, args.workers))


def table(rows: dict[tuple[str, str, int], list[dict[str, Any]]], workers: int) -> str:
    lines = [
        f"| app | HTTP server | connections | requests/s (median; spread) | p50 ms | p99 ms | "
        f"max ms | errors |  ({workers} worker(s))",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (app, name, c), runs in rows.items():
        rps = [r["rps"] for r in runs]

        def median(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return float(statistics.median(r[key] for r in runs))

        lines.append(
            f"| {app} | {name} | {c} | {statistics.median(rps):,.0f}; {min(rps):,.0f}-"
            f"{max(rps):,.0f} | {median('p50_ms'):.2f} | {median('p99_ms'):.2f} | "
            f"{median('max_ms'):.1f} | {sum(r['errors'] for r in runs)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
