"""The Events extension's webhook delivery (SEP-3415's ``events/subscribe`` and
``events/unsubscribe``, a draft of October 2026), fed by the same change log as poll and push.

A subscription is keyed by (principal, callback URL, event type, arguments); its ``id`` is derived
from the key and only routes deliveries (``X-MCP-Subscription-Id``). Before the first subscription of
a principal to a URL is written, the endpoint must echo a signed ``verification`` challenge; the row
then stands for that proof. Subscriptions live in the database (schema 0036) under the tenant's
row-level security, so any worker of any instance delivers them and a restart loses none.

Delivery (``Deliverer``): a worker leases a subscription whose tenant's log moved past its
``position`` (the watermark), POSTs the events that follow one at a time and in order, each signed
the Standard Webhooks way with the client's secret (and the previous one during a rotation), and
moves the position after each acknowledgement under its lease. A failed event is tried again after
growing delays (five tries in about eight minutes), then abandoned (the position moves past it, as
the draft says; the client's cursor replays it by poll if it must); ``410`` and ``413`` abandon at
once. An endpoint failing for an hour is suspended until the client refreshes. Every POST goes
through the registry's outbound path: the address checked at delivery time, no redirects. What this
server chose where the draft leaves room is in docs/events.md."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import math
import re
import secrets
import time
import uuid
from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError

from registry import outbound
from registry.config import Settings
from registry.db import repository as db_repo
from registry.db.engine import Database
from registry.db.models import Tenant
from registry.events.changes import replay_from
from registry.mcp import events
from registry.mcp.call import Call, Params
from registry.mcp.errors import (
    EVENT_FORBIDDEN,
    CallbackEndpointError,
    EventForbidden,
    EventNotFound,
    InvalidParams,
    ResourceExhausted,
    Unsupported,
)
from registry.principal import Principal
from registry.tenants import service as tenant_service
from registry.webhooks import subscription_repository as repo
from registry.webhooks.delivery import Pump, signature_headers

logger = logging.getLogger(__name__)

DEFAULT_TTL_SECONDS = 3_600  # the grant when the client suggests none
MIN_TTL_SECONDS = 60  # a shorter suggestion is clamped up (refresh storms)
MAX_TTL_SECONDS = 86_400  # the longest grant, also for ``ttlMs: null`` (no expiry is not granted)
MAX_PER_PRINCIPAL = 100
MAX_PER_TENANT = 1_000
ROTATION_GRACE = timedelta(minutes=10)  # the previous secret signs too, after a rotation
RETRY_FACTORS = (1, 6, 24, 60)  # x webhook_retry_seconds (5 s): 5 s, 30 s, 2 min, 5 min
SUSPEND_AFTER = timedelta(hours=1)  # failing every try this long: suspended until a refresh
BATCH = 100  # events read for one lease
PER_WORKER = 8  # subscriptions one worker delivers at once
PER_TENANT = 2  # subscriptions of one tenant leased at once, across every worker
VERIFICATIONS_PER_HOST = 10  # challenges one worker sends to one host in a minute
MAX_URL = 2_048
HEADER_ID = "X-MCP-Subscription-Id"
_SECRET = re.compile(r"whsec_([A-Za-z0-9+/]+={0,2})")
NOT_RETRIED = (410, 413)  # the receiver does not want it again: abandoned, the subscription kept


class Delivery(BaseModel):
    model_config = ConfigDict(extra="allow")

    mode: str | None = None
    url: str = Field(min_length=1, max_length=MAX_URL)
    secret: str | None = Field(default=None, max_length=200)


class SubscribeParams(events.PollParams):
    delivery: Delivery
    ttlMs: int | None = Field(default=None, ge=0, le=10 * 366 * 86_400_000)


class UnsubscribeParams(Params):
    name: str = Field(min_length=1, max_length=100)
    arguments: dict[str, Any] | None = None
    delivery: Delivery


def category(outcome: outbound.Outcome) -> str:
    """The draft's category of a failed POST: never the endpoint's own words."""
    if outcome.status_code is not None:
        return "http_5xx" if outcome.status_code >= 500 else "http_4xx"
    error = outcome.error or ""
    if error.startswith("no answer within") or "Timeout" in error:
        return "timeout"
    if "SSL" in error or "TLS" in error or "certificate" in error.lower():
        return "tls_error"
    return "connection_refused"  # refused, unreachable, or an address the registry does not call


def subscription_id(tenant: Tenant, principal: str, url: str, name: str, arguments: Any) -> str:
    """The key's handle: deterministic over (principal, url, name, arguments) in the tenant."""
    key = orjson.dumps(
        [str(tenant.id), principal, url, name, arguments], option=orjson.OPT_SORT_KEYS
    )
    return "sub_" + hashlib.sha256(key).hexdigest()[:32]


def _principal(call: Call) -> str:
    """The caller's canonical identity (an API key's id or a token's subject and issuer); webhook
    delivery needs one, as the draft says: the key would be guessable without it."""
    principal = call.principal
    if principal.anonymous or principal.system is not None or principal.operator:
        raise EventForbidden(
            "webhook delivery needs a key or token of the tenant (events/subscribe and "
            "events/unsubscribe are keyed by who calls); poll and push need none",
            data={"reason": "unauthenticated"},
        )
    return principal.actor


def _url(delivery: Delivery, settings: Settings) -> tuple[str, str, int]:
    try:
        scheme, host, port = outbound.check_url(delivery.url)
    except outbound.Refused as refused:
        raise InvalidParams(f"invalid params: delivery.url: {refused}") from None
    if scheme != "https" and not settings.webhook_allow_private:
        raise InvalidParams("invalid params: delivery.url: a callback URL must be https")
    return scheme, host, port


def _secret(delivery: Delivery) -> str:
    value = delivery.secret or ""
    match = _SECRET.fullmatch(value)
    try:
        size = len(base64.b64decode(match.group(1), validate=True)) if match else 0
    except (binascii.Error, ValueError):
        size = 0
    if not 24 <= size <= 64:
        raise InvalidParams(
            "invalid params: delivery.secret: whsec_ followed by the base64 of 24 to 64 random "
            "bytes (the client makes it; this server never does)"
        )
    return value


def _grant(parsed: SubscribeParams, principal: Principal, now: datetime) -> datetime:
    """refreshBefore: the suggestion, clamped to [1 min, 1 day] (no expiry, asked with ``null``,
    gets the longest), and never past the caller's key or token."""
    if parsed.ttlMs is None:
        asked_none = "ttlMs" in parsed.model_fields_set
        seconds = float(MAX_TTL_SECONDS if asked_none else DEFAULT_TTL_SECONDS)
    else:
        seconds = min(max(parsed.ttlMs / 1000, MIN_TTL_SECONDS), MAX_TTL_SECONDS)
    until = now + timedelta(seconds=seconds)
    if principal.expires_at is not None:
        until = min(until, principal.expires_at)
    return until


def _iso(at: datetime | None) -> str | None:
    return None if at is None else events.zulu(at)


class Challenges:
    """The verification handshake, bounded per destination host (a worker sends at most
    ``VERIFICATIONS_PER_HOST`` challenges to one host a minute)."""

    def __init__(self) -> None:
        self._sent: dict[str, deque[float]] = {}

    def _allow(self, host: str) -> bool:
        now = time.monotonic()
        sent = self._sent.setdefault(host, deque())
        while sent and sent[0] < now - 60:
            sent.popleft()
        if len(sent) >= VERIFICATIONS_PER_HOST:
            return False
        sent.append(now)
        if len(self._sent) > 10_000:  # bounded: the oldest hosts are forgotten
            self._sent.pop(next(iter(self._sent)))
        return True

    async def verify(self, settings: Settings, url: str, host: str, secret: str, sid: str) -> None:
        """POST a signed challenge; the endpoint must echo it in a 2xx body (compared in constant
        time), else CallbackEndpointError with the draft's category."""
        if not self._allow(host):
            raise ResourceExhausted(
                f"too many verifications sent to {host} in the last minute; try again later",
                data={"limit": "verifications", "max": VERIFICATIONS_PER_HOST},
            )
        challenge = secrets.token_urlsafe(32)
        body = orjson.dumps({"type": "verification", "challenge": challenge}).decode()
        message_id = f"msg_verification_{uuid.uuid4().hex}"
        outcome = await _post(settings, url, secret, None, message_id, sid, body)
        if not outcome.ok:
            raise CallbackEndpointError(
                "the callback endpoint did not accept the verification challenge",
                data={"reason": category(outcome)},
            )
        try:
            echoed = orjson.loads(outcome.body or "").get("challenge")
        except (orjson.JSONDecodeError, AttributeError):
            echoed = None
        if not isinstance(echoed, str) or not hmac.compare_digest(echoed, challenge):
            raise CallbackEndpointError(
                "the callback endpoint answered without echoing the challenge "
                '({"challenge": "<the nonce>"} in a 2xx body)',
                data={"reason": "challenge_failed"},
            )


CHALLENGES = Challenges()


async def _post(
    settings: Settings,
    url: str,
    secret: str,
    previous: tuple[str, datetime] | None,
    message_id: str,
    sid: str,
    body: str,
) -> outbound.Outcome:
    row = {
        "secret": secret,
        "previous_secret": previous[0] if previous else None,
        "previous_until": previous[1] if previous else None,
        "message_id": message_id,
    }
    headers = signature_headers(row, body, datetime.now(UTC)) | {HEADER_ID: sid}
    return await outbound.post(
        url,
        body.encode(),
        headers,
        seconds=settings.webhook_timeout_seconds,
        allow_private=settings.webhook_allow_private,
        allowed_by="REGISTRY_WEBHOOK_ALLOW_PRIVATE",
    )


async def _start(
    call: Call, position: events.Position
) -> tuple[int, bool]:  # where delivery starts, and whether that skipped events
    tenant = call.tenant
    if position.after is None:
        return tenant.change_seq, False
    session = await call.tx.session(write=True)
    start, truncated = await replay_from(session, tenant.id, position.after, tenant.change_seq)
    if position.floor is not None:
        last = await db_repo.last_change_before(session, tenant.id, start, position.floor)
        if last is not None:
            start, truncated = last, True
    return start, truncated


async def _admit(
    call: Call, principal: str, sid: str, url: str, address: tuple[str, int], secret: str
) -> None:
    """A new key is within the limits, and its endpoint proved its intent (once per principal and
    URL): checked before anything is written, with no transaction open during the handshake."""
    tenant = call.tenant
    async with call.db.tenant_tx(tenant.id) as session:
        if await repo.find(session, tenant.id, sid) is not None:
            return  # a refresh
        proven = await repo.verified(session, tenant.id, principal, url)
        mine, every = await repo.counts(session, tenant.id, principal)
    for held, most in ((mine, MAX_PER_PRINCIPAL), (every, MAX_PER_TENANT)):
        if held >= most:
            raise ResourceExhausted(
                f"at most {most} webhook subscriptions here; unsubscribe from some first",
                data={"limit": "subscriptions", "max": most},
            )
    if proven:
        return
    host, port = address
    try:
        await outbound.resolve(host, port, allow_private=call.settings.webhook_allow_private)
    except outbound.PrivateAddress as refused:
        hint = outbound.allowed_hint("REGISTRY_WEBHOOK_ALLOW_PRIVATE")
        raise InvalidParams(f"invalid params: delivery.url: {refused}{hint}") from None
    except outbound.Refused:
        raise CallbackEndpointError(
            "the callback host does not resolve", data={"reason": "connection_refused"}
        ) from None
    await CHALLENGES.verify(call.settings, url, host, secret, sid)


async def events_subscribe(call: Call, parsed: SubscribeParams) -> dict[str, Any]:
    """Create or refresh the caller's webhook subscription: verified first when the principal has
    none to this URL; answered with its id, the grant, the watermark cursor and, on a refresh,
    how delivery goes."""
    principal = _principal(call)
    if parsed.delivery.mode not in (None, "webhook"):
        raise Unsupported(
            f"events/subscribe is for webhook delivery, not {parsed.delivery.mode!r}",
            data={"feature": "deliveryMode", "value": parsed.delivery.mode},
        )
    events.replayed(parsed.name, "webhook")
    _, host, port = _url(parsed.delivery, call.settings)
    secret = _secret(parsed.delivery)
    position = events.checked(call.tokens, call.tenant, call.principal, parsed)
    tenant, url = call.tenant, parsed.delivery.url
    arguments = parsed.arguments or {}
    sid = subscription_id(tenant, principal, url, parsed.name, arguments)
    await _admit(call, principal, sid, url, (host, port), secret)
    now = datetime.now(UTC)
    start, truncated = await _start(call, position)
    grant = _grant(parsed, call.principal, now)
    session = await call.tx.session(write=True)
    existing = await repo.find(session, tenant.id, sid)
    row = None
    if existing is None:
        row = await repo.insert_subscription(
            session,
            tenant_id=tenant.id,
            id=sid,
            principal=principal,
            url=url,
            name=parsed.name,
            arguments=arguments,
            secret=secret,
            expires_at=grant,
            position=start,
        )
        if row is None:  # a subscribe of the same key committed meanwhile: this is its refresh
            existing = await repo.find(session, tenant.id, sid)
    status: dict[str, Any] | None = None
    if existing is not None:
        status = {
            "active": existing.active,
            "lastDeliveryAt": _iso(existing.last_delivery_at),
            "lastError": existing.last_error,
        }
        if existing.failed_since is not None:
            status["failedSince"] = _iso(existing.failed_since)
        values: dict[str, Any] = {"expires_at": grant, "active": True}
        if not existing.active:
            values |= {"next_attempt_at": now, "failed_since": None}
        if secret != existing.secret:  # a rotation: the old secret signs too for a while
            values |= {
                "secret": secret,
                "previous_secret": existing.secret,
                "previous_until": now + ROTATION_GRACE,
            }
        if existing.expires_at <= now:  # lapsed (not yet swept): delivery starts afresh
            values |= {"position": start, "attempts": 0, "next_attempt_at": now}
            status = None
        elif position.after is not None and start > existing.position:
            values["position"] = start  # the client holds a later cursor: nothing before it
        else:
            truncated = False  # live, and the cursor at or behind it: delivery goes on
        row = await repo.update_subscription(session, tenant.id, sid, **values)
    assert row is not None
    result: dict[str, Any] = {
        "resultType": "complete",
        "id": sid,
        "refreshBefore": _iso(row.expires_at),
        "cursor": events.cursor(call.tokens, position, row.position),
        "truncated": truncated,
    }
    if status is not None:
        result["deliveryStatus"] = status
    return result


async def events_unsubscribe(call: Call, parsed: UnsubscribeParams) -> dict[str, Any]:
    """End the caller's subscription of that key at once (NotFound when there is none)."""
    principal = _principal(call)
    arguments = parsed.arguments or {}
    sid = subscription_id(call.tenant, principal, parsed.delivery.url, parsed.name, arguments)
    session = await call.tx.session(write=True)
    if not await repo.delete_subscription(session, call.tenant.id, sid):
        raise EventNotFound(
            "no webhook subscription of yours with this name, arguments and delivery.url",
            data={"kind": "subscription"},
        )
    return {"resultType": "complete"}


# --- delivery -----------------------------------------------------------------------------------


class Deliverer(Pump):
    """Each worker's webhook dispatcher for event subscriptions: woken when a change of a tenant
    with a subscription commits (the trigger of schema 0036 says so), and every
    ``webhook_poll_seconds`` for retries and expiries."""

    failed = "event_dispatch_failed"

    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(settings.webhook_poll_seconds, PER_WORKER)
        self.db = db
        self.settings = settings
        # A lease covers one POST and its settling (as long again as the POST's timeout, at least
        # a second); each settle extends it by as much again.
        timeout = settings.webhook_timeout_seconds
        self.lease_seconds = timeout + max(timeout, 1.0)
        self._swept = -math.inf

    async def claim(self) -> int:
        async with self.db.operator_tx() as session:
            now = time.monotonic()
            if now >= self._swept + self.poll:  # expired grants: once a poll interval, not per poke
                await repo.sweep_expired(session)
                self._swept = now
            rows = await repo.claim_due(
                session, self.free, per_tenant=PER_TENANT, lease_seconds=self.lease_seconds
            )
        for row in rows:
            self.start(self._logged(row))
        return len(rows)

    async def _logged(self, row: dict[str, Any]) -> None:
        try:
            await self.deliver(row)
        except (SQLAlchemyError, OSError) as error:  # the lease runs out: another worker goes on
            logger.warning(
                "event_delivery_failed", extra={"fields": {"error": type(error).__name__}}
            )

    async def deliver(self, row: dict[str, Any]) -> None:
        """What follows the subscription's position, POSTed in order under its lease."""
        tenant_id, sid, lease = row["tenant_id"], row["id"], row["lease"]
        codec = await self.db.tokens()
        async with self.db.tenant_tx(tenant_id) as session:
            tenant = await tenant_service.find_tenant_by_id(session, tenant_id)
            if tenant is None:
                return
            if await self._revoked(session, tenant, row["principal"]):
                batch = None
            else:
                position = self._position(tenant, row)
                after, gap = await replay_from(
                    session, tenant_id, row["position"], tenant.change_seq
                )
                batch = await events.read(session, tenant, position, after, BATCH)
        if batch is None:
            await self._terminate(tenant, row)
            return
        settle = self._settler(tenant_id, sid, lease)
        if gap:  # the log no longer holds what follows the position: said, then moved past
            body = {"type": "gap", "cursor": events.cursor(codec, position, after)}
            outcome = await self._send(row, f"msg_gap_{uuid.uuid4().hex}", body)
            if not (outcome.ok or outcome.status_code in NOT_RETRIED):  # tried again, as events are
                await self._failed(settle, row, after, outcome, datetime.now(UTC))
                return
            if not await settle(extend=True, position=after):
                return
        for event in batch.events:
            seq = event["data"]["seq"]
            event["cursor"] = events.cursor(codec, position, seq)
            outcome = await self._send(row, event["eventId"], event)
            now = datetime.now(UTC)
            if not (outcome.ok or outcome.status_code in NOT_RETRIED):
                await self._failed(settle, row, seq, outcome, now)
                return
            done: dict[str, Any] = {"position": seq, "attempts": 0}
            if outcome.ok:
                done |= {"last_delivery_at": now, "last_error": None, "failed_since": None}
                row["failed_since"] = None
            row["attempts"] = 0
            if not await settle(extend=True, **done):
                return
        await settle(extend=False, position=batch.after)

    def _position(self, tenant: Tenant, row: dict[str, Any]) -> events.Position:
        arguments = row["arguments"] or {}
        filters = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
        return events.Position(
            row["name"],
            (arguments.get("name"), arguments.get("label")),
            row["position"],
            None,
            (str(tenant.id), row["name"], filters),
        )

    def _settler(self, tenant_id: uuid.UUID, sid: str, lease: uuid.UUID) -> Any:
        async def settle(*, extend: bool, **values: Any) -> bool:
            async with self.db.tenant_tx(tenant_id) as session:
                extend_seconds = self.lease_seconds if extend else None
                return await repo.settle(
                    session, tenant_id, sid, lease, extend_seconds=extend_seconds, **values
                )

        return settle

    async def _failed(
        self, settle: Any, row: dict[str, Any], seq: int, outcome: outbound.Outcome, now: datetime
    ) -> None:
        """One failed try of the event after the position: tried again later, or abandoned after
        the last try; an endpoint failing for an hour is suspended."""
        attempts = row["attempts"] + 1
        failed_since = row["failed_since"] or now
        values: dict[str, Any] = {"last_error": category(outcome), "failed_since": failed_since}
        if attempts > len(RETRY_FACTORS):
            values |= {"position": seq, "attempts": 0, "next_attempt_at": now}  # abandoned
        else:
            delay = self.settings.webhook_retry_seconds * RETRY_FACTORS[attempts - 1]
            values |= {"attempts": attempts, "next_attempt_at": now + timedelta(seconds=delay)}
        if now - failed_since >= SUSPEND_AFTER:
            values["active"] = False
        await settle(extend=False, **values)
        fields = {
            "tenant_id": str(row["tenant_id"]),
            "subscription": row["id"],
            "attempt": attempts,
            "reason": values["last_error"],
        }
        logger.warning("event_delivery_attempt_failed", extra={"fields": fields})

    async def _revoked(self, session: Any, tenant: Tenant, principal: str) -> bool:
        """Whether the subscriber's key was revoked or expired (a token's subscription ends with
        the token: its grant never outlasts it)."""
        if not principal.startswith("key:"):
            return False
        try:
            key_id = uuid.UUID(principal.removeprefix("key:"))
        except ValueError:
            return True
        return key_id not in await tenant_service.live_key_ids(session, tenant.id)

    async def _terminate(self, tenant: Tenant, row: dict[str, Any]) -> None:
        """The caller's access is gone: a signed ``terminated`` envelope, and the subscription
        is no more."""
        error = {"code": EVENT_FORBIDDEN, "message": "Forbidden", "data": {"reason": "revoked"}}
        body = {"type": "terminated", "error": error}
        await self._send(row, f"msg_terminated_{uuid.uuid4().hex}", body)
        async with self.db.tenant_tx(tenant.id) as session:
            await repo.delete_subscription(session, tenant.id, row["id"])

    async def _send(
        self, row: dict[str, Any], message_id: str, body: dict[str, Any]
    ) -> outbound.Outcome:
        previous = None
        if row["previous_secret"] and row["previous_until"] is not None:
            previous = (row["previous_secret"], row["previous_until"])
        text = orjson.dumps(body).decode()
        return await _post(
            self.settings, row["url"], row["secret"], previous, message_id, row["id"], text
        )
