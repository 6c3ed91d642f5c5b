"""Helpers of the live-server tests: writing a prompt over REST, MCP sessions with their GET
stream read in the background, and the REST change stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx

from tests.conftest import LiveServer

ACCEPT = "application/json, text/event-stream"
WAIT = 60  # seconds: a bound on every wait (for a failure to show), never a sleep


def write(server: LiveServer, slug: str, key: str, name: str, *, label: str = "production") -> None:
    body = {
        "name": name,
        "labels": [label],
        "description": name,
        "messages": [{"role": "user", "content": {"type": "text", "text": f"I am {name}"}}],
    }
    response = httpx.post(
        f"{server.url}/api/v1/tenants/{slug}/prompts",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text


async def initialize(
    client: httpx.AsyncClient, path: str, revision: str, headers: dict[str, str] | None = None
) -> dict[str, str]:
    """Open an MCP session (a session-era ``revision``) at ``path``; the headers of its calls."""
    init = await client.post(
        path,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": revision,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        headers=headers,
    )
    assert init.status_code == 200, init.text
    return {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": revision}


LIST_CHANGED = ("notifications/prompts/list_changed", "notifications/resources/list_changed")


class Stream:
    """One MCP session and its GET stream, read in the background into a queue of event ids."""

    def __init__(self, client: httpx.AsyncClient, path: str) -> None:
        self.client = client
        self.path = path
        self.events: asyncio.Queue[int] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def open(self, *, last_event_id: int | None = None) -> None:
        self.headers = {
            **await initialize(self.client, self.path, "2025-11-25"),
            "Accept": "text/event-stream",
        }
        if last_event_id is not None:
            self.headers["Last-Event-ID"] = str(last_event_id)
        self.task = asyncio.create_task(self._read())
        ready = asyncio.create_task(self.ready.wait())
        done, _ = await asyncio.wait(
            {ready, self.task}, timeout=WAIT, return_when=asyncio.FIRST_COMPLETED
        )
        ready.cancel()
        if ready not in done and self.task in done:  # it ended before its priming event: say why
            self.task.result()
            raise AssertionError(f"the stream at {self.path} ended before its priming event")
        assert done, f"no priming event on the stream at {self.path} within {WAIT} s"

    async def _read(self) -> None:
        async with self.client.stream("GET", self.path, headers=self.headers) as response:
            if response.status_code != 200:
                await response.aread()
                raise AssertionError(f"GET {self.path}: {response.status_code} {response.text}")
            data: str | None = None
            event_id: str | None = None
            told = -1  # a change is told once per list kind served (prompts, resources): one seq
            async for line in response.aiter_lines():
                if line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line == "" and event_id is not None:
                    if data:  # the priming event has empty data
                        assert json.loads(data)["method"] in LIST_CHANGED
                        if int(event_id) != told:
                            told = int(event_id)
                            self.events.put_nowait(told)
                    else:
                        self.ready.set()
                    data = event_id = None

    async def next(self) -> int:
        return await asyncio.wait_for(self.events.get(), WAIT)

    async def close(self) -> None:
        if self.task:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


@asynccontextmanager
async def streams(
    server: LiveServer, slug: str, key: str | None, count: int, label: str = ""
) -> AsyncIterator[list[Stream]]:
    headers = {"Accept": ACCEPT, **({"Authorization": f"Bearer {key}"} if key else {})}
    # No connection is reused: a request sent on an idle keep-alive connection can cross the
    # server's closing it (uvicorn closes them after 5 s idle, and opening hundreds of streams on a
    # loaded machine takes about that long), and that request then fails.
    limits = httpx.Limits(max_connections=count * 2 + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, timeout=60, limits=limits
    ) as client:
        opened = [
            Stream(client, f"/mcp/{slug}{'/' + label if label else ''}") for _ in range(count)
        ]
        try:
            try:
                for chunk in range(0, count, 50):
                    await asyncio.gather(*(s.open() for s in opened[chunk : chunk + 50]))
            except (AssertionError, httpx.HTTPError) as error:
                raise AssertionError(
                    f"{error!r}; the server said: {server.said()[-4000:]}"
                ) from error
            yield opened
        finally:
            await asyncio.gather(*(s.close() for s in opened))


async def seq_of(superuser: asyncpg.Connection, slug: str) -> int:
    return int(
        await superuser.fetchval(
            "SELECT s.seq FROM change_sequences s JOIN tenants t ON t.id = s.tenant_id "
            "WHERE t.slug = $1",
            slug,
        )
    )


class Events:
    """A change stream read in the background: (event, id, data) in arrival order."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, int, dict[str, Any]]] = asyncio.Queue()

    async def next(self, event: str | None = None) -> tuple[str, int, dict[str, Any]]:
        while True:
            found = await asyncio.wait_for(self.queue.get(), WAIT)
            if event is None or found[0] == event:
                return found


@asynccontextmanager
async def follow(
    server: LiveServer,
    key: str,
    headers: dict[str, str] | None = None,
    slug: str = "acme",
    **params: Any,
) -> AsyncIterator[Events]:
    """The REST change stream of tenant ``slug``, read in the background."""
    events = Events()

    async def read() -> None:
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(WAIT, read=None)) as client,
            client.stream(
                "GET",
                f"{server.url}/api/v1/tenants/{slug}/changes",
                params=params,
                headers={"Authorization": f"Bearer {key}", **(headers or {})},
            ) as response,
        ):
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line == "":
                    if "event" in fields:
                        await events.queue.put(
                            (fields["event"], int(fields["id"]), json.loads(fields["data"]))
                        )
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value

    task = asyncio.create_task(read())
    try:
        yield events
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def stream_tasks() -> int:
    """The tasks of EventStream running now (counted by their coroutines: the loop may run other
    tests' background tasks, which come and go)."""
    names = (getattr(t.get_coro(), "__qualname__", "") for t in asyncio.all_tasks())
    return sum(1 for name in names if name.startswith("EventStream."))
