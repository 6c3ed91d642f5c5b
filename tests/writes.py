"""A writer that keeps adding versions of one prompt through the REST API, in a thread, while a
test breaks something underneath (a failover, an upgrade); and what the database kept afterwards."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import asyncpg
import httpx

WAIT = 60  # seconds: a bound on every wait, never a sleep of its own


class Writer:
    """``async with Writer(server_url, "acme", "p", key) as writer:`` writes until the block ends;
    ``statuses`` holds every answer's status, ``acknowledged`` every version answered 201."""

    def __init__(self, url: str, slug: str, prompt: str, key: str) -> None:
        self.slug, self.prompt = slug, prompt
        self.endpoint = f"{url}/api/v1/tenants/{slug}/prompts/{prompt}/versions"
        self.auth = {"Authorization": f"Bearer {key}"}
        self.statuses: list[int] = []
        self.acknowledged: list[int] = []
        self.unexpected: list[str] = []  # the answers other than 201 and 503, for the message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        with httpx.Client(timeout=60) as client:
            count = 0
            while not self._stop.is_set():
                count += 1
                text = {
                    "messages": [{"role": "user", "content": {"type": "text", "text": str(count)}}]
                }
                reply = client.post(self.endpoint, json=text, headers=self.auth)
                self.statuses.append(reply.status_code)
                if reply.status_code not in (201, 503):
                    self.unexpected.append(f"{reply.status_code} {reply.text[:500]}")
                if reply.status_code == 201:
                    self.acknowledged.append(int(reply.json()["version"]))

    async def resumed(self, more: int) -> None:
        """Wait (bounded) until ``more`` writes are acknowledged beyond those so far."""
        wanted = len(self.acknowledged) + more
        deadline = time.monotonic() + WAIT
        while len(self.acknowledged) < wanted:
            assert time.monotonic() < deadline, f"writes never resumed: {self.statuses[-5:]}"
            await asyncio.sleep(0.05)

    async def lost_nothing(self, connection: asyncpg.Connection, stream: Any) -> None:
        """After the switch, on the database now written to: every answer was 201 or 503 (never
        500), every acknowledged version is there, and ``stream`` (a tests.streams.Stream) was told
        of the tenant's last change (its listener moved too)."""
        final = await tenant_sequence(connection, self.slug)
        kept = await versions_kept(connection, self.prompt)
        while await asyncio.wait_for(stream.next(), WAIT) < final:
            pass
        assert set(self.statuses) <= {201, 503}, self.unexpected[:3]
        assert set(self.acknowledged) <= kept, sorted(set(self.acknowledged) - kept)

    async def __aenter__(self) -> Writer:
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join)


async def tenant_with_prompt(server: Any, slug: str, prompt: str) -> str:
    """A tenant on ``server`` (a tests.conftest.LiveServer) with one prompt for a Writer; its
    publisher key."""
    key = str((await asyncio.to_thread(server.tenant, slug))["publisher"])
    body = {
        "name": prompt,
        "messages": [{"role": "user", "content": {"type": "text", "text": "0"}}],
    }
    created = await asyncio.to_thread(
        httpx.post, f"{server.url}/api/v1/tenants/{slug}/prompts", json=body,
        headers={"Authorization": f"Bearer {key}"},
    )  # fmt: skip
    assert created.status_code == 201, created.text
    return key


async def tenant_sequence(connection: asyncpg.Connection, slug: str) -> int:
    """The tenant's newest change sequence: what its streams' last event must reach."""
    return int(
        await connection.fetchval(
            "SELECT s.seq FROM change_sequences s JOIN tenants t ON t.id = s.tenant_id "
            "WHERE t.slug = $1",
            slug,
        )
    )


async def versions_kept(connection: asyncpg.Connection, prompt: str) -> set[int]:
    return set(
        await connection.fetchval(
            "SELECT array_agg(v.version) FROM prompt_versions v "
            "JOIN prompts p ON p.id = v.prompt_id WHERE p.name = $1",
            prompt,
        )
    )
