"""A client of the Events extension written from its draft (SEP-3415, ``events/list``,
``events/poll``, and a webhook receiver for ``events/subscribe``), not from this server: it checks the capability in ``server/discover``, reads the
event types, and runs one poll loop per subscription as the draft's client SDK does (persist the
cursor each response carries, poll again at once while ``hasMore``, deduplicate by ``eventId``,
note ``truncated`` as a possible gap). It knows nothing of change logs or sequence numbers: a
cursor is opaque to it."""

from __future__ import annotations

import base64
import http.server
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.mcp.test_stateless import Stateless, meta

EXTENSION = "io.modelcontextprotocol/events"
MIN_POLL_MS = 1000  # the draft's default floor on nextPollMs
MAX_DRAIN = 50  # polls in a row while hasMore, before the client stops and reports


class EventsError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code, self.data = error.get("code"), error.get("data")


@dataclass
class Subscription:
    name: str
    arguments: dict[str, Any]
    cursor: str | None = None
    seen: set[str] = field(default_factory=set)
    gaps: int = 0  # responses that said truncated


class EventsClient:
    def __init__(self, mcp: Stateless) -> None:
        self.mcp = mcp

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.mcp.post(method, {"_meta": meta(), **params})
        body = answer.json()
        if "error" in body:
            raise EventsError(body["error"])
        assert answer.status_code == 200, answer.text
        result = body["result"]
        assert result.get("resultType") == "complete", result
        return dict(result)

    async def offered(self) -> bool:
        found = await self.call("server/discover", {})
        return EXTENSION in (found.get("capabilities", {}).get("extensions") or {})

    async def types(self) -> dict[str, dict[str, Any]]:
        listed = await self.call("events/list", {})
        types = {}
        for one in listed["events"]:
            assert set(one["delivery"]) <= {"poll", "push", "webhook"} and one["delivery"], one
            assert one["inputSchema"]["type"] == "object" and isinstance(one["payloadSchema"], dict)
            types[one["name"]] = one
        return types

    async def poll(self, subscription: Subscription, **options: Any) -> list[dict[str, Any]]:
        """Every new event of ``subscription``: polls until ``hasMore`` is false (draining a
        backlog at once), returning events not seen before, in the order delivered."""
        delivered = []
        for _ in range(MAX_DRAIN):
            params = {"name": subscription.name, "arguments": subscription.arguments,
                      "cursor": subscription.cursor, **options}  # fmt: skip
            result = await self.call("events/poll", params)
            for event in result["events"]:
                assert set(event) >= {"eventId", "name", "timestamp", "data"}, event
                assert event["name"] == subscription.name
                datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
                json.dumps(event["data"])
                if event["eventId"] not in subscription.seen:
                    subscription.seen.add(event["eventId"])
                    delivered.append(event)
            subscription.cursor = result.get("cursor")  # absent means null
            subscription.gaps += bool(result.get("truncated"))
            assert isinstance(result["hasMore"], bool)
            assert max(MIN_POLL_MS, int(result["nextPollMs"])) >= MIN_POLL_MS
            if not result["hasMore"]:
                return delivered
        raise AssertionError("the server kept saying hasMore")


# --- webhook delivery: a receiver written from the draft's "Webhook security" -------------------


class WebhookReceiver:
    """A callback endpoint as the draft describes one: every POST verified with the
    ``standardwebhooks`` package before anything is done with it (a secret chosen by the id in
    ``X-MCP-Subscription-Id``, or, for a first verification envelope, any secret registered and not
    yet bound to an id); a ``verification`` envelope answered by echoing its challenge; events
    deduplicated by ``eventId`` and each payload's ``cursor`` persisted as the client's position;
    ``gap`` and ``terminated`` envelopes kept for the client. ``answers`` queues the statuses of the
    next event POSTs (then 200); ``hold`` keeps POSTs unanswered until ``release``."""

    def __init__(self, *, echo: bool = True) -> None:
        self.echo = echo
        self.secrets: dict[str, list[str]] = {}  # subscription id -> the secrets it may sign with
        self.unbound: list[str] = []  # secrets given to a subscribe whose answer has not come
        self.posts: list[tuple[dict[str, str], dict[str, Any]]] = []  # verified, in arrival order
        self.events: dict[str, dict[str, Any]] = {}  # eventId -> the event, first copy
        self.cursors: dict[str, str | None] = {}  # subscription id -> the last persisted cursor
        self.envelopes: list[dict[str, Any]] = []  # gap, terminated
        self.refused = 0  # POSTs whose signature verified under no secret
        self.answers: list[int] = []
        self.hold = threading.Event()
        self.release = threading.Event()
        self.changed = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                status, answer = receiver._received(
                    {k.lower(): v for k, v in self.headers.items()}, raw
                )
                if receiver.hold.is_set() and status == 200 and b'"verification"' not in raw:
                    receiver.release.wait(60)
                    return  # never answered
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def new_secret(self) -> str:
        """What a client SDK does: 32 random bytes from a CSPRNG, as a whsec_ secret."""
        secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
        with self.changed:
            self.unbound.append(secret)
        return secret

    def bind(self, subscription_id: str, secret: str) -> None:
        """The subscribe answer reached the receiver: this id signs with this secret (and, after a
        rotation, with the ones it had)."""
        with self.changed:
            known = self.secrets.setdefault(subscription_id, [])
            if secret not in known:
                known.insert(0, secret)

    def _verify(self, headers: dict[str, str], raw: bytes, body: dict[str, Any]) -> str | None:
        sid = headers.get("x-mcp-subscription-id", "")
        candidates = list(self.secrets.get(sid, []))
        if body.get("type") == "verification":
            candidates += self.unbound
        for secret in candidates:
            try:
                Webhook(secret).verify(raw, headers)
            except WebhookVerificationError:
                continue
            return secret
        return None

    def _received(self, headers: dict[str, str], raw: bytes) -> tuple[int, bytes]:
        body = json.loads(raw)
        with self.changed:
            secret = self._verify(headers, raw, body)
            if secret is None:
                self.refused += 1
                self.changed.notify_all()
                return 401, b"{}"
            sid = headers["x-mcp-subscription-id"]
            self.posts.append((headers, body))
            self.changed.notify_all()
            kind = body.get("type")
            if kind == "verification":
                challenge = body["challenge"] if self.echo else "not it"
                return 200, json.dumps({"challenge": challenge}).encode()
            status = self.answers.pop(0) if self.answers else 200
            if kind is not None:
                self.envelopes.append({"subscription": sid, **body})
                if kind == "gap":
                    self.cursors[sid] = body.get("cursor")
            elif 200 <= status < 300:  # only what is acknowledged is kept, and its cursor
                self.events.setdefault(body["eventId"], body)
                self.cursors[sid] = body.get("cursor")
            return status, b"{}"

    def wait_until(self, done: Callable[[WebhookReceiver], bool], seconds: float = 60) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: done(self), seconds), (
                f"{len(self.posts)} posts, {len(self.events)} events, {self.envelopes}"
            )

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
