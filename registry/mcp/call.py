"""What a method handler is given (``Call``), and the base of every method's params model: shared by
the handlers of each concern (registry.mcp.handlers, registry.mcp.skills)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict

from registry import receipts, signing, tokens
from registry.config import Settings
from registry.db.engine import Database, LazyTx
from registry.db.models import McpSession, Tenant
from registry.mcp import cursor as cursors
from registry.mcp.caching import McpCaches
from registry.principal import Principal
from registry.revisions import Revision
from registry.rollouts import assign
from registry.rollouts.assign import Live, Routed
from registry.tokens import TokenCodec
from registry.usage.schemas import Served


@dataclass
class Call:
    """What a handler may use: never anything of another tenant."""

    db: Database
    tx: LazyTx  # the tenant's transaction, opened only if something must be read
    tenant: Tenant
    label: str
    principal: Principal
    revision: Revision
    settings: Settings
    tokens: TokenCodec
    caches: McpCaches
    session: McpSession | None = None
    # Declared per request in 2026-07-28 (`_meta`); never inferred from earlier requests.
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    # Until when the answer may be sent again (the tokens' clock, ``registry.tokens.now``): while
    # the cursor the request opened still opens, and the cursor it hands out has half its life
    # left (``open_cursor``, ``next_cursor``).
    valid_until: float = math.inf
    # What the answer served (a prompt or skill version), counted by the serve ledger.
    served: Served | None = None
    # The tenant's live rollouts, the caller as they place it, and where one sent this answer.
    lives: tuple[Live, ...] = ()
    identity: str = ""
    routed: Routed | None = None

    def route(self, kind: str, name: str, label: str) -> Routed | None:
        """The caller's side in the live rollout of ``label`` of one artifact, if there is one:
        the version to serve (None: what the label serves); the receipt will name it."""
        if not self.lives:
            return None
        self.routed = assign.route(self.lives, kind, name, label, self.identity)
        return self.routed

    def open_cursor(self, cursor: object, kind: str = "prompts") -> cursors.Opened:
        """Where the page of ``kind`` that a client's ``cursor`` points to starts (InvalidParams
        when it does not open); the answer is valid only while it opens."""
        opened = cursors.decode(
            self.tokens,
            cursor,
            self.tenant.id,
            self.label,
            max_age_seconds=self.settings.session_idle_seconds,
            kind=kind,
        )
        self.valid_until = min(self.valid_until, opened.expires)
        return opened

    def next_cursor(self, last_name: str, size: int, kind: str = "prompts") -> str:
        """A cursor to the page of ``kind`` after ``last_name``: the answer that carries it is
        valid while the cursor has at least half its life left."""
        life = self.settings.session_idle_seconds
        self.valid_until = min(self.valid_until, tokens.now() + life / 2)
        return cursors.encode(self.tokens, self.tenant.id, self.label, last_name, size, kind=kind)

    def cacheable(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with the caching hints of 2026-07-28: ``ttlMs``, the tenant's ``list_ttl_ms``
        (0 included: not at all) or else the server's ``REGISTRY_LIST_TTL_MS``, and ``cacheScope``
        private (what is served depends on who asks); unchanged for an earlier revision."""
        if self.revision.stateless:
            ttl = self.tenant.list_ttl_ms
            result["ttlMs"] = ttl if ttl is not None else self.settings.list_ttl_ms
            result["cacheScope"] = "private"
        return result

    def receipt(
        self, served: dict[str, Any], arguments: dict[str, Any], label: str | None = None
    ) -> dict[str, Any]:
        """The pending receipt of an answer (registry.receipts): what it served; ``seal`` completes
        it once the answer is finished."""
        if self.routed is not None:
            served = {**served, "rollout": self.routed.receipt()}
        return receipts.pending(
            tenant=self.tenant.slug, served=served, label=label or self.label, arguments=arguments
        )

    def oversized(self, result: dict[str, Any]) -> str | None:
        """Why ``result`` is too large to send (REGISTRY_MAX_ANSWER_BYTES as JSON), or None."""
        size = len(orjson.dumps(result))
        most = self.settings.max_answer_bytes
        if size <= most:
            return None
        return (
            f"the answer would be {size:,} bytes as JSON; the most this server sends is {most:,} "
            "(REGISTRY_MAX_ANSWER_BYTES): pass shorter arguments"
        )

    def seal(self, result: dict[str, Any]) -> None:
        """The receipt of ``result`` (if it has one) completed: the digest of the whole result, and
        the signature where the server has a key (registry.receipts)."""
        meta = result.get("_meta")
        if not isinstance(meta, dict) or receipts.META_KEY not in meta:
            return  # most answers serve no rendering: no key is read for them
        key_file = self.settings.snapshot_key_file
        key, key_id = signing.key_file(key_file).current() if key_file else (None, None)
        receipts.seal(result, key, key_id)


class Params(BaseModel):
    """The params of a request: validated by each method's model (extra fields are allowed)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
