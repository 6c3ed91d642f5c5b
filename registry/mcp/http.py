"""Streamable HTTP (2025-03-26 to 2025-11-25) on /mcp/{tenant} and /mcp/{tenant}/{label}.

POST carries one JSON-RPC message (a batch too, in a 2025-03-26 session) and gets JSON back, or 202
for notifications and responses. GET opens the session's SSE stream (list_changed goes there, with the
tenant's change sequence as event id). DELETE ends the session. Sessions live in PostgreSQL, so any
worker serves any request of any session.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from registry.config import Settings
from registry.db.engine import Database, LazyTx
from registry.db.models import Tenant
from registry.errors import Forbidden, NotFound, Unauthenticated
from registry.events.hub import Hub, Subscription
from registry.mcp import handlers, stateless
from registry.mcp.caching import McpCaches
from registry.mcp.protocol import (
    ALL_REVISIONS,
    INVALID_REQUEST,
    NOT_FOUND,
    PARSE_ERROR,
    UNAUTHORIZED,
    McpError,
    Message,
    classify,
    encode_json,
    error_message,
    since,
)
from registry.naming import LABEL_RE
from registry.principal import Principal
from registry.sessions import service as sessions
from registry.tenants import access
from registry.tenants.access import TenantScope

logger = logging.getLogger("registry.mcp")
SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LIST_CHANGED_JSON = json.dumps({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})


def _json(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        encode_json(content),
        status_code=status_code,
        headers=headers,
        media_type="application/json",
    )


def _error(
    status: int,
    code: int,
    message: str,
    *,
    request_id: Any = None,
    data: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return _json(error_message(request_id, code, message, data), status, headers)


def origin_allowed(origin: str, allowed: list[str]) -> bool:
    """An allowed entry without a port admits that scheme and host on any port."""
    origin = origin.rstrip("/")
    if origin in allowed:
        return True
    parts = urlsplit(origin)
    bare = f"{parts.scheme}://{parts.hostname}" if parts.hostname else origin
    if parts.hostname and ":" in parts.hostname:  # IPv6 literal
        bare = f"{parts.scheme}://[{parts.hostname}]"
    return bare in allowed


class McpEndpoint:
    def __init__(self, settings: Settings, db: Database, hub: Hub, caches: McpCaches) -> None:
        self.settings = settings
        self.db = db
        self.hub = hub
        self.caches = caches
        self.idle = timedelta(seconds=settings.session_idle_seconds)
        self.streams: dict[str, Subscription] = {}  # session id -> its open GET stream here

    @staticmethod
    def match(path: str) -> dict[str, str] | None:
        """The path parameters of ``/mcp/{tenant}`` and ``/mcp/{tenant}/{label}``, else None."""
        parts = path.split("/")
        if len(parts) not in (3, 4) or parts[1] != "mcp" or not all(parts[2:]):
            return None
        return {"tenant": parts[2], "label": parts[3]} if len(parts) == 4 else {"tenant": parts[2]}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """A plain ASGI app (the registry app routes MCP paths here before its middleware)."""
        request = Request(scope, receive)
        if request.method not in ("GET", "POST", "DELETE"):
            response: Response = _error(
                405,
                INVALID_REQUEST,
                f"method {request.method} is not allowed here",
                headers={"Allow": "GET, POST, DELETE"},
            )
        else:
            response = await self.handle(request)
        await response(scope, receive, send)

    async def _body(self, request: Request) -> bytes:
        """The request body, refused (413) past ``max_request_bytes``, declared or actual."""
        limit = self.settings.max_request_bytes
        declared = request.headers.get("content-length", "")
        chunks: list[bytes] = []
        seen = int(declared) if declared.isdigit() else 0
        if seen <= limit:
            seen = 0
            async for chunk in request.stream():
                seen += len(chunk)
                if seen > limit:
                    break
                chunks.append(chunk)
        if seen > limit:
            raise McpError(
                INVALID_REQUEST,
                f"request body is larger than the limit of {limit} bytes",
                http_status=413,
            )
        return b"".join(chunks)

    async def handle(self, request: Request) -> Response:
        origin = request.headers.get("origin")
        if origin is not None and not origin_allowed(origin, self.settings.allowed_origins):
            return _error(403, UNAUTHORIZED, f"origin {origin!r} is not allowed")
        label = request.path_params.get("label")
        if label is not None and not LABEL_RE.fullmatch(label):
            return _error(404, NOT_FOUND, f"invalid label {label!r} in the path")
        version = request.headers.get(VERSION_HEADER)
        if request.method != "POST":
            if SESSION_HEADER not in request.headers:
                # 2026-07-28 has no GET stream and no session to delete.
                return _error(
                    405,
                    INVALID_REQUEST,
                    f"{request.method} needs an Mcp-Session-Id (a "
                    "session-era revision); stateless clients use subscriptions/listen",
                    headers={"Allow": "POST"},
                )
            if version is not None and version not in ALL_REVISIONS:
                return _error(400, INVALID_REQUEST, _unsupported(version))
        try:
            if request.method == "POST":
                return await self.post(request, label)
            if request.method == "GET":
                return await self.get(request, label)
            return await self.delete(request, label)
        except McpError as error:
            return _error(
                error.http_status,
                error.code,
                error.message,
                request_id=error.data,
                headers=error.headers,
            )
        except Unauthenticated as error:
            return _error(
                401,
                UNAUTHORIZED,
                error.message,
                headers={"WWW-Authenticate": 'Bearer realm="registry"'},
            )
        except Forbidden as error:
            return _error(403, UNAUTHORIZED, error.message)
        except NotFound as error:
            return _error(404, NOT_FOUND, error.message)
        except sessions.SessionGone:
            return _error(404, NOT_FOUND, "session not found or ended: initialize a new one")

    def _scope(self, request: Request) -> Any:
        return access.tenant_scope(
            self.db,
            self.settings.operator_token,
            request.path_params["tenant"],
            access.parse_bearer(request.headers.get("authorization")),
            "reader",
            allow_anonymous=True,
        )

    async def _who(self, request: Request) -> tuple[Tenant, Principal]:
        """The path's tenant and the caller: from this worker's directory when it has checked this
        credential before (the hot path: no database), else one transaction, remembered."""
        slug = request.path_params["tenant"]
        credential = access.parse_bearer(request.headers.get("authorization"))
        directory = self.caches.directory
        if self.caches.enabled and not access.is_operator(self.settings.operator_token, credential):
            tenant = directory.tenant(slug)
            if tenant is not None:
                if credential is None:
                    if tenant.public_read:
                        return tenant, Principal(role="reader", tenant_id=tenant.id, anonymous=True)
                else:
                    principal = directory.principal(tenant.id, credential)
                    if principal is not None:
                        return tenant, principal
        generation = directory.generation()
        async with self._scope(request) as scope:
            tenant, principal = scope.tenant, scope.principal
        if self.caches.enabled:
            directory.put_tenant(tenant, generation)
            if credential is not None and principal.key_id is not None:
                directory.put_principal(credential, principal, generation)
        return tenant, principal

    async def _call(
        self,
        tx: LazyTx,
        tenant: Tenant,
        principal: Principal,
        label: str | None,
        revision: str,
        session: Any = None,
    ) -> handlers.Call:
        return handlers.Call(
            db=self.db,
            tx=tx,
            tenant=tenant,
            label=label or tenant.default_label,
            principal=principal,
            revision=revision,
            settings=self.settings,
            mac_key=await self.db.mac_key(),
            caches=self.caches,
            session=session,
        )

    async def _resume(self, request: Request, scope: TenantScope, label: str | None) -> Any:
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            raise McpError(
                INVALID_REQUEST, "missing Mcp-Session-Id header: initialize first", http_status=400
            )
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
        try:
            payload = json.loads(await self._body(request))
        except (ValueError, UnicodeDecodeError):
            return _error(400, PARSE_ERROR, "parse error: the body is not valid JSON")
        batch = isinstance(payload, list)
        items = payload if batch else [payload]
        if batch and not items:
            return _error(400, INVALID_REQUEST, "an empty batch is not a valid request")
        messages: list[Message | McpError] = []
        for item in items:
            try:
                messages.append(classify(item))
            except McpError as error:
                if not batch:
                    return _error(400, error.code, error.message, request_id=error.data)
                messages.append(error)
        first = messages[0]
        session_id = request.headers.get(SESSION_HEADER)
        version = request.headers.get(VERSION_HEADER)
        if (
            not batch
            and isinstance(first, Message)
            and stateless.is_stateless(first, version, session_id)
        ):
            return await self.stateless_post(request, label, first)
        if version is not None and version not in ALL_REVISIONS:
            return _error(400, INVALID_REQUEST, _unsupported(version))
        initialize = [m for m in messages if isinstance(m, Message) and m.method == "initialize"]
        if initialize and batch:
            return _error(400, INVALID_REQUEST, "initialize must not be sent in a batch")

        async with self._scope(request) as scope:
            if initialize:
                return await self._initialize(scope, label, initialize[0])
            session = await self._resume(request, scope, label)
            if batch and session.protocol_version != "2025-03-26":
                raise McpError(
                    INVALID_REQUEST,
                    f"batches are not part of protocol revision {session.protocol_version}",
                    http_status=400,
                )
            tx = LazyTx(self.db, scope.tenant.id, scope.session)
            call = await self._call(
                tx, scope.tenant, scope.principal, label, session.protocol_version, session
            )
            responses: list[dict[str, Any]] = []
            for message in messages:
                if isinstance(message, McpError):
                    responses.append(error_message(message.data, message.code, message.message))
                    continue
                answer = await handlers.dispatch(call, message)
                if answer is not None:
                    responses.append(answer)
        if not responses:
            return Response(status_code=202)
        return _json(responses if batch else responses[0])

    async def _initialize(
        self, scope: TenantScope, label: str | None, message: Message
    ) -> Response:
        if message.kind != "request":
            raise McpError(
                INVALID_REQUEST, "initialize must be a request (with an id)", http_status=400
            )
        try:
            params = handlers.InitializeParams.model_validate(message.params)
        except ValueError as error:
            return _json(error_message(message.id, -32602, f"invalid initialize params: {error}"))
        revision = handlers.negotiate(params.protocolVersion)
        served = label or scope.tenant.default_label
        session = await sessions.start(
            scope.session,
            tenant_id=scope.tenant.id,
            label=served,
            key_id=scope.principal.key_id,
            protocol_version=revision,
            client_info=params.clientInfo,
            client_capabilities=params.capabilities,
        )
        result = handlers.initialize_result(revision, scope.tenant, served, self.settings)
        logger.info(
            "mcp_session_started",
            extra={"fields": {"tenant": scope.tenant.slug, "label": served, "revision": revision}},
        )
        return _json(
            {"jsonrpc": "2.0", "id": message.id, "result": result},
            headers={"Mcp-Session-Id": session.id},
        )

    # --- 2026-07-28: stateless requests ------------------------------------------------------

    async def stateless_post(
        self, request: Request, label: str | None, message: Message
    ) -> Response:
        if message.kind == "response":
            return _error(
                400, INVALID_REQUEST, "clients send no responses in this protocol revision"
            )
        if message.kind == "notification":
            return Response(status_code=202)
        try:
            revision = stateless.check_envelope(message, request.headers)
        except McpError as error:
            return _error(
                error.http_status, error.code, error.message, request_id=message.id, data=error.data
            )
        tenant, principal = await self._who(request)
        served = label or tenant.default_label
        if message.method == "subscriptions/listen":
            return self._listen(message, revision, tenant, served, tenant.change_seq)
        async with LazyTx(self.db, tenant.id) as tx:
            call = await self._call(tx, tenant, principal, label, revision)
            call.client_capabilities = stateless.client_capabilities(message)
            answer = await handlers.dispatch(call, message)
        assert answer is not None
        if "result" in answer:
            answer["result"] = stateless.complete(
                answer["result"], revision, tenant, served, self.settings.public_url
            )
        return _json(answer)

    def _listen(
        self, message: Message, revision: str, tenant: Any, label: str, current: int
    ) -> Response:
        honored = stateless.honored(message)

        async def events() -> AsyncIterator[bytes]:
            with self.hub.subscribe(tenant.id, label, seen=current) as subscription:
                yield _sse(stateless.acknowledged(message.id, honored))
                while not subscription.closed:
                    seq = await subscription.next(self.settings.sse_keepalive_seconds)
                    if seq is None:
                        if not subscription.closed:
                            yield b": keep-alive\n\n"
                    elif honored:
                        yield _sse(stateless.list_changed(message.id))
                yield _sse(
                    stateless.closed(message.id)
                )  # the server ended it (shutdown): a graceful close

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # --- GET: the server-to-client stream ------------------------------------------------------

    async def get(self, request: Request, label: str | None) -> Response:
        if "text/event-stream" not in request.headers.get("accept", ""):
            return _error(
                406, INVALID_REQUEST, "GET opens an SSE stream: send Accept: text/event-stream"
            )
        async with self._scope(request) as scope:
            session = await self._resume(request, scope, label)
            tenant_id, current = scope.tenant.id, scope.tenant.change_seq
        resume_from = _last_event_id(request.headers.get("last-event-id"), current)
        return StreamingResponse(
            self._stream(
                session.id, session.protocol_version, tenant_id, session.label, current, resume_from
            ),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _stream(
        self,
        session_id: str,
        revision: str,
        tenant_id: Any,
        label: str,
        current: int,
        resume_from: int,
    ) -> AsyncIterator[bytes]:
        with self.hub.subscribe(tenant_id, label, seen=resume_from) as subscription:
            previous = self.streams.pop(session_id, None)
            if previous is not None:  # one message goes on one stream: the newest replaces the old
                previous.close()
            self.streams[session_id] = subscription
            try:
                if since(revision, "2025-11-25"):
                    yield f"id: {current}\nretry: 3000\ndata: \n\n".encode()
                if resume_from < current:  # missed changes while away: tell at once
                    subscription.offer(current)
                while not subscription.closed:
                    seq = await subscription.next(self.settings.sse_keepalive_seconds)
                    if seq is None:
                        if subscription.closed:
                            break
                        yield b": keep-alive\n\n"
                        continue
                    yield f"id: {seq}\ndata: {LIST_CHANGED_JSON}\n\n".encode()
            finally:
                if self.streams.get(session_id) is subscription:
                    del self.streams[session_id]

    # --- DELETE ----------------------------------------------------------------------------------

    async def delete(self, request: Request, label: str | None) -> Response:
        async with self._scope(request) as scope:
            session = await self._resume(request, scope, label)
            await sessions.end(scope.session, session)
        stream = self.streams.pop(session.id, None)
        if stream is not None:
            stream.close()
        return Response(status_code=204)


def _sse(message: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(message, separators=(',', ':'))}\n\n".encode()


def _unsupported(version: str) -> str:
    return f"unsupported MCP-Protocol-Version {version!r}; supported: {', '.join(ALL_REVISIONS)}"


def _last_event_id(header: str | None, current: int) -> int:
    """Where a resuming client is up to; a missing or unreadable id means "up to date"."""
    if header is None or not header.strip().isdigit():
        return current
    return min(int(header.strip()), current)
