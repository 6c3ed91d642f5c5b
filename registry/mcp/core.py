"""The MCP protocol core that both transports call: envelopes parsed, the era told (``initialize``
starts the session era; a request carrying its revision in ``_meta`` is stateless 2026-07-28),
requests dispatched to the handlers, errors turned into JSON-RPC errors (registry.mcp.errors), and
results completed for their revision. Transports (http.py, stdio.py) only move bytes, keep sessions
or subscriptions, and manage streams.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import ValidationError

from registry import inputs
from registry.config import Settings
from registry.db.engine import Database, LazyTx
from registry.db.models import McpSession, Tenant
from registry.events.cache import MISSING
from registry.mcp import caching, handlers, stateless
from registry.mcp.caching import McpCaches
from registry.mcp.call import Call
from registry.mcp.errors import INVALID_PARAMS, InvalidRequest, McpError, ParseError
from registry.mcp.protocol import META_CLIENT, Message, classify, error_message, result_message
from registry.principal import Principal
from registry.revisions import revision_of
from registry.rollouts import assign
from registry.rollouts.assign import Live
from registry.usage.ledger import Ledger, caller_of, client_of
from registry.usage.schemas import Key, Served

NOT_JSON = "parse error: the body is not valid JSON"


class Parsed:
    """The messages of one body or line: a batch holds several, and an invalid item of a batch
    stands in its place as the error answering it."""

    def __init__(self, items: list[Message | McpError], batch: bool) -> None:
        self.items = items
        self.batch = batch

    @property
    def first(self) -> Message | McpError:
        return self.items[0]


def parse(raw: bytes | str, *, not_json: str = NOT_JSON, batches: bool = True) -> Parsed:
    """Parse a body or line. A single invalid message raises its error, as does a body that is no
    JSON at all or an empty batch (where the transport takes batches at all)."""
    try:
        payload = inputs.loads(raw)
    except inputs.JsonRefused as refused:
        raise InvalidRequest(str(refused)) from None
    except (ValueError, UnicodeDecodeError):
        raise ParseError(not_json) from None
    batch = batches and isinstance(payload, list)
    if batch and not payload:
        raise InvalidRequest("an empty batch is not a valid request")
    items: list[Message | McpError] = []
    for item in payload if batch else [payload]:
        try:
            items.append(classify(item))
        except McpError as error:
            if not batch:
                raise
            items.append(error)
    return Parsed(items, batch)


def answer_error(request_id: str | int | None, error: McpError) -> dict[str, Any]:
    """The response message for a protocol error raised in place of a request's answer."""
    return error_message(request_id, error.code, error.message, error.data)


class Core:
    def __init__(
        self, settings: Settings, db: Database, caches: McpCaches, ledger: Ledger | None = None
    ) -> None:
        self.settings = settings
        self.db = db
        self.caches = caches
        self.ledger = ledger if ledger is not None else Ledger(settings)  # counts kept nowhere

    def counted(
        self,
        tenant: Tenant,
        principal: Principal,
        message: Message,
        served: Served,
        session: McpSession | None,
    ) -> Key:
        """One answer that served ``served`` counted in the serve ledger; the key it was counted
        under (a replay of the same request counts under it again)."""
        key = self.key(tenant, principal, message, served, session)
        self.ledger.count(key)
        return key

    @staticmethod
    def key(
        tenant: Tenant,
        principal: Principal,
        message: Message,
        served: Served,
        session: McpSession | None,
    ) -> Key:
        """The serve ledger's key of an answer to ``message`` that served ``served``."""
        assert message.method is not None
        client = _client(message, session)
        return Key(tenant.id.int, *served, message.method, caller_of(principal), client)

    def initialize(
        self, message: Message, tenant: Tenant, label: str
    ) -> tuple[str | None, dict[str, Any]]:
        """The negotiated revision (None when refused) and the response to ``initialize``."""
        if message.kind != "request":
            raise InvalidRequest("initialize must be a request (with an id)")
        try:
            params = handlers.InitializeParams.model_validate(message.params)
        except ValidationError as error:
            refused = error_message(
                message.id, INVALID_PARAMS, f"invalid initialize params: {error}"
            )
            return None, refused
        revision = handlers.negotiate(params.protocolVersion)
        result = handlers.initialize_result(revision_of(revision), tenant, label, self.settings)
        return revision, {"jsonrpc": "2.0", "id": message.id, "result": result}

    @staticmethod
    def stateless_revision(message: Message, headers: stateless.Headers | None = None) -> str:
        """The revision a stateless request declares, once its envelope holds up (HTTP headers are
        checked against the body where the transport has them)."""
        if headers is not None:
            return stateless.check_envelope(message, headers)
        revision = stateless.check_meta(message)
        stateless.check_version_and_method(message, revision)
        return revision

    async def call(
        self,
        tx: LazyTx,
        tenant: Tenant,
        principal: Principal,
        label: str,
        revision: str,
        message: Message,
        *,
        session: McpSession | None = None,
    ) -> tuple[dict[str, Any] | None, bytes | None, Key | None]:
        """Answer one message (None for notifications and responses) in ``revision`` (a name the
        transport negotiated or checked), with the key the answer is kept under in the answer
        cache when it may be (a stateless transport answers it again from the request's bytes:
        registry.mcp.replay) and the serve ledger's key it was counted under, if it served a
        prompt or skill. A prompts/get (or a list's page) answered before, and not changed since,
        is sent as it was (``caching.answer_key``)."""
        started = time.perf_counter()
        spoken = revision_of(revision)
        lives: tuple[Live, ...] = ()
        identity, sides = "", b""
        if tenant.rollouts_live and message.kind == "request":  # who gets which side
            lives = await caching.live_rollouts(self.caches, self.db, tenant)
            client = _client(message, session)
            identity = assign.identity_of(caller_of(principal), principal.anonymous, client)
            # Kept per caller while rollouts live: a receipt names its rollout's side and caller.
            sides = assign.sides(lives, identity) + b"\0" + identity.encode()
        key = caching.answer_key(self.caches, label, spoken, principal, message, sides)
        if key is not None:
            remembered = self.caches.answers.get(tenant.id, key)
            if remembered is not MISSING and remembered.fresh():
                handlers.count(message, started, "ok")
                counted = None
                if remembered.served is not None:
                    counted = self.counted(tenant, principal, message, remembered.served, session)
                return result_message(message.id, remembered.result), key, counted
            generation = self.caches.answers.generation(tenant.id)
        call = Call(
            db=self.db,
            tx=tx,
            tenant=tenant,
            label=label,
            principal=principal,
            revision=spoken,
            settings=self.settings,
            tokens=await self.db.tokens(),
            caches=self.caches,
            session=session,
            lives=lives,
            identity=identity,
        )
        modern = spoken.stateless
        if modern:
            call.client_capabilities = stateless.client_capabilities(message)
        answer = await handlers.dispatch(call, message, started)
        if modern and answer is not None and "result" in answer:
            answer["result"] = stateless.complete(
                answer["result"],
                spoken,
                tenant,
                label,
                self.settings.public_url,
                discover=message.method == "server/discover",
            )
        counted = None
        if answer is not None and isinstance(answer.get("result"), dict):
            call.seal(answer["result"])  # the finished result, as it is sent
            if call.served is not None and answer["result"].get("isError") is not True:
                counted = self.counted(tenant, principal, message, call.served, session)
        if call.routed is not None and answer is not None and _failed(answer):
            # An argument error or a refusal on one side of a rollout: the sides' errors compared.
            routed = Served(*call.routed.served)
            self.ledger.failed(self.key(tenant, principal, message, routed, session))
        if key is not None and answer is not None:
            caching.remember_answer(
                self.caches,
                tenant.id,
                key,
                answer,
                generation,
                served=call.served,
                largest=caching.largest_kept(message.method),
                until=call.valid_until,
            )
        return answer, key, counted


def _failed(answer: dict[str, Any]) -> bool:
    """An error answer, or a tool's result that is an error."""
    result = answer.get("result")
    return "error" in answer or (isinstance(result, dict) and result.get("isError") is True)


def _client(message: Message, session: McpSession | None) -> str:
    """The client a request says it is: its session's clientInfo, or its own (2026-07-28)."""
    if session is not None:
        return client_of(session.client_info)
    meta = message.params.get("_meta")
    return client_of(meta.get(META_CLIENT) if isinstance(meta, dict) else None)
