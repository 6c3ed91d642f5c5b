"""The one body reader: whole bodies within a limit, a stalled one refused by the watchdog, and a
cancellation that is not the watchdog's left alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from registry.bodies import BodyReader


def chunks(*parts: bytes, stall: asyncio.Event | None = None) -> Any:
    messages = [{"type": "http.request", "body": p, "more_body": True} for p in parts]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        if stall is not None:
            await stall.wait()
        return {"type": "http.request", "body": b"", "more_body": False}

    return receive


async def test_a_body_in_chunks_is_read_whole() -> None:
    body = await BodyReader(5).read(chunks(b"ab", b"cd"), 10)
    assert body.data == b"abcd" and not body.disconnected


async def test_a_body_past_the_limit_is_not_kept() -> None:
    assert (await BodyReader(5).read(chunks(b"abc", b"def"), 5)).data is None


async def test_a_stalled_body_times_out_and_the_others_do_not() -> None:
    reader = BodyReader(0.2, tick=0.05)
    never, later = asyncio.Event(), asyncio.Event()
    slow = asyncio.create_task(reader.read(chunks(b"x", stall=never), 10))
    fine = asyncio.create_task(reader.read(chunks(b"y", stall=later), 10))
    await asyncio.sleep(0)
    later.set()  # this one completes before its deadline
    assert (await fine).data == b"y"
    with pytest.raises(TimeoutError):
        await slow
    assert not reader._due and not reader._expired


async def test_a_cancellation_that_is_not_the_watchdogs_stays_a_cancellation() -> None:
    reader = BodyReader(30)
    never = asyncio.Event()
    task = asyncio.create_task(reader.read(chunks(stall=never), 10))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not reader._due
