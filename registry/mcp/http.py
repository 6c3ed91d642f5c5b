"""Streamable HTTP (2025-03-26 to 2025-11-25) on /mcp/{tenant} and /mcp/{tenant}/{label}.

POST carries one JSON-RPC message (a batch too, in a 2025-03-26 session) and gets JSON back, or 202
for notifications and responses. GET opens the session's SSE stream (list_changed goes there, with the
tenant's change sequence as event id). DELETE ends the session. Sessions live in PostgreSQL, so any
worker serves any request of any session.

It moves bytes and keeps streams: who the caller is comes from registry.tenants.access, what a
revision has from registry.revisions, the messages it streams from registry.mcp.notifications, and
their framing and keep-alive from registry.events.streams.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, suppress
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from starlette.responses import Response

from registry.bodies import BodyReader
from registry.config import Settings
from registry.db.engine import Database, LazyTx
from registry.db.models import McpSession, Tenant
from registry.errors import NotFound, RegistryError, Unauthenticated
from registry.events import streams
from registry.events.hub import Hub, Subscription
from registry.events.streams import KEEP_ALIVE, EventStream, StreamSlots, caller_of, frame
from registry.mcp import core, errors, events, handlers, notifications, stateless
from registry.mcp.asgi import (
    Request,
    cors,
    json_answer,
    origin_allowed,
    preflight,
    refuse,
)
from registry.mcp.caching import McpCaches
from registry.mcp.core import Core
from registry.mcp.errors import (
    BodyTimeout,
    BodyTooLarge,
    InvalidRequest,
    McpError,
    MethodNotAllowed,
    MethodNotFound,
    NotAcceptable,
)
from registry.mcp.protocol import Message, error_message
from registry.mcp.replay import Replays, Served
from registry.metrics import REQUESTS, tally
from registry.naming import LABEL_RE, SERVER_CARD
from registry.principal import Principal
from registry.prompts import reading
from registry.revisions import ALL_REVISIONS, revision_of
from registry.sessions import service as sessions
from registry.tenants import access, oauth
from registry.tenants import service as tenants
from registry.tenants.access import TenantScope
from registry.tenants.oauth import TokenVerifier
from registry.usage.ledger import Ledger

logger = logging.getLogger("registry.mcp")
SESSION_HEADER = "mcp-session-id"
RETRY_MS = 3000  # how long a client waits before reconnecting a dropped GET stream
VERSION_HEADER = "mcp-protocol-version"
# On the scope of a request that answer_at_once could not answer: its digest (None: not one whose
# answer may be kept), so that __call__ neither identifies it nor looks it up again.
_TRIED_AT_ONCE = "registry.mcp.tried_at_once"


class McpEndpoint:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        hub: Hub,
        caches: McpCaches,
        tokens: TokenVerifier | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self.hub = hub
        self.caches = caches
        self.tokens = tokens
        self.core = Core(settings, db, caches, ledger)
        self.replays = Replays(caches, self.core.ledger)
        self.bodies = BodyReader(settings.body_timeout_seconds)
        self.slots = StreamSlots(settings.streams_per_caller, settings.streams_per_tenant)
        self.session_bounds = sessions.Bounds(
            settings.sessions_per_caller, settings.sessions_per_tenant
        )
        self.idle = timedelta(seconds=settings.session_idle_seconds)
        self.streams: dict[str, Subscription] = {}  # session id -> its open GET stream here

    @staticmethod
    def match(path: str) -> dict[str, str] | None:
        """The path parameters of ``/mcp/{tenant}`` and ``/mcp/{tenant}/{label}`` (with or without a
        trailing slash, as clients write it), else None."""
        parts = path.removesuffix("/").split("/")
        if len(parts) not in (3, 4) or parts[1] != "mcp" or not all(parts[2:]):
            return None
        if parts[-1] == SERVER_CARD:  # the endpoint's Server Card (registry.api.cards)
            return None
        return {"tenant": parts[2], "label": parts[3]} if len(parts) == 4 else {"tenant": parts[2]}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """A plain ASGI app (the registry app routes MCP paths here before its middleware)."""
        request = Request(scope, receive)
        if _TRIED_AT_ONCE in scope:  # the protocol identified it, and had no kept answer for it
            request.digest = scope[_TRIED_AT_ONCE]
        elif request.method == "POST" and self.caches.enabled:
            with suppress(McpError):  # refused on the full path
                request.digest = self.replays.identify(scope, await self._body(request))
            if request.digest is not None and await self.replays.answer(request.digest, send):
                return
        origin = request.headers.get("origin")
        allowed = origin is not None and origin_allowed(origin, self.settings.allowed_origins)
        if request.method == "OPTIONS":
            response = (
                preflight()
                if allowed
                else refuse(errors.Forbidden(f"origin {origin!r} is not allowed"))
            )
        elif origin is not None and not allowed:
            forbidden = errors.Forbidden(f"origin {origin!r} is not allowed")
            response = refuse(forbidden, self.metadata_url(request))
        elif request.method not in ("GET", "POST", "DELETE"):
            response = refuse(
                MethodNotAllowed(
                    f"method {request.method} is not allowed here",
                    headers={"Allow": "GET, POST, DELETE, OPTIONS"},
                )
            )
        else:
            response = await self.handle(request)
        if allowed and origin is not None:  # a browser client of an allowed origin may read it
            response.headers.update(cors(origin))
        if (
            request.served is not None
            and request.digest is not None
            and response.status_code == 200
        ):
            self.replays.keep(request.digest, request.served, response.raw_headers)
        del request  # an open stream keeps its own state only, not the request it came from
        await response(scope, receive, send)

    def answer_at_once(
        self, scope: Any, body: bytes
    ) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The kept answer to a POST of this endpoint whose whole body came with its head, for the
        HTTP protocol to send itself without starting a task (``registry.http_protocol``): the same
        first step as ``__call__``'s, decided from the same bytes; None: the request goes to
        ``__call__`` as usual."""
        if not self.caches.enabled or len(body) > self.settings.max_request_bytes:
            return None
        found = self.replays.identify(scope, body)
        taken = None if found is None else self.replays.take(found)
        if taken is None:  # the task's __call__ takes the full path, with this digest
            scope[_TRIED_AT_ONCE] = found
        return taken

    async def _body(self, request: Request) -> bytes:
        """The request body, read once (the answer or the error kept on the request)."""
        if request.body is None:
            try:
                request.body = await self._read_body(request)
            except McpError as error:
                request.body = error
        if isinstance(request.body, Exception):
            raise request.body
        return request.body

    async def _read_body(self, request: Request) -> bytes:
        """The request body, refused (413) past ``max_request_bytes``, declared or actual, and
        (408) when it does not arrive within the body timeout."""
        limit = self.settings.max_request_bytes
        declared = request.header("content-length")
        if declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(f"request body is larger than the limit of {limit} bytes")
        try:
            body = await self.bodies.read(request.receive, limit)
        except TimeoutError:
            raise BodyTimeout(
                f"the request body did not arrive within "
                f"{self.settings.body_timeout_seconds:g} seconds"
            ) from None
        if body.data is None:
            raise BodyTooLarge(f"request body is larger than the limit of {limit} bytes")
        if body.disconnected:
            raise InvalidRequest("the client went away before the request body was complete")
        return body.data

    async def handle(self, request: Request) -> Response:
        """A request whose origin, if it has one, is allowed (the caller checked it)."""
        try:
            label = request.path_params.get("label")
            if label is not None and not LABEL_RE.fullmatch(label):
                raise NotFound(f"invalid label {label!r} in the path")
            if request.method == "POST":
                return await self.post(request, label)
            if SESSION_HEADER not in request.headers:
                # 2026-07-28 has no GET stream and no session to delete; a wrong credential is
                # told first (401 with its challenge), as a POST's would be: a client probing
                # with a GET reports what is wrong, not the method.
                await self._who(request)
                raise MethodNotAllowed(
                    f"{request.method} needs an Mcp-Session-Id (a "
                    "session-era revision); stateless clients use subscriptions/listen",
                    headers={"Allow": "POST"},
                )
            _check_version_header(request.headers.get(VERSION_HEADER))
            if request.method == "GET":
                return await self.get(request, label)
            return await self.delete(request, label)
        except (McpError, RegistryError, sessions.SessionGone) as error:
            return refuse(error, self.metadata_url(request))
        except Exception as error:  # noqa: BLE001 - the transport's last word is still JSON-RPC
            down = errors.unavailable(error)
            if down is not None:
                return refuse(down)
            answer = errors.internal(error, request.method)
            tally(REQUESTS, "mcp", "transport", "error").inc()
            return json_answer(error_message(None, answer.code, answer.message, answer.data), 500)

    def metadata_url(self, request: Request) -> str | None:
        """The protected resource metadata (RFC 9728) of the endpoint this request came to."""
        url = request.url
        base = self.settings.public_url or f"{url.scheme}://{url.netloc}"
        return oauth.metadata_url(base, url.path)

    def _scope(self, request: Request) -> AbstractAsyncContextManager[TenantScope]:
        return access.tenant_scope(
            self.db,
            self.settings.operator_token,
            request.path_params["tenant"],
            access.parse_bearer(request.headers.get("authorization")),
            "reader",
            allow_anonymous=True,
            tokens=self.tokens,
        )

    async def _who(self, request: Request) -> tuple[Tenant, Principal]:
        """The path's tenant and the caller (remembered by this worker while its caches hold)."""
        return await access.reader(
            self.db,
            self.settings.operator_token,
            request.path_params["tenant"],
            access.parse_bearer(request.headers.get("authorization")),
            tokens=self.tokens,
            remembered=self.caches.directory if self.caches.enabled else None,
        )

    async def _resume(self, request: Request, scope: TenantScope, label: str | None) -> McpSession:
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            raise InvalidRequest("missing Mcp-Session-Id header: initialize first")
        return await sessions.resume(
            scope.session,
            tenant_id=scope.tenant.id,
            session_id=session_id,
            label=label or scope.tenant.default_label,
            key_id=scope.principal.key_id,
            idle=self.idle,
        )

    # --- POST ------------------------------------------------------------------------------------

    async def post(self, request: Request, label: str | None) -> Response:
        parsed = core.parse(await self._body(request))
        first = parsed.first
        session_id = request.headers.get(SESSION_HEADER)
        version = request.headers.get(VERSION_HEADER)
        if (
            not parsed.batch
            and isinstance(first, Message)
            and stateless.is_stateless(first, version, session_id)
        ):
            return await self.stateless_post(request, label, first)
        _check_version_header(version)
        initialize = [
            m for m in parsed.items if isinstance(m, Message) and m.method == "initialize"
        ]
        if initialize and parsed.batch:
            raise InvalidRequest("initialize must not be sent in a batch")

        async with self._scope(request) as scope:
            served = label or scope.tenant.default_label
            access.check_anonymous(scope.tenant, scope.principal, served)
            if initialize:
                address = request.client_host
                return await self._initialize(scope, served, initialize[0], address)
            session = await self._resume(request, scope, label)
            if parsed.batch and not revision_of(session.protocol_version).batches:
                raise InvalidRequest(
                    f"batches are not part of protocol revision {session.protocol_version}"
                )
            responses: list[dict[str, Any]] = []
            async with LazyTx(self.db, scope.tenant.id, scope.session, reads_on_replica=True) as tx:
                for message in parsed.items:
                    if isinstance(message, McpError):
                        responses.append(core.answer_error(message.request_id, message))
                        continue
                    answer, _, _ = await self.core.call(
                        tx,
                        scope.tenant,
                        scope.principal,
                        served,
                        session.protocol_version,
                        message,
                        session=session,
                    )
                    if answer is not None:
                        responses.append(answer)
        if not responses:
            return Response(status_code=202)
        return json_answer(responses if parsed.batch else responses[0])

    async def _initialize(
        self, scope: TenantScope, served: str, message: Message, address: str | None
    ) -> Response:
        await reading.check_label(scope.session, scope.tenant, served)
        revision, response = self.core.initialize(message, scope.tenant, served)
        if revision is None:
            return json_answer(response)
        session = await sessions.start(
            scope.session,
            tenant_id=scope.tenant.id,
            label=served,
            key_id=scope.principal.key_id,
            client_address=address,
            protocol_version=revision,
            client_info=message.params.get("clientInfo"),
            client_capabilities=message.params.get("capabilities") or {},
            bounds=self.session_bounds,
        )
        logger.info(
            "mcp_session_started",
            extra={"fields": {"tenant": scope.tenant.slug, "label": served, "revision": revision}},
        )
        return json_answer(response, headers={"Mcp-Session-Id": session.id})

    # --- 2026-07-28: stateless requests ------------------------------------------------------

    async def stateless_post(
        self, request: Request, label: str | None, message: Message
    ) -> Response:
        if message.kind == "response":
            raise InvalidRequest("clients send no responses in this protocol revision")
        if message.kind == "notification":
            return Response(status_code=202)
        try:
            revision = self.core.stateless_revision(message, request.headers)
        except McpError as error:
            error.request_id = message.id
            raise
        tenant, principal = await self._who(request)
        if not handlers.offered(tenant, message.method):
            raise MethodNotFound(f"method not found: {message.method}", request_id=message.id)
        served = label or tenant.default_label
        access.check_anonymous(tenant, principal, served)
        if message.method == "subscriptions/listen":
            release = self.slots.take(tenant.id, caller_of(principal, request.client_host))
            return self._listen(message, tenant, principal, served, release)
        if message.method == "events/stream":
            return await self._events(request, message, tenant, principal)
        async with LazyTx(self.db, tenant.id, reads_on_replica=True) as tx:
            answer, key, counted = await self.core.call(
                tx, tenant, principal, served, revision, message
            )
        assert answer is not None
        if key is not None and "result" in answer:  # perhaps kept: the bytes may be answered again
            assert message.method is not None  # a request's (only requests' answers are kept)
            credential = access.parse_bearer(request.headers.get("authorization"))
            request.served = Served(tenant, principal, credential, key, message.method, counted)
        return json_answer(answer)

    async def _events(
        self, request: Request, message: Message, tenant: Tenant, principal: Principal
    ) -> Response:
        """An ``events/stream`` (the Events extension's push delivery): refused at once with the
        draft's error, else a stream of the subscription's events until the client goes away."""
        codec = await self.db.tokens()
        try:
            parsed = events.PollParams.model_validate(message.params)
            position = events.checked(codec, tenant, principal, parsed)
        except (ValidationError, McpError) as error:  # the draft: an error, and no stream opened
            answer = errors.in_result(error, message.method)
            return json_answer(error_message(message.id, answer.code, answer.message, answer.data))
        release = self.slots.take(tenant.id, caller_of(principal, request.client_host))
        subscription = self.hub.subscribe(tenant.id, None, seen=tenant.change_seq, owner=principal)
        frames = events.pushed(
            self.db,
            codec,
            tenant,
            position,
            subscription,
            message.id,
            self.settings.sse_keepalive_seconds,
        )
        return EventStream(events.framed(frames), subscription, release=release)

    def _listen(
        self,
        message: Message,
        tenant: Tenant,
        principal: Principal,
        label: str,
        release: Callable[[], None],
    ) -> Response:
        request_id, granted = message.id, notifications.honored(message, tenant)  # not the message
        # The same bytes on every change, for each list kind the client asked about.
        changed = b"".join(
            frame(notifications.list_changed(kind, request_id))
            for kind in notifications.honored_kinds(granted)
        )
        subscription = self.hub.subscribe(tenant.id, label, seen=tenant.change_seq, owner=principal)
        events = self._listened(subscription, request_id, granted, changed)
        return EventStream(events, subscription, release=release)

    async def _listened(
        self,
        subscription: Subscription,
        request_id: str | int | None,
        granted: dict[str, bool],
        changed: bytes,
    ) -> AsyncGenerator[bytes]:
        """A listen stream's bytes (a method, not a closure: one function object and its cells
        fewer for each open stream)."""
        with subscription:
            yield frame(notifications.acknowledged(request_id, granted))
            async for seq in streams.heard(subscription, self.settings.sse_keepalive_seconds):
                if seq is None:
                    yield KEEP_ALIVE
                elif changed:
                    yield changed
            if subscription.reason is not None:  # the caller may no longer read: say why
                yield frame(error_message(request_id, errors.UNAUTHORIZED, subscription.reason))
            else:  # the server ended it (shutdown): a graceful close
                yield frame(notifications.closed(request_id))

    # --- GET: the server-to-client stream ------------------------------------------------------

    async def get(self, request: Request, label: str | None) -> Response:
        if "text/event-stream" not in request.headers.get("accept", ""):
            raise NotAcceptable("GET opens an SSE stream: send Accept: text/event-stream")
        async with self._scope(request) as scope:
            session = await self._resume(request, scope, label)
            tenant_id, current = scope.tenant.id, scope.tenant.change_seq
            principal, kinds = scope.principal, notifications.served_kinds(scope.tenant)
        resume_from = streams.last_event_id(request.headers.get("last-event-id"), current)
        release = self.slots.take(tenant_id, caller_of(principal, request.client_host))
        subscription = self.hub.subscribe(
            tenant_id, session.label, seen=resume_from, owner=principal
        )
        events = self._stream(
            session.id, session.protocol_version, subscription, current, resume_from, kinds
        )
        return EventStream(events, subscription, release=release)

    async def _stream(
        self,
        session_id: str,
        revision: str,
        subscription: Subscription,
        current: int,
        resume_from: int,
        kinds: tuple[str, ...],
    ) -> AsyncGenerator[bytes]:
        with subscription:
            previous = self.streams.pop(session_id, None)
            if previous is not None:  # one message goes on one stream: the newest replaces the old
                previous.close()
            self.streams[session_id] = subscription
            try:
                if revision_of(revision).priming:
                    yield frame(None, event_id=current, retry_ms=RETRY_MS)
                if resume_from < current:  # missed changes while away: tell at once
                    subscription.offer(current)
                keepalive = self.settings.sse_keepalive_seconds
                async for seq in streams.heard(subscription, keepalive):
                    if seq is None:
                        yield KEEP_ALIVE
                    else:
                        for kind in kinds:
                            yield frame(notifications.list_changed(kind), event_id=seq)
            finally:
                if self.streams.get(session_id) is subscription:
                    del self.streams[session_id]

    # --- who may keep a stream open ------------------------------------------------------------

    async def revalidate(self, tenant_id: uuid.UUID) -> None:
        """Who may read the tenant may have changed (a key revoked, public_read switched off):
        end the open streams of this worker whose caller no longer may, saying why."""
        opened = self.hub.subscriptions(tenant_id)
        if not any(isinstance(s.owner, Principal) for s in opened):
            return
        async with self.db.tenant_tx(tenant_id) as session:
            tenant = await tenants.find_tenant_by_id(session, tenant_id)
            live = await tenants.live_key_ids(session, tenant_id)
        for subscription in opened:
            owner = subscription.owner
            if not isinstance(owner, Principal) or owner.operator:
                continue
            if tenant is None:
                subscription.close("the tenant no longer exists")
            elif owner.key_id is not None and owner.key_id not in live:
                subscription.close("the API key was revoked or has expired")
            elif owner.anonymous:
                try:
                    if not tenant.public_read:
                        raise Unauthenticated("the tenant no longer serves anonymous readers")
                    access.check_anonymous(tenant, owner, subscription.label)
                except Unauthenticated as refused:
                    subscription.close(refused.message)

    def session_ended(self, tenant_id: uuid.UUID, session_id: str) -> None:
        """A session ended through any worker: its stream, if this worker holds it, ends too."""
        stream = self.streams.get(session_id)
        if stream is not None and stream.tenant_id == tenant_id:
            stream.close("the session ended")

    # --- DELETE ----------------------------------------------------------------------------------

    async def delete(self, request: Request, label: str | None) -> Response:
        async with self._scope(request) as scope:
            session = await self._resume(request, scope, label)
            await sessions.end(scope.session, session)
        stream = self.streams.pop(session.id, None)
        if stream is not None:
            stream.close()
        return Response(status_code=204)


def _check_version_header(version: str | None) -> None:
    if version is not None and version not in ALL_REVISIONS:
        raise InvalidRequest(
            f"unsupported MCP-Protocol-Version {version!r}; supported: {', '.join(ALL_REVISIONS)}"
        )
