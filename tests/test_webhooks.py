"""Webhooks against live servers and a real receiver that verifies every delivery with the
`standardwebhooks` library: signed, in order, filtered by event type, secrets rotated with both
signatures during the overlap, retried after failures with a log of each attempt, redelivered by id,
nothing committed lost and nothing rolled back sent across a SIGKILL, and outbound calls to private
addresses refused. Every wait is woken by the receiver or bounded by a deadline, never a sleep."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import asyncpg
import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from registry import outbound
from tests.conftest import (
    OPERATOR_TOKEN,
    Api,
    LiveServer,
    PgServer,
    auth,
    free_port,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.slow
WAIT = 60


class Receiver:
    """An HTTP endpoint that records what it is sent; it answers the statuses queued in
    ``answers`` (then 200), or holds each request while ``hold`` is set."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.answers: list[int] = []
        self.hold = threading.Event()
        self.release = threading.Event()
        self.changed = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.changed:
                    receiver.requests.append((dict(self.headers.items()), body))
                    status = receiver.answers.pop(0) if receiver.answers else 200
                    receiver.changed.notify_all()
                if receiver.hold.is_set():
                    receiver.release.wait(WAIT)
                    return  # never answered
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count: int) -> list[tuple[dict[str, str], bytes]]:
        return self.wait_until(lambda requests: len(requests) >= count)

    def wait_until(
        self, done: Callable[[list[tuple[dict[str, str], bytes]]], bool]
    ) -> list[tuple[dict[str, str], bytes]]:
        """The requests received, once ``done`` holds for them (checked at once, then on each
        request)."""
        with self.changed:
            assert self.changed.wait_for(lambda: done(self.requests), WAIT), self.requests
            return list(self.requests)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def more_than(receiver: Receiver, count: int) -> bool:
    return len(receiver.requests) > count


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


ENV = {
    "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
    "REGISTRY_WEBHOOK_ALLOW_PRIVATE": "true",  # the receiver is on this machine
    "REGISTRY_WEBHOOK_RETRY_SECONDS": "0.1",
    "REGISTRY_WEBHOOK_POLL_SECONDS": "0.1",
}


@pytest.fixture
def server(pg_server: PgServer, db_name: str) -> Iterator[LiveServer]:
    made = start_server({**ENV, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)})
    yield made
    stop_server(made)


@pytest.fixture
def woken_server(pg_server: PgServer, db_name: str) -> Iterator[LiveServer]:
    """A server that looks for due deliveries only when the outbox notifies (its periodic look
    for retries is an hour away): what it sends at once, the notification woke it for."""
    env = {**ENV, "REGISTRY_WEBHOOK_POLL_SECONDS": "3600"}
    made = start_server({**env, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)})
    yield made
    stop_server(made)


def register(
    server: LiveServer, key: str, url: str, *, tenant: str = "acme", **body: Any
) -> dict[str, Any]:
    created = httpx.post(
        f"{server.url}/api/v1/tenants/{tenant}/webhooks",
        json={"url": url, **body},
        headers=auth(f"Bearer {key}"),
    )
    assert created.status_code == 201, created.text
    return dict(created.json())


def publish(
    server: LiveServer, key: str, name: str, text: str = "Hi", *, tenant: str = "acme"
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/v1/tenants/{tenant}/prompts",
        json={"name": name, "labels": ["production"], "messages": [{"role": "user", "text": text}]},
        headers=auth(f"Bearer {key}"),
    )


def verified(secret: str, request: tuple[dict[str, str], bytes]) -> dict[str, Any]:
    headers, body = request
    return dict(Webhook(secret).verify(body, headers))


def test_signed_in_order_filtered_and_rotated(woken_server: LiveServer, receiver: Receiver) -> None:
    server = woken_server
    keys = server.tenant("acme", roles=("publisher", "admin"))
    endpoint = register(server, keys["admin"], receiver.url, description="all events")
    assert endpoint["secret"].startswith("whsec_")
    only_archive = Receiver()
    try:
        register(server, keys["admin"], only_archive.url, events=["prompt.archive"])
        assert publish(server, keys["publisher"], "one").status_code == 201
        assert publish(server, keys["publisher"], "two").status_code == 201
        got = [verified(endpoint["secret"], r) for r in receiver.wait_for(4)]
        assert [(g["type"], g["data"]["prompt"], g["data"]["label"]) for g in got] == [
            ("label.move", "one", "latest"), ("label.move", "one", "production"),
            ("label.move", "two", "latest"), ("label.move", "two", "production"),
        ]  # fmt: skip
        seqs = [g["data"]["seq"] for g in got]
        assert seqs == sorted(seqs) and got[0]["data"]["tenant"] == "acme"
        ids = {headers["webhook-id"] for headers, _ in receiver.requests}
        assert len(ids) == 4
        with pytest.raises(WebhookVerificationError):
            Webhook("whsec_" + "A" * 44).verify(receiver.requests[0][1], receiver.requests[0][0])

        archived = httpx.post(
            f"{server.url}/api/v1/tenants/acme/prompts/one/archive",
            headers=auth(f"Bearer {keys['publisher']}"),
        )
        assert archived.status_code == 200, archived.text
        assert verified_type(only_archive.wait_for(1)[0]) == "prompt.archive"
        assert len(only_archive.requests) == 1  # the label moves were not for it

        rotated = httpx.post(
            f"{server.url}/api/v1/tenants/acme/webhooks/{endpoint['id']}/rotate",
            headers=auth(f"Bearer {keys['admin']}"),
        ).json()
        assert publish(server, keys["publisher"], "three").status_code == 201
        after = receiver.wait_for(7)[-1]  # 4 moves, the archive, two moves of 'three'
        assert len(after[0]["webhook-signature"].split(" ")) == 2
        assert verified(rotated["secret"], after) == verified(endpoint["secret"], after)
    finally:
        only_archive.close()


def verified_type(request: tuple[dict[str, str], bytes]) -> str:
    return str(json.loads(request[1])["type"])


def test_retries_in_order_with_a_log_and_redelivery(server: LiveServer, receiver: Receiver) -> None:
    keys = server.tenant("acme", roles=("publisher", "admin"))
    endpoint = register(server, keys["admin"], receiver.url)
    receiver.answers = [500, 503]  # the first message fails twice
    assert publish(server, keys["publisher"], "one").status_code == 201
    got = receiver.wait_for(4)  # 3 tries of the first message, then the second
    first, second = got[0][0]["webhook-id"], got[3][0]["webhook-id"]
    assert [h["webhook-id"] for h, _ in got] == [first, first, first, second]  # in order
    headers = auth(f"Bearer {keys['admin']}")
    base = f"{server.url}/api/v1/tenants/acme/webhooks/{endpoint['id']}/deliveries"
    # The second message went only once the first was settled: its log is complete.
    log = httpx.get(base, headers=headers).json()
    oldest = log[-1]
    assert oldest["message_id"] == first
    assert oldest["status"] == "delivered"
    assert [a["status_code"] for a in oldest["log"]] == [500, 503, 200]
    assert oldest["log"][0]["response_body"] == "ok"
    assert all(a["latency_ms"] >= 0 for a in oldest["log"])
    again = httpx.post(f"{base}/{oldest['id']}/redeliver", headers=headers)
    assert again.status_code == 202, again.text
    assert receiver.wait_for(5)[4][0]["webhook-id"] == first  # the same message, again
    # What an operator sees: the failed attempts, and the pools the deliveries used.
    scraped = httpx.get(f"{server.url}/metrics", headers=auth(f"Bearer {OPERATOR_TOKEN}")).text
    assert 'registry_webhook_attempts_total{outcome="retrying"} 2.0' in scraped
    assert 'registry_pool_connections_max{pool="orm"}' in scraped
    waits = re.search(r"^registry_pool_wait_seconds_count (\S+)$", scraped, re.M)
    assert waits and float(waits[1]) > 0, scraped


def test_sigkill_loses_nothing_committed_and_sends_nothing_rolled_back(
    pg_server: PgServer, db_name: str, receiver: Receiver
) -> None:
    # A 2 s timeout: the delivery cut off is leased for 4 s, then sent again by the next server.
    env = {**ENV, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
           "REGISTRY_WEBHOOK_TIMEOUT_SECONDS": "2"}  # fmt: skip
    server = start_server(env)
    try:
        keys = server.tenant("acme", roles=("publisher", "admin"))
        endpoint = register(server, keys["admin"], receiver.url)
        receiver.hold.set()  # the first delivery is taken and never answered
        assert publish(server, keys["publisher"], "one").status_code == 201
        refused = httpx.post(  # a write that rolls back: it would break production's callers
            f"{server.url}/api/v1/tenants/acme/prompts/one/versions",
            json={"labels": ["production"], "arguments": [{"name": "x", "required": True}],
                  "messages": [{"role": "user", "text": "{{x}}"}]},
            headers=auth(f"Bearer {keys['publisher']}"),
        )  # fmt: skip
        assert refused.status_code == 409, refused.text
        assert publish(server, keys["publisher"], "two").status_code == 201
        receiver.wait_for(1)  # a delivery is in flight
    finally:
        server.process.kill()  # SIGKILL: no shutdown, the in-flight transaction is cut off
        server.process.wait()
        server.log.unlink()
    receiver.hold.clear()
    receiver.release.set()
    restarted = start_server(env)
    try:
        committed = asyncio.run(outbox(pg_server.plain_url(db_name)))
        assert len(committed) == 4  # two prompts, two label moves each; the 409 wrote none
        # Every committed message arrives (the one cut off in flight again), and nothing else.
        # Checked on what has arrived so far first: the redeliveries may all be in already.
        received = receiver.wait_until(
            lambda requests: committed <= {h["webhook-id"] for h, _ in requests}
        )
        assert {h["webhook-id"] for h, _ in received} == committed
        for request in receiver.requests:
            verified(endpoint["secret"], request)
    finally:
        stop_server(restarted)


async def outbox(url: str) -> set[str]:
    """The message ids the outbox holds (read as the superuser: every tenant)."""
    conn = await asyncpg.connect(url)
    try:
        return {
            r["message_id"] for r in await conn.fetch("SELECT message_id FROM webhook_deliveries")
        }
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/x", "private"),
        ("http://[::1]/x", "loopback"),
        # IPv6 forms that carry a private IPv4 address inside them
        ("http://[2002:7f00:1::1]/x", "loopback"),  # 6to4 of 127.0.0.1
        ("http://[64:ff9b::a00:1]/x", "private"),  # NAT64 of 10.0.0.1
        ("http://[::ffff:10.0.0.1]/x", "private"),  # mapped
        ("http://[::127.0.0.1]/x", "loopback"),  # compatible
        ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/x", "loopback"),  # Teredo, client 127.0.0.1
        ("http://user:secret@hooks.example/x", "credentials"),
        ("ftp://hooks.example/x", "http or https"),
    ],
)
async def test_private_and_odd_urls_are_refused_when_registered(
    api: Api, url: str, named: str
) -> None:
    keys = await api.tenant("acme")
    refused = await api.client.post(
        "/api/v1/tenants/acme/webhooks", json={"url": url}, headers=auth(keys["admin"])
    )
    assert refused.status_code == 422, refused.text
    assert named in refused.json()["detail"]
    assert "secret" not in refused.text
    if named not in ("credentials", "http or https"):  # a private address: the setting is named
        assert "REGISTRY_WEBHOOK_ALLOW_PRIVATE=true" in refused.json()["detail"]


async def test_a_name_that_resolves_to_a_private_address_is_not_called(receiver: Receiver) -> None:
    port = receiver.server.server_address[1]
    outcome = await outbound.post(
        f"http://localhost:{port}/hook", b"{}", {}, seconds=5, allow_private=False
    )
    assert outcome.status_code is None
    assert outcome.error is not None and "loopback address" in outcome.error
    # what the name resolved to is not told: a refusal is no oracle of internal names
    assert "127.0.0.1" not in outcome.error and "::1" not in outcome.error
    named = await outbound.post(
        f"http://localhost:{port}/hook", b"{}", {}, seconds=5, allow_private=False,
        allowed_by="REGISTRY_WEBHOOK_ALLOW_PRIVATE",
    )  # fmt: skip
    assert named.error is not None and "REGISTRY_WEBHOOK_ALLOW_PRIVATE=true" in named.error
    assert receiver.requests == []
    allowed = await outbound.post(
        f"http://localhost:{port}/hook", b"{}", {}, seconds=5, allow_private=True
    )
    assert allowed.status_code == 200 and allowed.body == "ok"
    closed = await outbound.post(
        f"http://127.0.0.1:{free_port()}/", b"{}", {}, seconds=5, allow_private=True
    )
    assert closed.status_code is None and closed.error


def test_an_endpoint_failing_too_long_is_disabled_and_the_log_says_so(
    pg_server: PgServer, db_name: str, receiver: Receiver
) -> None:
    env = {
        **ENV,
        "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
        "REGISTRY_WEBHOOK_DISABLE_AFTER_HOURS": "0.0002",  # 0.72 s, for the test
    }
    server = start_server(env)
    try:
        keys = server.tenant("acme", roles=("publisher", "admin"))
        endpoint = register(server, keys["admin"], receiver.url)
        receiver.answers = [500] * 1000
        assert publish(server, keys["publisher"], "one").status_code == 201
        headers = auth(f"Bearer {keys['admin']}")
        deadline = time.monotonic() + WAIT
        state: dict[str, Any] = {}
        seen = 0
        while not state.get("disabled_at"):
            assert time.monotonic() < deadline, state
            # Woken by each new try; read again at least twice a second all the same: the try that
            # disables the endpoint arrives before its failure is recorded, and none follows it.
            with receiver.changed:
                receiver.changed.wait_for(partial(more_than, receiver, seen), 0.5)
                seen = len(receiver.requests)
            listed = httpx.get(f"{server.url}/api/v1/tenants/acme/webhooks", headers=headers).json()
            state = next(e for e in listed if e["id"] == endpoint["id"])
        assert state["disabled_at"] and "HTTP 500" in state["disabled_reason"]
        audit = httpx.get(
            f"{server.url}/api/v1/tenants/acme/audit?action=webhook.disabled", headers=headers
        ).json()
        assert audit["items"][0]["actor"] == "registry"
        enabled = httpx.patch(
            f"{server.url}/api/v1/tenants/acme/webhooks/{endpoint['id']}",
            json={"enabled": True},
            headers=headers,
        )
        assert enabled.status_code == 200 and enabled.json()["disabled_at"] is None
    finally:
        stop_server(server)


def test_two_workers_never_send_the_same_attempt(
    pg_server: PgServer, db_name: str, receiver: Receiver
) -> None:
    env = {**ENV, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}
    server = start_server(env, workers=2)
    try:
        keys = server.tenant("acme", roles=("publisher", "admin"))
        register(server, keys["admin"], receiver.url)
        for index in range(6):
            assert publish(server, keys["publisher"], f"p{index}").status_code == 201
        got = receiver.wait_for(12)
        ids = [headers["webhook-id"] for headers, _ in got]
        assert len(ids) == len(set(ids)) == 12  # each message once: no attempt sent twice
        seqs = [json.loads(body)["data"]["seq"] for _, body in got]
        assert seqs == sorted(seqs)  # in order for the endpoint, whichever worker sent it
    finally:
        stop_server(server)


def test_one_tenants_dead_receivers_cost_only_that_tenant(
    pg_server: PgServer, db_name: str, receiver: Receiver
) -> None:
    """Six endpoints of one tenant never answer (the timeout is longer than this test waits):
    another tenant's delivery still goes at once, the slow tenant has at most PER_TENANT in
    flight, and no connection sits idle in a transaction while receivers are called."""
    from registry.webhooks.delivery import PER_TENANT

    dead = Receiver()
    dead.hold.set()
    env = {
        **ENV, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
        "REGISTRY_WEBHOOK_TIMEOUT_SECONDS": "120",  # the most; longer than receivers wait here
    }  # fmt: skip
    server = start_server(env)
    try:
        slow = server.tenant("slow", roles=("publisher", "admin"))
        fast = server.tenant("fast", roles=("publisher", "admin"))
        for _ in range(6):
            register(server, slow["admin"], dead.url, tenant="slow")
        register(server, fast["admin"], receiver.url, tenant="fast")
        assert publish(server, slow["publisher"], "one", tenant="slow").status_code == 201
        dead.wait_for(PER_TENANT)  # the slow tenant's deliveries are in flight, unanswered
        url = pg_server.plain_url(db_name)
        mark = asyncio.run(_database_clock(url))
        assert publish(server, fast["publisher"], "two", tenant="fast").status_code == 201
        got = receiver.wait_for(1)  # at once, not after the dead receivers' timeout
        assert json.loads(got[0][1])["data"]["prompt"] == "two"
        assert len(dead.requests) == PER_TENANT
        idle = asyncio.run(_idle_in_transaction(url, since=mark))
        assert idle == 0, f"{idle} connections idle in a transaction while receivers are called"
    finally:
        dead.close()
        stop_server(server)


async def _database_clock(url: str) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval("SELECT clock_timestamp()")
    finally:
        await conn.close()


async def _idle_in_transaction(url: str, *, since: Any) -> int:
    """Connections idle in a transaction that began before ``since`` (still open after it)."""
    conn = await asyncpg.connect(url)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state = 'idle in transaction' AND xact_start < $1",
                since,
            )
        )
    finally:
        await conn.close()


def test_a_rotated_out_secret_stops_signing_when_its_overlap_ends() -> None:
    """Inside the overlap both secrets sign (receivers switch at their pace); once it ends, only
    the new one does: a leaked old secret verifies nothing sent after that."""
    import base64
    import os
    from datetime import UTC, datetime, timedelta

    from registry.webhooks.delivery import signature_headers

    old, new = (f"whsec_{base64.b64encode(os.urandom(24)).decode()}" for _ in range(2))
    now = datetime.now(UTC)
    body = '{"type":"prompt.version_created"}'

    def sent(until: datetime) -> dict[str, str]:
        row = {"message_id": "msg_1", "secret": new, "previous_secret": old,
               "previous_until": until}  # fmt: skip
        return signature_headers(row, body, now)

    during = sent(now + timedelta(hours=1))
    assert len(during["webhook-signature"].split()) == 2
    Webhook(old).verify(body, during)
    after = sent(now - timedelta(seconds=1))
    assert len(after["webhook-signature"].split()) == 1
    Webhook(new).verify(body, after)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body, after)
