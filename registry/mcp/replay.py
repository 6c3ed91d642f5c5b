"""Kept answers sent again from a request's bytes, before any request object is built.

A stateless request that this worker answered from its answer cache (one of ``caching.KEPT``: a
prompts/get, a tools/call, a skill or one of its files read; or a page of a list,
``caching.KEPT_PAGES``) is remembered by the digest of
everything its answer was decided from: the path, the query, every header but Content-Length (which
follows the id's length), and the body without its id. The same bytes again (any id) are answered
with the kept answer, the new id spliced in, as long as everything the full path consulted is still
what the worker remembers:

- the LISTEN connection is live (``McpCaches.enabled``), as for every cached answer;
- the tenant found by its slug is the same object the directory holds (any change of the tenant
  replaces it);
- the caller's remembered principal is the same object, still fresh and unexpired (a revocation, a
  key's expiry, the periodic record of its use drop or replace it; an anonymous caller has none, and
  whether anonymous readers are served is part of the tenant); the operator is never remembered;
- the answer is the one the answer cache still holds (the tenant's change drops it), and fresh (a
  page's cursor to the next has half its life left, and the cursor its request opened still opens:
  ``caching.Answer.fresh``).

The full path's checks (envelope, headers against the body, method offered, label readable) are
functions of those bytes and of those objects, so they would decide the same. Anything else takes the
full path, which remembers the request again. The order of differently named headers is no part of
the digest (the full path reads the first field of each name). The digest is SHA-256, so two
requests never share an entry; the credential is not kept, only its digest
(``caching.credential_key``).
"""

from __future__ import annotations

import hashlib
import time
from operator import itemgetter
from typing import Any, NamedTuple

import orjson

from registry.db.models import Tenant
from registry.events.cache import MISSING, Grouped
from registry.mcp import handlers
from registry.mcp.caching import (
    KEPT,
    KEPT_PAGES,
    Answer,
    CredentialKey,
    McpCaches,
    credential_key,
)
from registry.mcp.protocol import encode_json, result_message, valid_id
from registry.principal import Principal
from registry.usage.ledger import Ledger
from registry.usage.schemas import Key

CONTENT_LENGTH = b"content-length"
_name = itemgetter(0)
_KEPT_BYTES = tuple(sorted(method.encode() for method in KEPT | KEPT_PAGES))


class Digest(NamedTuple):
    key: bytes  # SHA-256 of what the answer is decided from
    request_id: str | int


class Served(NamedTuple):
    """What a full-path answer was decided from, as the transport saw it."""

    tenant: Tenant
    principal: Principal
    credential: str | None
    answer_key: bytes
    method: str
    counted: Key | None = None  # the serve ledger's key the answer was counted under


class Replay(NamedTuple):
    tenant: Tenant  # the directory holds it under its slug, which the request's path names
    principal: Principal | None  # None: an anonymous caller
    credential: CredentialKey | None
    answer_key: bytes
    answer: Answer
    method: str  # what the metrics count it as
    headers: list[tuple[bytes, bytes]]  # the response's, without Content-Length
    size: int  # what McpCaches.replays weighs: the answer it holds, its key, about 300 bytes more
    counted: Key | None  # counted again under the same key each time it is sent (registry.usage)


class Replays:
    """The requests this worker may answer from their bytes (kept in ``McpCaches.replays``, which
    the tenant's notifications drop with its other caches)."""

    def __init__(self, caches: McpCaches, ledger: Ledger) -> None:
        self.caches = caches
        self.ledger = ledger
        self.entries: Grouped[Replay] = caches.replays

    @staticmethod
    def identify(scope: Any, body: bytes) -> Digest | None:
        """The request's digest and id; None for anything but one JSON-RPC request object that
        may be of a method whose answers are kept (others pay a search of the body for each)."""
        if not any(method in body for method in _KEPT_BYTES):
            return None
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if type(message) is not dict:
            return None
        request_id = message.pop("id", None)
        if request_id is None or not valid_id(request_id):
            return None
        path: bytes = scope["path"].encode("utf-8", "surrogateescape")
        query: bytes = scope["query_string"]
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        parts = [b"%d:%b%d:%b%d\n" % (len(path), path, len(query), query, len(headers))]
        # Names are tokens and values hold no line breaks (RFC 9110): one line each is unambiguous.
        # In name order (a stable sort: fields of one name keep theirs, which is significant), as
        # clients and their threads order different fields as they please (RFC 9110, 5.3).
        parts += [b"%b:%b\n" % h for h in sorted(headers, key=_name) if h[0] != CONTENT_LENGTH]
        parts.append(orjson.dumps(message))
        return Digest(hashlib.sha256(b"".join(parts)).digest(), request_id)

    def take(self, found: Digest) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
        """The kept answer's headers (Content-Length first) and body, counted as served, if this
        request may have it; None: take the full path. Asked only while the caches are trusted
        (``McpCaches.enabled``), by the transport or by the HTTP protocol itself
        (``McpEndpoint.answer_at_once``)."""
        started = time.perf_counter()
        caches = self.caches
        key, request_id = found
        replay = self.entries.lru.get(key)
        if replay is MISSING:
            return None
        directory = caches.directory
        if (
            directory.tenant(replay.tenant.slug) is not replay.tenant
            or (
                replay.credential is not None
                and directory.principal_at(replay.credential) is not replay.principal
            )
            or caches.answers.get(replay.tenant.id, replay.answer_key) is not replay.answer
            or not replay.answer.fresh()
        ):
            # Outdated for good (what it was decided from is gone): dropped, so that it does not
            # hold an answer the answer cache let go. The full path keeps it again if it may.
            self.entries.lru.pop(key)
            return None
        encoded = encode_json(result_message(request_id, replay.answer.result))
        handlers.count_method(replay.method, started, "ok")
        if replay.counted is not None:
            self.ledger.count(replay.counted)
        return [(CONTENT_LENGTH, b"%d" % len(encoded)), *replay.headers], encoded

    async def answer(self, found: Digest, send: Any) -> bool:
        """Send the kept answer if this request may have it (``take``); False: take the full path."""
        taken = self.take(found)
        if taken is None:
            return False
        headers, encoded = taken
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": encoded})
        return True

    def keep(self, found: Digest, served: Served, headers: list[tuple[bytes, bytes]]) -> None:
        """Remember a request the full path answered with a kept answer (200, ``headers`` as
        sent), if the worker still holds everything it was decided from."""
        caches = self.caches
        tenant = served.tenant
        answer = caches.answers.peek(tenant.id, served.answer_key)
        if answer is MISSING or caches.directory.tenants.lru.peek(tenant.slug) is not tenant:
            return
        credential: CredentialKey | None = None
        principal: Principal | None = None
        if served.credential is not None:
            credential = credential_key(tenant.id, served.credential)
            remembered = caches.directory.principals.lru.peek(credential)
            if remembered is MISSING or remembered[0] is not served.principal:
                return  # the operator, or a caller not remembered
            principal = served.principal
        elif not served.principal.anonymous:
            return
        kept = [(name, value) for name, value in headers if name != CONTENT_LENGTH]
        size = answer.size + len(served.answer_key) + 300
        replay = Replay(
            tenant,
            principal,
            credential,
            served.answer_key,
            answer,
            served.method,
            kept,
            size,
            served.counted,
        )
        self.entries.keep(tenant.id, found.key, replay)
