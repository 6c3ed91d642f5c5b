"""The hub alone: coalescing, bounded state per subscriber, labels, closing."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from registry.events.hub import Hub


async def test_bursts_coalesce_and_slow_readers_cost_nothing() -> None:
    hub = Hub()
    tenant = uuid.uuid4()
    with (
        hub.subscribe(tenant, "production", seen=5) as slow,
        hub.subscribe(tenant, "production", seen=5) as fast,
    ):
        for seq in range(6, 1006):  # a thousand changes while `slow` reads nothing
            assert hub.publish(tenant, seq, {"production"}) == 2
        assert await fast.next(1) == 1005
        assert await slow.next(1) == 1005  # one pending number, not a queue of a thousand
        assert await slow.next(0.01) is None
        hub.publish(tenant, 1005)  # nothing new
        assert await fast.next(0.01) is None


async def test_labels_and_tenants_are_kept_apart() -> None:
    hub = Hub()
    a, b = uuid.uuid4(), uuid.uuid4()
    with (
        hub.subscribe(a, "production", 0) as prod,
        hub.subscribe(a, "staging", 0) as staging,
        hub.subscribe(b, "production", 0) as other,
    ):
        assert hub.publish(a, 1, {"staging"}) == 1
        assert await staging.next(1) == 1
        assert await prod.next(0.01) is None
        assert hub.publish(a, 2, None) == 2  # a change of every label
        assert await prod.next(1) == 2
        assert await other.next(0.01) is None
    assert hub.tenants() == []


async def test_close_ends_every_subscription() -> None:
    hub = Hub()
    with hub.subscribe(uuid.uuid4(), "production", 0) as subscription:
        waiter = asyncio.create_task(subscription.next(30))
        await asyncio.sleep(0)
        hub.close()
        assert await asyncio.wait_for(waiter, 1) is None
        assert subscription.closed


async def test_long_waits_share_one_clock_and_short_ones_have_a_timer_each() -> None:
    hub, tenant, tick = Hub(tick_seconds=0.02), uuid.uuid4(), 0.02
    loop = asyncio.get_running_loop()
    with contextlib.ExitStack() as opened:
        idle = [opened.enter_context(hub.subscribe(tenant, "production", 0)) for _ in range(50)]
        told = opened.enter_context(hub.subscribe(tenant, "staging", 0))
        expiring = opened.enter_context(hub.subscribe(tenant, "production", 0))
        started = loop.time()
        waits = [asyncio.create_task(s.next(5 * tick)) for s in idle]
        woken = asyncio.create_task(told.next(30))
        short = asyncio.create_task(expiring.next(1.5 * tick))  # less than two ticks: a timer
        await asyncio.sleep(0)  # every wait has begun
        assert hub._clock is not None  # one handle on the loop for all of them
        assert all(s._due is not None for s in [*idle, told]) and expiring._due is None

        hub.publish(tenant, 1, {"staging"})  # a change ends a wait before its time
        assert await woken == 1 and told._due is None
        assert await short is None
        assert await asyncio.gather(*waits) == [None] * len(idle)
        assert loop.time() - started >= 4 * tick  # never sooner than one tick early
        assert hub._clock is None  # nothing left to wait for: the clock stops

    unregistered = hub.subscribe(tenant, "production", 0)  # not entered: the clock would miss it
    assert await unregistered.next(3 * tick) is None
