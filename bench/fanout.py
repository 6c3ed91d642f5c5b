"""Workload (d): list_changed fan-out to many open streams.

Opens N ``subscriptions/listen`` streams (MCP 2026-07-28) spread evenly over a set of tenants (the
kernel spreads the connections over the server's workers), then writes one new version labelled
``production`` to each tenant through the admin API, all at once (from a process of its own:
``Publisher``), and times each stream's
``notifications/prompts/list_changed`` from the moment its tenant's write was sent (so the write's own
commit is inside the figure: an upper bound), and from the commit itself: the moment the change-log
row was written, which happens inside the commit (a deferred trigger numbers and stamps it; read from
the database after each round; same machine, same clock). A stream that hears nothing within the
timeout missed it.

Caches are warm when each burst comes: before every round, keep-alive connections (the kernel
spreads them over the workers; more are opened until each worker holds one, as counted) ask every
tenant's probe a few times, so each worker keeps its answer and sends it from the request's bytes.
After the burst, each of those connections asks again: every answer must be the version just
written (a stale one is counted), which is what "no stale answer after a publish" means on every
worker.

The client is plain asyncio over raw sockets: one small task per stream, no HTTP library in the way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx

from registry.db.connect import asyncpg_arguments

LISTEN = {
    "jsonrpc": "2.0",
    "id": "fanout",
    "method": "subscriptions/listen",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench-fanout", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "notifications": {"promptsListChanged": True},
    },
}
PROBE = "fanout-probe"
CHECKERS = 8  # keep-alive connections that ask for the probe before and after each burst, at least
CHECKERS_MOST = 64  # opened until every worker holds one (the kernel chooses), at most this many
WARM = 3  # asks per connection and tenant before a burst: kept the second time, then sent again


def _get_request(host: str, port: int, tenant: str) -> bytes:
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "prompts/get",
        "params": {"_meta": LISTEN["params"]["_meta"], "name": PROBE},  # type: ignore[index]
    }).encode()  # fmt: skip
    return (
        f"POST /mcp/{tenant} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: prompts/get\r\nMcp-Name: {PROBE}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


class Checker:
    """One keep-alive connection asking for the probe of a tenant: the text it is served."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def probe(self, request: bytes) -> str:
        self.writer.write(request)
        status = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        answer = json.loads(await self.reader.readexactly(length))
        if b" 200 " not in status or "result" not in answer:
            raise RuntimeError(f"prompts/get of the probe: {status!r} {answer}")
        return str(answer["result"]["messages"][0]["content"]["text"])


@dataclass
class Stream:
    tenant: str
    writer: asyncio.StreamWriter
    heard: list[float] = field(default_factory=list)
    woke: asyncio.Event = field(default_factory=asyncio.Event)


async def _open(host: str, port: int, tenant: str, ready: asyncio.Semaphore) -> Stream:
    async with ready:  # a bounded number of handshakes at once
        reader, writer = await asyncio.open_connection(host, port)
        body = json.dumps(LISTEN).encode()
        writer.write(
            f"POST /mcp/{tenant} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"listen on {tenant} answered {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass  # headers
        stream = Stream(tenant, writer)
        first = await _next_event(reader)
        if "notifications/subscriptions/acknowledged" not in first:
            raise RuntimeError(f"listen on {tenant}: no acknowledgement but {first[:200]!r}")
    asyncio.get_running_loop().create_task(_read(reader, stream))
    return stream


async def _next_event(reader: asyncio.StreamReader) -> str:
    """The data of the next SSE event (chunked framing lines and comments are skipped)."""
    while True:
        line = await reader.readline()
        if not line:
            raise ConnectionError("stream ended")
        if line.startswith(b"data: "):
            return line[6:].decode()


MARK = b"notifications/prompts/list_changed"


async def _read(reader: asyncio.StreamReader, stream: Stream) -> None:
    """Stamps each list_changed as its bytes arrive: one read per event rather than a readline per
    line of the chunked framing, so that the client's own work (5,000 streams share one process and
    the server's two cores) weighs as little as it can on the times it reports. The tail of each
    read is kept, in case the marker spans two reads."""
    tail = b""
    try:
        while chunk := await reader.read(65536):
            received = time.time()
            data = tail + chunk
            if MARK in data:
                stream.heard.append(received)
                stream.woke.set()
                tail = b""
            else:
                tail = data[-(len(MARK) - 1) :]
    except (ConnectionError, OSError):
        pass


async def prepare(api: httpx.AsyncClient, tenants: list[str]) -> None:
    """The fan-out tenants (public-read) and one probe prompt in each, created once."""
    for slug in tenants:
        created = await api.post("/api/v1/tenants", json={"slug": slug, "public_read": True})
        if created.status_code not in (201, 409):
            raise RuntimeError(f"creating tenant {slug}: {created.status_code} {created.text}")
        probe = await api.post(
            f"/api/v1/tenants/{slug}/prompts",
            json={
                "name": PROBE,
                "labels": ["production"],
                "messages": [{"role": "user", "content": {"type": "text", "text": "probe 0"}}],
            },
        )
        if probe.status_code not in (201, 409):
            raise RuntimeError(f"creating {PROBE} in {slug}: {probe.status_code} {probe.text}")


class Publisher:
    """Each burst's writes, sent from a process of its own with its own client (a publisher is not
    the process its subscribers read in: here, one reading 5,000 streams would delay the writes it
    sends and so the figure timed from them); its connections are kept from one burst to the next."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        spawn = multiprocessing.get_context("spawn")
        self._process = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=spawn)
        self._process.submit(_publisher_start, url, headers).result()  # started before any burst

    async def burst(self, tenants: list[str], round_number: int) -> list[Written]:
        loop = asyncio.get_running_loop()
        written = await loop.run_in_executor(self._process, _publish, tenants, round_number)
        for one in written:
            if one.status != 201:
                raise RuntimeError(f"write to {one.slug}: {one.status} {one.answer}")
        return written

    def close(self) -> None:
        self._process.shutdown()


@dataclass(frozen=True)
class Written:
    """One write of a burst: when it was sent (Unix time), how long its answer took, the text it
    wrote (every worker must serve it after the burst)."""

    slug: str
    sent: float
    ms: float
    text: str
    status: int
    answer: str


_client: httpx.Client | None = None
_threads: concurrent.futures.ThreadPoolExecutor | None = None


def _publisher_start(url: str, headers: dict[str, str]) -> None:
    global _client, _threads
    _client = httpx.Client(base_url=url, headers=headers, timeout=60)
    _threads = concurrent.futures.ThreadPoolExecutor(max_workers=64)


def _publish(tenants: list[str], round_number: int) -> list[Written]:
    """One new version of the probe in each tenant, all at once, labelled production."""
    assert _threads is not None
    return list(_threads.map(lambda slug: _write(slug, round_number), tenants))


def _write(slug: str, round_number: int) -> Written:
    assert _client is not None
    sent = time.time()
    text = f"probe {time.time_ns()}"
    response = _client.post(
        f"/api/v1/tenants/{slug}/prompts/{PROBE}/versions",
        json={
            "labels": ["production"],
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "commit_message": f"fan-out round {round_number}",
        },
    )
    ms = (time.time() - sent) * 1000
    return Written(slug, sent, ms, text, response.status_code, response.text[:300])


WRITE_ROUTE = "POST /api/v1/tenants/{tenant}/prompts/{name}/versions"
_WRITE_TIMES = re.compile(
    r'^registry_request_seconds_(sum|count)\{kind="rest",name="'
    + re.escape(WRITE_ROUTE)
    + r'"\} (\S+)$',
    re.MULTILINE,
)


def write_times(metrics_text: str) -> tuple[float, float]:
    """The seconds the server spent in version writes and how many it answered (every worker)."""
    found = dict(_WRITE_TIMES.findall(metrics_text))
    return float(found.get("sum", 0.0)), float(found.get("count", 0.0))


def percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    if not ordered:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 2),
        "max_ms": round(ordered[-1], 2),
    }


async def commit_times(database_url: str, tenants: list[str]) -> dict[str, float]:
    """When each tenant's latest change was written (inside its commit), as a Unix time."""
    connection = await asyncpg.connect(**asyncpg_arguments(database_url))
    try:
        rows = await connection.fetch(
            "SELECT t.slug, extract(epoch FROM max(c.created_at))::float8 AS at"
            " FROM change_log c JOIN tenants t ON t.id = c.tenant_id"
            " WHERE t.slug = ANY($1::text[]) GROUP BY t.slug",
            tenants,
        )
    finally:
        await connection.close()
    return {row["slug"]: row["at"] for row in rows}


async def run(
    url: str,
    operator_token: str,
    database_url: str,
    streams: int,
    tenants: list[str],
    *,
    rounds: int = 3,
    wait_seconds: float = 15.0,
    snapshot: Callable[[], Any] | None = None,
    metrics: Callable[[], str] | None = None,
) -> dict[str, Any]:
    """``snapshot`` (the server's memory and connections) is taken just before the streams open and
    again once they all are; both are kept in the result. ``metrics`` (a scrape of the server's
    /metrics), read before the first burst and after the last, gives the writes' mean time inside
    the server (from the request's arrival to its answer), which the time from the request does not
    separate from this process's own delays."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    headers = {"Authorization": f"Bearer {operator_token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as api:
        await prepare(api, tenants)
    await asyncio.sleep(0.5)
    before = snapshot() if snapshot is not None else None
    publisher = Publisher(url, headers)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(publisher.close)
        ready = asyncio.Semaphore(64)
        opened_at = time.monotonic()
        opened = await asyncio.gather(
            *(_open(host, port, tenants[i % len(tenants)], ready) for i in range(streams))
        )
        open_seconds = time.monotonic() - opened_at
        await asyncio.sleep(1)
        reading = snapshot() if snapshot is not None else None
        checkers, checked = await _checkers(host, port, reading, snapshot)
        requests = {slug: _get_request(host, port, slug) for slug in tenants}
        stale = 0
        served_before = write_times(metrics()) if metrics is not None else None
        latencies: list[float] = []  # from the commit
        from_send: list[float] = []
        write_ms: list[float] = []
        missed = 0
        for round_number in range(1, rounds + 1):
            for slug in tenants:  # warm: every worker sends the probe from the request's bytes
                for checker in checkers:
                    for _ in range(WARM):
                        await checker.probe(requests[slug])
            await asyncio.sleep(0.5)  # let every stream settle before the burst
            for stream in opened:
                stream.woke.clear()
                stream.heard.clear()
            written = await publisher.burst(tenants, round_number)
            sent = {one.slug: one.sent for one in written}
            texts = {one.slug: one.text for one in written}
            write_ms += [one.ms for one in written]
            deadline = time.monotonic() + wait_seconds
            for stream in opened:
                remaining = deadline - time.monotonic()
                if not stream.woke.is_set() and remaining > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stream.woke.wait(), remaining)
            committed = await commit_times(database_url, tenants)
            for stream in opened:
                if stream.heard:
                    latencies.append((stream.heard[0] - committed[stream.tenant]) * 1000)
                    from_send.append((stream.heard[0] - sent[stream.tenant]) * 1000)
                else:
                    missed += 1
            for slug in tenants:  # the next prompts/get, on every connection: the new version
                for checker in checkers:
                    stale += await checker.probe(requests[slug]) != texts[slug]
        served_after = write_times(metrics()) if metrics is not None else None
        for stream in opened:
            stream.writer.close()
        for checker in checkers:
            checker.writer.close()
    in_server = None
    if served_before is not None and served_after is not None:
        count = served_after[1] - served_before[1]
        in_server = round(1000 * (served_after[0] - served_before[0]) / count, 2) if count else None
    return {
        "streams": streams,
        "tenants": len(tenants),
        "rounds": rounds,
        "open_seconds": round(open_seconds, 2),
        **percentiles(latencies),
        "from_send": percentiles(from_send),
        "missed": missed,
        "write_p50_ms": round(statistics.median(write_ms), 2) if write_ms else None,
        "write_mean_ms": round(statistics.fmean(write_ms), 2) if write_ms else None,
        "write_in_server_mean_ms": in_server,
        "before_open": before,
        "while_open": reading,
        "checked": {
            "connections": len(checkers),
            "stale": stale,
            "per_worker": _opened(reading, checked),
        },
    }


async def _checkers(
    host: str, port: int, before: Any, snapshot: Callable[[], Any] | None
) -> tuple[list[Checker], Any]:
    """CHECKERS keep-alive connections, and more until every worker holds one of them (as the
    server's snapshots count them), at most CHECKERS_MOST; the last snapshot."""
    checkers: list[Checker] = []
    checked = None
    while len(checkers) < CHECKERS_MOST:
        for _ in range(CHECKERS if not checkers else 2):
            checkers.append(Checker(*await asyncio.open_connection(host, port)))
        await asyncio.sleep(0.2)  # accepted by a worker
        if snapshot is None:
            break
        checked = snapshot()
        if all(n > 0 for n in (_opened(before, checked) or {}).values()):
            break
    return checkers, checked


def _opened(before: Any, after: Any) -> dict[str, int] | None:
    """The connections each worker gained between two snapshots."""
    if before is None or after is None:
        return None
    return {pid: after[pid]["connections"] - before[pid]["connections"] for pid in after}
