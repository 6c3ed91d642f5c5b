"""The Events extension's webhook delivery (``events/subscribe``, ``events/unsubscribe``), received
by an endpoint written from the draft (tests/mcp/events_client.py) that verifies every POST with the
``standardwebhooks`` package: the endpoint's verification first, then every event of a burst,
signed, in order, none lost (checked against a poll from the same cursor, an independent path) and
none repeated but where a try failed; retries, abandoned events, a rotation signed with both
secrets, the delivery status, unsubscribing, a revoked key's ``terminated``, a SIGKILL of every
worker mid-delivery, and the draft's refusals by code. And a poll from a cursor through a burst of
500 events with a worker SIGKILLed in the middle."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    SIMPLE,
    Api,
    LiveServer,
    PgServer,
    auth,
    module_server,
    start_server,
    stop_server,
)
from tests.mcp.events_client import EventsClient, EventsError, Subscription, WebhookReceiver
from tests.mcp.test_stateless import Stateless

pytestmark = pytest.mark.slow
ENV = {
    "REGISTRY_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver is on this machine (and plain http)
    "REGISTRY_WEBHOOK_RETRY_SECONDS": "0.05",
    "REGISTRY_WEBHOOK_POLL_SECONDS": "0.2",
    "REGISTRY_WEBHOOK_TIMEOUT_SECONDS": "1",
}
SECRET_32 = "whsec_" + "QUFB" * 11  # 33 bytes of "A"


@pytest.fixture(scope="module")
async def server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    async with module_server(pg_server, template_db, workers=2, **ENV) as made:
        yield made


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    made = WebhookReceiver()
    yield made
    made.close()


class Hooks:
    """One tenant of the live server, its keys, and an events client per key."""

    def __init__(
        self, server: LiveServer, slug: str, client: httpx.AsyncClient, public: bool = False
    ) -> None:
        self.server, self.slug, self.client = server, slug, client
        self.keys = server.tenant(slug, roles=("reader", "publisher"), public_read=public)

    def events(self, role: str | None = "reader") -> EventsClient:
        headers = auth(f"Bearer {self.keys[role]}") if role else {}
        return EventsClient(Stateless(self.client, f"/mcp/{self.slug}", headers))

    async def publish(self, name: str, text: str | None = None) -> None:
        """A new prompt, or (``text``) a new version of it, labelled production."""
        body: dict[str, Any] = {**SIMPLE, "name": name, "labels": ["production"]}
        path = f"/api/v1/tenants/{self.slug}/prompts"
        if text is not None:
            body = {"arguments": SIMPLE["arguments"], "labels": ["production"],
                    "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}  # fmt: skip
            path += f"/{name}/versions"
        answer = await self.client.post(
            path, json=body, headers=auth(f"Bearer {self.keys['publisher']}")
        )
        assert answer.status_code == 201, answer.text


async def subscribe(
    events: EventsClient,
    receiver: WebhookReceiver,
    name: str = "prompt.changed",
    arguments: dict[str, Any] | None = None,
    secret: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    secret = secret or receiver.new_secret()
    params = {"name": name, "arguments": arguments or {}, "cursor": options.pop("cursor", None),
              "delivery": {"mode": "webhook", "url": receiver.url, "secret": secret}, **options}  # fmt: skip
    result = await events.call("events/subscribe", params)
    receiver.bind(result["id"], secret)
    return result


def delivered(receiver: WebhookReceiver, sid: str) -> list[str]:
    """The eventIds POSTed to ``sid``, in arrival order (every try)."""
    return [b["eventId"] for h, b in receiver.posts
            if h["x-mcp-subscription-id"] == sid and "eventId" in b]  # fmt: skip


def seq(event_id: str) -> int:
    return int(event_id.removeprefix("seq-"))


async def test_a_burst_arrives_verified_signed_in_order_and_complete(
    server: LiveServer, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        hooks = Hooks(server, "burst", client)
        events = hooks.events()
        types = await events.types()
        replayed = {n: t for n, t in types.items() if n != "library.changed"}  # push only
        assert all("webhook" in t["delivery"] for t in replayed.values())
        result = await subscribe(events, receiver, ttlMs=600_000)
        sid = result["id"]
        assert sid.startswith("sub_") and result["truncated"] is False and result["cursor"]
        assert "deliveryStatus" not in result  # a new subscription
        verification = [b for _, b in receiver.posts if b.get("type") == "verification"]
        assert len(verification) == 1  # the endpoint proved its intent before anything else
        start = Subscription("prompt.changed", {}, cursor=result["cursor"])
        for n in range(30):
            await hooks.publish(f"p{n}")
        expected = await events.poll(start)  # the independent path: what the log holds
        assert len(expected) >= 60  # a version and a label move each
        ids = {e["eventId"] for e in expected}
        receiver.wait_until(lambda r: ids <= r.events.keys())
        arrived = delivered(receiver, sid)
        assert arrived == sorted(arrived, key=seq) and len(arrived) == len(set(arrived))
        assert set(arrived) == ids  # none lost, none extra, none repeated
        for headers, body in receiver.posts:
            assert headers["webhook-id"] == body.get("eventId", headers["webhook-id"])
            assert headers["content-type"] == "application/json"
        # The last payload's cursor is safe to persist: nothing follows it.
        after = Subscription("prompt.changed", {}, cursor=receiver.cursors[sid])
        assert await events.poll(after) == []
        # The same subscribe again is a refresh: the same id, a status, the watermark.
        again = await subscribe(events, receiver, cursor=receiver.cursors[sid])
        assert again["id"] == sid and again["truncated"] is False
        status = again["deliveryStatus"]
        assert status["active"] is True and status["lastError"] is None
        assert status["lastDeliveryAt"] is not None
        assert await events.poll(Subscription("prompt.changed", {}, cursor=again["cursor"])) == []
        assert receiver.refused == 0


async def test_retries_abandons_rotates_and_unsubscribes(
    server: LiveServer, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        hooks = Hooks(server, "retries", client)
        events = hooks.events()
        first = receiver.new_secret()
        sid = (await subscribe(events, receiver, arguments={"name": "one"}, secret=first))["id"]
        # A 503 is tried again (the same webhook-id, a new signature); a 410 is not.
        receiver.answers = [503]
        await hooks.publish("one")
        receiver.wait_until(lambda r: len(delivered(r, sid)) >= 2)
        tried = delivered(receiver, sid)
        assert tried[0] == tried[1], tried  # in order: the retry comes before the next event
        receiver.wait_until(lambda r: len(r.events) >= 2)
        assert len(delivered(receiver, sid)) == 3
        receiver.answers = [410]
        await hooks.publish("two")  # another prompt: not this subscription's
        await hooks.publish("one", "Hi {{who}}")  # a second version of "one"
        receiver.wait_until(lambda r: len(delivered(r, sid)) >= 4)
        # The 410 was the version's event: abandoned, not tried again; the rest went on.
        gone = delivered(receiver, sid)[3]
        receiver.wait_until(
            lambda r: len(r.events) >= 2 and seq(max(r.events, key=seq)) >= seq(gone)
        )
        assert delivered(receiver, sid).count(gone) == 1
        status = await subscribe(events, receiver, arguments={"name": "one"}, secret=first)
        assert status["deliveryStatus"]["lastError"] is None  # delivered since the 503
        # A rotation: the new secret signs, the old one too for a while.
        second = receiver.new_secret()
        await subscribe(events, receiver, arguments={"name": "one"}, secret=second)
        before = len(receiver.posts)
        await hooks.publish("one", "Hey {{who}}")
        receiver.wait_until(lambda r: len(r.posts) > before)
        headers, _ = receiver.posts[-1]
        assert len(headers["webhook-signature"].split(" ")) == 2
        # Unsubscribed: gone, and a second time it is not found.
        unsubscribed = await events.call("events/unsubscribe", {"name": "prompt.changed",
                                         "arguments": {"name": "one"}, "delivery": {"url": receiver.url}})  # fmt: skip
        assert unsubscribed.keys() <= {"resultType", "_meta"}
        with pytest.raises(EventsError) as missing:
            await events.call("events/unsubscribe", {"name": "prompt.changed",
                              "arguments": {"name": "one"}, "delivery": {"url": receiver.url}})  # fmt: skip
        assert missing.value.code == -32023 and missing.value.data == {"kind": "subscription"}
        # Another principal's unsubscribe of the same tuple finds nothing of the first's.
        other = hooks.events("publisher")
        kept = await subscribe(events, receiver, arguments={"name": "two"})
        with pytest.raises(EventsError) as foreign:
            await other.call("events/unsubscribe", {"name": "prompt.changed",
                             "arguments": {"name": "two"}, "delivery": {"url": receiver.url}})  # fmt: skip
        assert foreign.value.code == -32023
        assert (await subscribe(events, receiver, arguments={"name": "two"}))["id"] == kept["id"]
        # Two first subscribes of one key at once: one subscription, both answered with it.
        same = receiver.new_secret()
        twins = await asyncio.gather(
            *(subscribe(events, receiver, arguments={"name": "three"}, secret=same) for _ in "ab")
        )
        assert twins[0]["id"] == twins[1]["id"]
        assert receiver.refused == 0


async def test_a_revoked_key_ends_its_subscription_with_terminated(
    server: LiveServer, receiver: WebhookReceiver
) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        hooks = Hooks(server, "revoked", client)
        operator = auth(f"Bearer {OPERATOR_TOKEN}")
        made = await client.post(
            "/api/v1/tenants/revoked/keys", json={"role": "reader"}, headers=operator
        )
        key = made.json()
        events = EventsClient(Stateless(client, "/mcp/revoked", auth(f"Bearer {key['secret']}")))
        sid = (await subscribe(events, receiver))["id"]
        gone = await client.delete(f"/api/v1/tenants/revoked/keys/{key['id']}", headers=operator)
        assert gone.status_code == 204
        await hooks.publish("after")
        receiver.wait_until(lambda r: any(e["type"] == "terminated" for e in r.envelopes))
        ended = next(e for e in receiver.envelopes if e["type"] == "terminated")
        assert ended["subscription"] == sid and ended["error"]["code"] == -32024
        assert delivered(receiver, sid) == []  # the change after the revocation was not sent


async def test_the_drafts_refusals(server: LiveServer, receiver: WebhookReceiver, api: Api) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        hooks = Hooks(server, "refusals", client, public=True)
        events = hooks.events()

        async def refused(params: dict[str, Any], who: EventsClient = events) -> EventsError:
            base = {"name": "prompt.changed", "arguments": {}, "cursor": None,
                    "delivery": {"url": receiver.url, "secret": SECRET_32}}  # fmt: skip
            with pytest.raises(EventsError) as error:
                await who.call("events/subscribe", base | params)
            return error.value

        # Anonymous callers of a public tenant poll and stream, but webhooks need a principal.
        anonymous = await refused({}, hooks.events(None))
        assert anonymous.code == -32024 and anonymous.data == {"reason": "unauthenticated"}
        bad = await refused({"delivery": {"url": receiver.url, "secret": "whsec_c2hvcnQ="}})
        assert bad.code == -32602 and "delivery.secret" in str(bad)
        pushed = await refused({"delivery": {"mode": "push", "url": receiver.url,
                                              "secret": SECRET_32}})  # fmt: skip
        assert pushed.code == -32026
        assert pushed.data == {"feature": "deliveryMode", "value": "push"}
        emitted = await refused({"name": "library.changed"})  # no replay: pushed only
        assert emitted.code == -32026
        assert emitted.data == {"feature": "deliveryMode", "value": "webhook"}
        unknown = await refused({"name": "nope"})
        assert unknown.code == -32023 and unknown.data == {"kind": "event"}
        deaf = WebhookReceiver(echo=False)  # answers 200 but does not echo the challenge
        try:
            # A receiver that does not know the secret refuses the challenge (a 401)...
            unknown_secret = await refused({"delivery": {"url": deaf.url, "secret": SECRET_32}})
            assert unknown_secret.code == -32027 and unknown_secret.data == {"reason": "http_4xx"}
            # ... and one that knows it but does not echo the nonce has not proved its intent.
            known = {"url": deaf.url, "secret": deaf.new_secret()}
            failed = await refused({"delivery": known})
            assert failed.code == -32027 and failed.data == {"reason": "challenge_failed"}
        finally:
            deaf.close()
        closed = await refused({"delivery": {"url": "http://127.0.0.1:9/", "secret": SECRET_32}})
        assert closed.code == -32027 and closed.data == {"reason": "connection_refused"}
        assert receiver.posts == []  # none of those reached the endpoint: nothing was verified
    # Where private addresses are not allowed (the default): https only, public addresses only.
    acme = await api.tenant("acme")
    strict = EventsClient(Stateless(api.client, "/mcp/acme", auth(acme["reader"])))
    for url, said in (("http://hooks.example/h", "https"), ("https://127.0.0.1/h", "loopback"),
                      ("https://10.0.0.1/h", "private")):  # fmt: skip
        params = {"name": "prompt.changed", "arguments": {},
                  "delivery": {"url": url, "secret": SECRET_32}}  # fmt: skip
        with pytest.raises(EventsError) as error:
            await strict.call("events/subscribe", params)
        assert error.value.code == -32602 and said in str(error.value), url


def test_a_sigkill_mid_delivery_loses_nothing(
    pg_server: PgServer, db_name: str, receiver: WebhookReceiver
) -> None:
    """Every worker killed while an event's POST is unanswered: the next server delivers it again
    (the same eventId) and everything after it, in order."""
    env = {**ENV, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
           "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN}  # fmt: skip
    first = start_server(env, workers=2)

    async def before() -> tuple[str, str, str]:
        async with httpx.AsyncClient(base_url=first.url, timeout=30) as client:
            hooks = Hooks(first, "killed", client)
            events = hooks.events()
            result = await subscribe(events, receiver)
            receiver.hold.set()
            await hooks.publish("one")
            await hooks.publish("two")
            return result["id"], result["cursor"], hooks.keys["reader"]

    try:
        sid, cursor, reader = asyncio.run(before())
        receiver.wait_until(lambda r: len(delivered(r, sid)) >= 1)  # in flight, unanswered
    finally:
        first.process.kill()  # SIGKILL: no shutdown
        first.process.wait()
        first.log.unlink()
    receiver.hold.clear()
    receiver.release.set()
    second = start_server(env, workers=2)
    try:

        async def after() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=second.url, timeout=30) as client:
                events = EventsClient(Stateless(client, "/mcp/killed", auth(f"Bearer {reader}")))
                return await events.poll(Subscription("prompt.changed", {}, cursor=cursor))

        expected = {e["eventId"] for e in asyncio.run(after())}
        receiver.wait_until(lambda r: expected <= r.events.keys())
        arrived = delivered(receiver, sid)
        assert arrived[0] == arrived[1]  # the one cut off, sent again
        assert arrived[1:] == sorted(expected, key=seq)
    finally:
        stop_server(second)


def workers_of(server: LiveServer) -> list[int]:
    """The worker processes of a server's uvicorn (its master's children)."""
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in children]


async def test_a_poll_through_a_burst_and_a_worker_kill_loses_and_repeats_nothing(
    server: LiveServer,
) -> None:
    """500 events written by ten writers while a client polls from its cursor, one of the two
    workers SIGKILLed in the middle: the client, retrying a failed poll with the cursor it holds,
    gets every event once and in order."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        hooks = Hooks(server, "burst-poll", client)
        events = hooks.events()
        start = Subscription("prompt.changed", {})
        await events.poll(start)
        got: list[str] = []
        cursor = start.cursor
        written = asyncio.Event()

        async def poll_once() -> bool:
            nonlocal cursor
            params: dict[str, Any] = {
                "name": "prompt.changed",
                "arguments": {},
                "cursor": cursor,
                "maxEvents": 40,
            }
            try:
                result = await events.call("events/poll", params)
            except httpx.TransportError:  # the worker it reached was killed: the same cursor again
                return True
            got.extend(e["eventId"] for e in result["events"])
            cursor = result["cursor"]
            return bool(result["hasMore"])

        async def follow() -> None:
            while True:
                done = written.is_set()  # read before the poll: a poll after the last write ends
                if not await poll_once() and done:
                    return
                await asyncio.sleep(0)  # the writers go on between polls

        async def publish(n: int) -> None:
            body = {**SIMPLE, "name": f"p{n}", "labels": ["production"]}
            headers = auth(f"Bearer {hooks.keys['publisher']}")
            retried = False
            while True:
                try:
                    answer = await client.post(
                        "/api/v1/tenants/burst-poll/prompts", json=body, headers=headers
                    )
                except httpx.TransportError:  # not acknowledged: sent again
                    retried = True
                    continue
                # Sent again after a cut: it may have been written the first time.
                assert answer.status_code == 201 or (retried and answer.status_code == 409)
                return

        async def writers() -> None:
            names = iter(range(250))

            async def writer() -> None:
                for n in names:
                    if n == 120:
                        os.kill(workers_of(server)[0], signal.SIGKILL)
                    await publish(n)

            await asyncio.gather(*(writer() for _ in range(10)))
            written.set()

        await asyncio.gather(writers(), follow())
        everything = Subscription("prompt.changed", {}, cursor=start.cursor)
        expected = [e["eventId"] for e in await events.poll(everything)]
        assert len(expected) == 500
        assert got == expected  # none lost, none repeated, in order


async def test_a_skills_new_version_is_posted_with_the_manifest_it_serves(
    server: LiveServer, receiver: WebhookReceiver
) -> None:
    """skill.changed by webhook, on a tenant made as the quick start makes it: the event carries
    what the label serves of the skill now (version, manifest digest), as a poll of the same
    subscription says."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        hooks = Hooks(server, "skills-hook", client)
        events = hooks.events()
        wanted = {"name": "review", "label": "production"}
        result = await subscribe(events, receiver, name="skill.changed", arguments=wanted)
        sid = result["id"]
        skill_md = "---\nname: review\ndescription: d\n---\nOne\n"
        server.skill(
            "skills-hook", {"name": "review", "files": [{"path": "SKILL.md", "text": skill_md}]}
        )
        receiver.wait_until(lambda r: len(delivered(r, sid)) >= 1)
        posted = next(b for h, b in receiver.posts
                      if h["x-mcp-subscription-id"] == sid and "eventId" in b)  # fmt: skip
        served = posted["data"]["served"]
        assert (served["label"], served["version"]) == ("production", 1)
        assert served["digest"].startswith("sha256:")
        polled = await events.poll(Subscription("skill.changed", wanted, cursor=result["cursor"]))
        assert polled and polled[-1]["data"]["served"] == served
