"""The REST change stream against a live server: live changes as they commit, filters, replay from
Last-Event-ID or ?after=, a position the log cannot replay from reported as a gap, and a revoked key
ending the stream. Every wait is bounded and waits on an event, never on time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import OPERATOR_TOKEN, LiveServer, PgServer, module_server
from tests.streams import follow, write

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def live_server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    """One server for the module (each test has a tenant of its own)."""
    async with module_server(pg_server, template_db) as server:
        yield server


async def test_live_changes_filters_and_replay(live_server: LiveServer) -> None:
    keys = live_server.tenant("acme", roles=("reader", "publisher"))
    async with (
        follow(live_server, keys["reader"]) as everything,
        follow(live_server, keys["reader"], label="production", prompt="greet") as filtered,
    ):
        _, start, _ = await everything.next("ready")
        await filtered.next("ready")
        await asyncio.to_thread(write, live_server, "acme", keys["publisher"], "greet")
        await asyncio.to_thread(write, live_server, "acme", keys["publisher"], "other")
        seen = [await everything.next("change") for _ in range(4)]
        assert [(d["prompt"], d["label"], d["kind"]) for _, _, d in seen] == [
            ("greet", "latest", "label.move"),
            ("greet", "production", "label.move"),
            ("other", "latest", "label.move"),
            ("other", "production", "label.move"),
        ]
        assert [seq for _, seq, _ in seen] == sorted(seq for _, seq, _ in seen)
        assert all(seq > start for _, seq, _ in seen)
        kept = await filtered.next("change")
        assert (kept[2]["prompt"], kept[2]["label"]) == ("greet", "production")
        await asyncio.to_thread(write, live_server, "acme", keys["publisher"], "third")
        # the filtered stream skipped 'other' and 'third': its next event is a later keep or none
        assert filtered.queue.empty()

    # Reconnecting with the id of the first change replays the three after it, then goes live.
    first = seen[0][1]
    async with follow(live_server, keys["reader"], headers={"Last-Event-ID": str(first)}) as again:
        replayed = [await again.next("change") for _ in range(5)]
        assert [seq for _, seq, _ in replayed] == [s for _, s, _ in seen[1:]] + [
            seq for _, seq, _ in replayed[3:]
        ]
        assert [d["prompt"] for _, _, d in replayed[3:]] == ["third", "third"]
    async with follow(live_server, keys["reader"], after=0) as from_start:
        assert (await from_start.next("ready"))[1] == 0
        assert (await from_start.next("change"))[2]["prompt"] == "greet"


async def test_a_position_the_log_cannot_replay_is_a_gap(live_server: LiveServer) -> None:
    keys = live_server.tenant("gap", roles=("reader", "publisher"))
    await asyncio.to_thread(write, live_server, "gap", keys["publisher"], "greet")
    async with follow(live_server, keys["reader"], slug="gap", after=10_000) as ahead:
        event, seq, data = await ahead.next()
        assert event == "gap" and data["after"] == 10_000 and data["resume_after"] == seq
        assert (await ahead.next())[0] == "ready"


def test_bad_positions_and_missing_keys_are_refused(live_server: LiveServer) -> None:
    keys = live_server.tenant("refused", roles=("reader",))
    url = f"{live_server.url}/api/v1/tenants/refused/changes"
    bad = httpx.get(
        url, headers={"Authorization": f"Bearer {keys['reader']}", "Last-Event-ID": "x"}
    )
    assert bad.status_code == 422 and "Last-Event-ID" in bad.text
    negative = httpx.get(
        url, params={"after": -1}, headers={"Authorization": f"Bearer {keys['reader']}"}
    )
    assert negative.status_code == 422
    assert httpx.get(url).status_code == 401


async def test_a_revoked_key_ends_its_stream(live_server: LiveServer) -> None:
    keys = live_server.tenant("revoked", roles=("reader", "publisher"))
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    listed = (
        await asyncio.to_thread(
            httpx.get, f"{live_server.url}/api/v1/tenants/revoked/keys", headers=operator
        )
    ).json()
    reader_id = next(k["id"] for k in listed if k["role"] == "reader")
    async with follow(live_server, keys["reader"], slug="revoked") as stream:
        await stream.next("ready")
        revoked = await asyncio.to_thread(
            httpx.delete,
            f"{live_server.url}/api/v1/tenants/revoked/keys/{reader_id}",
            headers=operator,
        )
        assert revoked.status_code == 204, revoked.text
        _, _, data = await stream.next("denied")
        assert "revoked" in data["reason"]
