"""A library's publish reaching its followers' open streams: one library followed by many tenants,
many streams open over them, and a new version on the library's label, timed on every stream.

    python -m bench.library_fanout [--subscribers 1000] [--streams 5000] [--rounds 3] [--workers 2]

Starts ``registry serve`` on a fresh embedded database of its own (a temporary REGISTRY_DATA_DIR),
makes a library tenant and ``--subscribers`` tenants (public reads) that each accept its offer to
every tenant and follow its ``production`` label, opens ``--streams`` ``subscriptions/listen``
streams (MCP 2026-07-28) spread evenly over the subscribers (the kernel spreads the connections over
the workers), then, ``--rounds`` times, writes one new version of the library's prompt on
``production`` and times each stream's ``notifications/prompts/list_changed`` from the moment the
write was sent (the write's own commit is inside the figure: an upper bound). A stream that hears
nothing within 15 s missed it. After each round, a subscriber's ``prompts/get`` of the library's
prompt must be the version just written (a stale one is counted). Prints a JSON result.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.fanout import PROBE, Checker, Stream, _get_request, _open, percentiles
from bench.run import server

OPERATOR = "bench-library-operator"
LIBRARY = "bench-library"
WAIT_SECONDS = 15.0


async def _each(work: list[Any], limit: int = 16) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def bounded(one: Any) -> Any:
        async with gate:
            return await one

    return await asyncio.gather(*(bounded(w) for w in work))


async def _tenant(api: httpx.AsyncClient, slug: str, role: str) -> str:
    made = await api.post("/api/v1/tenants", json={"slug": slug, "public_read": True})
    made.raise_for_status()
    key = await api.post(f"/api/v1/tenants/{slug}/keys", json={"role": role})
    key.raise_for_status()
    return str(key.json()["secret"])


def _version(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "labels": ["production"]}  # fmt: skip


async def prepare(url: str, subscribers: list[str]) -> str:
    """The library (its prompt on production, offered to every tenant) and its followers; the
    library's publisher key."""
    operator = {"Authorization": f"Bearer {OPERATOR}"}
    async with httpx.AsyncClient(base_url=url, headers=operator, timeout=120) as api:
        library_key = await _tenant(api, LIBRARY, "admin")
        as_library = {"Authorization": f"Bearer {library_key}"}
        made = await api.post(f"/api/v1/tenants/{LIBRARY}/prompts", headers=as_library,
                              json={"name": PROBE, **_version("round 0")})  # fmt: skip
        made.raise_for_status()
        offered = await api.post(f"/api/v1/tenants/{LIBRARY}/subscribers", headers=as_library,
                                 json={"tenant": "*", "label": "production"})  # fmt: skip
        offered.raise_for_status()
        keys = await _each([_tenant(api, slug, "admin") for slug in subscribers])

        async def follow(slug: str, key: str) -> None:
            answer = await api.post(f"/api/v1/tenants/{slug}/libraries",
                                    headers={"Authorization": f"Bearer {key}"},
                                    json={"library": LIBRARY, "label": "production"})  # fmt: skip
            answer.raise_for_status()

        await _each([follow(slug, key) for slug, key in zip(subscribers, keys, strict=True)])
    return library_key


async def measure(
    url: str, library_key: str, subscribers: list[str], streams: int, rounds: int
) -> dict[str, Any]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    ready = asyncio.Semaphore(64)
    opened_at = time.monotonic()
    opened: list[Stream] = await asyncio.gather(
        *(_open(host, port, subscribers[i % len(subscribers)], ready) for i in range(streams))
    )
    open_seconds = time.monotonic() - opened_at
    latencies: list[float] = []
    write_ms: list[float] = []
    missed = stale = 0
    async with httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {library_key}"}, timeout=60
    ) as api:
        for round_number in range(1, rounds + 1):
            await asyncio.sleep(1)  # every stream settled
            for stream in opened:
                stream.woke.clear()
                stream.heard.clear()
            text = f"round {round_number}"
            sent = time.time()
            written = await api.post(
                f"/api/v1/tenants/{LIBRARY}/prompts/{PROBE}/versions", json=_version(text)
            )
            write_ms.append((time.time() - sent) * 1000)
            written.raise_for_status()
            deadline = time.monotonic() + WAIT_SECONDS
            for stream in opened:
                remaining = deadline - time.monotonic()
                if not stream.woke.is_set() and remaining > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stream.woke.wait(), remaining)
            for stream in opened:
                if stream.heard:
                    latencies.append((stream.heard[0] - sent) * 1000)
                else:
                    missed += 1
            for slug in subscribers[:: max(1, len(subscribers) // 20)]:  # a sample, every worker
                reader, writer = await asyncio.open_connection(host, port)
                try:
                    got = await Checker(reader, writer).probe(_get_request(host, port, slug))
                    stale += got != text
                finally:
                    writer.close()
    for stream in opened:
        stream.writer.close()
    return {
        "subscribers": len(subscribers),
        "streams": streams,
        "rounds": rounds,
        "open_seconds": round(open_seconds, 2),
        "from_send": percentiles(latencies),
        "missed": missed,
        "stale_reads": stale,
        "write_ms": [round(ms, 1) for ms in write_ms],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="bench/library_fanout", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    options = parser.parse_args(argv)
    subscribers = [f"bench-sub-{i:05d}" for i in range(options.subscribers)]
    with tempfile.TemporaryDirectory() as data:
        env = {"REGISTRY_DATA_DIR": data, "REGISTRY_OPERATOR_TOKEN": OPERATOR,
               "REGISTRY_STREAMS_PER_CALLER": "100000",
               "REGISTRY_STREAMS_PER_TENANT": "100000"}  # fmt: skip
        command = [sys.executable, "-m", "registry", "serve", "--workers", str(options.workers)]
        with server(command, env, "/readyz", timeout=300) as running:
            started = time.monotonic()
            key = asyncio.run(prepare(running.url, subscribers))
            setup = round(time.monotonic() - started, 1)
            result = asyncio.run(
                measure(running.url, key, subscribers, options.streams, options.rounds)
            )
    print(json.dumps({"setup_seconds": setup, **result}, indent=2))


if __name__ == "__main__":
    main()
