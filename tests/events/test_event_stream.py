"""EventStream, the answer every SSE stream is sent as: driven through its ASGI interface with a
real hub, as uvicorn drives it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, MutableMapping
from typing import Any

import pytest

from registry.events.hub import Hub, Subscription
from registry.events.streams import CONNECTION_LOST, ConnectionLost, EventStream
from tests.streams import stream_tasks


def _events(subscription: Subscription, ended: list[str]) -> AsyncGenerator[bytes]:
    async def events() -> AsyncGenerator[bytes]:
        try:
            with subscription:
                yield b"data: hello\n\n"
                while not subscription.closed:
                    seq = await subscription.next(30)
                    if seq is not None:
                        yield f"id: {seq}\n\n".encode()
                yield b"data: bye\n\n"
        finally:
            ended.append("events")

    return events()


@pytest.mark.parametrize("told", [False, True], ids=["noticed by a task", "told by the server"])
async def test_a_client_that_goes_away_ends_its_stream_and_gives_back_its_slot(told: bool) -> None:
    """Under `registry serve`'s protocol the server tells the stream (CONNECTION_LOST); under
    another, a task of the stream's waits to receive the disconnect."""
    hub, tenant = Hub(), uuid.uuid4()
    subscription = hub.subscribe(tenant, "production", seen=0)
    ended: list[str] = []
    sent: list[MutableMapping[str, Any]] = []
    started, delivered, gone = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)
        body = message.get("body", b"")
        if body.startswith(b"data: hello"):  # the subscription is in the hub by now
            started.set()
        if body.startswith(b"id: 1"):
            delivered.set()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    lost = ConnectionLost()
    scope: dict[str, Any] = {"type": "http", "headers": [(b"accept", b"text/event-stream")]}
    if told:
        scope[CONNECTION_LOST] = lost
    stream = EventStream(
        _events(subscription, ended), subscription, release=lambda: ended.append("slot")
    )
    answering = asyncio.create_task(stream(scope, receive, send))
    await asyncio.wait_for(started.wait(), 5)
    assert stream_tasks() == (1 if told else 2)  # the stream's, and a watcher
    assert scope["headers"] == []  # read before the stream began: an open stream keeps none
    assert hub.publish(tenant, 1, {"production"}) == 1
    await asyncio.wait_for(delivered.wait(), 5)
    if told:  # the client disconnects while the stream waits for the next change
        lost.lose()
    else:
        gone.set()
    await asyncio.wait_for(answering, 5)
    assert lost.callback is None  # the ended stream asks to be told nothing more

    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 200
    assert (b"content-type", b"text/event-stream; charset=utf-8") in sent[0]["headers"]
    assert [m.get("body") for m in sent[1:]] == [
        b"data: hello\n\n",
        b"id: 1\n\n",
        b"data: bye\n\n",
        b"",
    ]
    assert ended == ["events", "slot"]
    assert not hub.watching(tenant)


async def test_a_connection_lost_before_its_stream_began_ends_the_stream_at_once() -> None:
    hub, tenant = Hub(), uuid.uuid4()
    subscription = hub.subscribe(tenant, None, seen=0)
    ended: list[str] = []
    lost = ConnectionLost()
    lost.lose()  # gone between the request and the stream's first byte

    async def send(message: MutableMapping[str, Any]) -> None:
        pass

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # never: the server told the stream instead
        return {}

    stream = EventStream(
        _events(subscription, ended), subscription, release=lambda: ended.append("slot")
    )
    await asyncio.wait_for(stream({"type": "http", CONNECTION_LOST: lost}, receive, send), 5)
    assert ended == ["events", "slot"]
    assert not hub.watching(tenant)


async def test_a_stream_whose_send_fails_still_leaves_the_hub_and_gives_back_its_slot() -> None:
    hub, tenant = Hub(), uuid.uuid4()
    subscription = hub.subscribe(tenant, None, seen=0)
    ended: list[str] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        if message.get("body"):
            raise OSError("the client is gone")  # an ASGI 2.4 server says so on send

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # never: only the failed send ends this stream
        return {}

    stream = EventStream(
        _events(subscription, ended), subscription, release=lambda: ended.append("slot")
    )
    try:
        await asyncio.wait_for(stream({"type": "http"}, receive, send), 5)
    except OSError:
        pass
    else:
        raise AssertionError("the failed send was swallowed")
    assert ended == ["events", "slot"]
    assert not hub.watching(tenant)


async def test_streams_share_their_head_until_one_is_changed() -> None:
    hub, tenant = Hub(), uuid.uuid4()
    subscriptions = [hub.subscribe(tenant, None, 0) for _ in range(2)]
    streams = [EventStream(_events(s, []), s) for s in subscriptions]
    streams[0].headers["Access-Control-Allow-Origin"] = "https://app.example"  # as CORS does
    heads = []
    for subscription, stream in zip(subscriptions, streams, strict=True):
        sent: list[MutableMapping[str, Any]] = []

        async def send(
            message: MutableMapping[str, Any],
            sent: list[MutableMapping[str, Any]] = sent,
            subscription: Subscription = subscription,
        ) -> None:
            sent.append(message)
            if message.get("body") == b"data: hello\n\n":
                subscription.close()

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()  # never: the stream ends when its subscription closes
            return {}

        await asyncio.wait_for(stream({"type": "http"}, receive, send), 5)
        heads.append(list(sent[0]["headers"]))
    assert (b"access-control-allow-origin", b"https://app.example") in heads[0]
    assert heads[1] == [
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
        (b"content-type", b"text/event-stream; charset=utf-8"),
    ]
    assert heads[0][:3] == heads[1]
