"""What the MCP endpoint keeps in memory, and the cached paths through the prompts service.

Compiled versions and blobs never change, so they are kept until evicted. What a label serves (which
version a name or a tool resolves to, the pages of prompts, tools, skills and resources listed and
their count, and the encoded answers already given to the requests that read what it serves:
prompts/get, tools/call, skills/get, resources/read and resources/directory/read) is dropped for a
tenant as soon as that tenant's change notification reaches this worker (or its own write to the
tenant commits), and so are tenants (looked up by slug) and checked credentials (on a key change;
and at least once a minute, when the key's last use is recorded). While the LISTEN connection is
down nothing cached is trusted: every request reads the database.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from registry import tokens
from registry.db.engine import Database, LazyTx
from registry.db.models import Tenant
from registry.errors import NotFound
from registry.events.cache import MISSING, Grouped, TenantScoped
from registry.libraries import serving as libraries
from registry.mcp import shaping
from registry.mcp.library_reads import library_blobs, library_reads, merged_page
from registry.mcp.protocol import Message
from registry.principal import Principal
from registry.prompts import hot_reads, reading, rendering
from registry.prompts.as_tools import FIND
from registry.prompts.rendering import CompiledVersion
from registry.prompts.schemas import RenderedPrompt
from registry.revisions import Revision
from registry.rollouts import service as rollouts
from registry.rollouts.assign import Live
from registry.templates.arguments import ArgumentSpec
from registry.tenants.service import TOUCH_EVERY
from registry.usage.schemas import Served


class Directory:
    """Tenants by slug and the principals of credentials already checked, kept until a change
    notification names their tenant (``tenants`` drop on any change of the tenant, ``principals`` on
    key changes). A reader takes ``generation()`` before it reads the database and hands it to
    ``put_*``: a value read across any invalidation is served but not kept.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self.tenants = _DirectoryPart(self, "tenants", capacity)
        self.principals = _DirectoryPart(self, "principals", capacity)
        # Slugs to tenant ids, which a change of the tenant's prompts or settings does not move
        # (a slug is never renamed): dropped with the principals, on a change of the tenant's keys
        # or its deletion. For writes that check the caller again in their own statement
        # (registry.prompts.at_once), where an id outlived by its tenant finds nothing to write.
        self.ids = _DirectoryPart(self, "ids", capacity)
        self.changes = 0

    def generation(self) -> int:
        return self.changes

    def tenant(self, slug: str) -> Tenant | None:
        found = self.tenants.lru.get(slug)
        return None if found is MISSING else found

    def tenant_id(self, slug: str) -> uuid.UUID | None:
        found = self.ids.lru.get(slug)
        return None if found is MISSING else found

    def put_tenant(self, tenant: Tenant, generation: int) -> None:
        if generation == self.changes:
            self.tenants.keep(tenant.id, tenant.slug, tenant)
            self.ids.keep(tenant.id, tenant.slug, tenant.id)

    def principal(self, tenant_id: uuid.UUID, credential: str) -> Principal | None:
        return self.principal_at(credential_key(tenant_id, credential))

    def principal_at(self, key: CredentialKey) -> Principal | None:
        """The principal remembered under a credential's key, while it needs no new check."""
        found = self.principals.lru.get(key)
        if found is MISSING:
            return None
        principal, fresh_until = found
        if time.monotonic() >= fresh_until:
            return None  # check again: the key's last use gets recorded, a revocation never missed
        if principal.expires_at is not None and principal.expires_at <= datetime.now(UTC):
            return None
        return principal  # type: ignore[no-any-return]

    def put_principal(self, credential: str, principal: Principal, generation: int) -> None:
        if generation == self.changes and principal.tenant_id is not None:
            fresh_until = time.monotonic() + TOUCH_EVERY.total_seconds()
            key = credential_key(principal.tenant_id, credential)
            self.principals.keep(principal.tenant_id, key, (principal, fresh_until))


class _DirectoryPart(Grouped[Any]):
    """One half of the directory, invalidated on its own kind of notification (each invalidation
    outdates every generation taken before it)."""

    def __init__(self, directory: Directory, name: str, capacity: int) -> None:
        super().__init__(name, capacity)
        self.directory = directory

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        self.directory.changes += 1
        super().invalidate(tenant_id)

    def clear(self) -> None:
        self.directory.changes += 1
        super().clear()


CredentialKey = tuple[int, bytes]


def credential_key(tenant_id: uuid.UUID, credential: str) -> CredentialKey:
    """Where a checked credential is remembered: its tenant and its digest, never the secret."""
    return tenant_id.int, hashlib.sha256(credential.encode()).digest()  # no secret kept in memory


def _weigh_listing(listing: Listing) -> int:
    return listing.size


# An answer larger than this (inline images, say) is rendered each time rather than kept: its blobs
# are cached anyway, and one such answer would push out hundreds of small ones.
ANSWER_MAX_BYTES = 256 * 1024
# A list's page (KEPT_PAGES) may be larger: many clients read only the first, which holds
# up to REGISTRY_PAGE_SIZE_MAX entries or more (bench/run's list of 100,000 prompts: 2,000 per
# page, 1,068,091 bytes); building it costs a copy of every entry and a cursor each time. A sixteenth
# of the answers' cache (a tenant may hold a quarter of it: FAIR_SHARE).
PAGE_ANSWER_MAX_BYTES = 2 * 1024 * 1024


# How many requests the doorkeeper remembers having seen once before it starts afresh.
SEEN_ONCE = 100_000


def encoded_to_keep(value: Any) -> bytes:
    """``value`` as compact JSON in bytes of their own length, for a cache to hold. orjson (3.12 and
    later) hands back bytes that keep the whole buffer it wrote into, at least 4 KiB: 16,266 bytes
    held for a 1,233-byte answer (tracemalloc), ten times what the caches weigh it at."""
    return bytes(memoryview(orjson.dumps(value)))


class Answer(NamedTuple):
    """A result as it was sent, encoded once, served until the tenant changes and, for a page
    that opened or carries a cursor (which expire), until ``until`` (the tokens' clock,
    ``registry.tokens.now``)."""

    result: orjson.Fragment
    size: int  # bytes of the result and of its key: what the cache weighs
    until: float = math.inf
    served: Served | None = None  # what it serves, counted each time it is sent (registry.usage)

    def fresh(self) -> bool:
        """Whether it may still be sent (always, but for a page with a cursor)."""
        return self.until == math.inf or tokens.now() < self.until


def _weigh_answer(answer: Answer) -> int:
    return answer.size


def _weigh_replay(replay: Any) -> int:
    return int(replay.size)


@dataclass
class McpCaches:
    # Compiled versions and blobs never change: tenant-scoped for their fair share of the cache
    # (registry.events.cache.FAIR_SHARE), never invalidated (not in ``tenant_scoped``).
    versions: TenantScoped[CompiledVersion] = field(
        default_factory=lambda: TenantScoped("versions", 20_000)
    )
    blobs: TenantScoped[str] = field(
        default_factory=lambda: TenantScoped("blobs", 64 * 1024 * 1024, weigh=len)
    )
    resolved: TenantScoped[Any] = field(default_factory=lambda: TenantScoped("resolved", 200_000))
    counts: TenantScoped[int] = field(default_factory=lambda: TenantScoped("counts", 100_000))
    listings: TenantScoped[Listing] = field(
        default_factory=lambda: TenantScoped("listings", 64 * 1024 * 1024, weigh=_weigh_listing)
    )
    answers: TenantScoped[Answer] = field(
        default_factory=lambda: TenantScoped("answers", 32 * 1024 * 1024, weigh=_weigh_answer)
    )
    # Requests answered again from their bytes (registry.mcp.replay): each entry holds its answer,
    # so the bound counts the answers too.
    replays: Grouped[Any] = field(
        default_factory=lambda: Grouped("replays", 32 * 1024 * 1024, weigh=_weigh_replay)
    )
    # Hashes of answer keys seen once: an answer is kept the second time it is asked for, so that
    # requests that never repeat (new arguments each time) cost no encoding and no eviction.
    seen_once: set[int] = field(default_factory=set)
    directory: Directory = field(default_factory=Directory)
    # Whether cached answers may be trusted: the LISTEN connection is up and was heard from within
    # a couple of seconds (set by the app).
    live: Callable[[], bool] = lambda: False
    # Told which libraries a tenant reads (library, follows) whenever this worker reads them, so
    # that a library's change drops that tenant's caches here from then on (set by the app: the
    # change feed's ``reads_libraries``).
    reading_libraries: Callable[[uuid.UUID, list[tuple[uuid.UUID, bool]]], None] = (
        lambda tenant, libraries: None
    )

    @property
    def enabled(self) -> bool:
        return self.live()

    def tenant_scoped(self) -> list[TenantScoped[Any] | Grouped[Any]]:
        return [
            self.resolved,
            self.counts,
            self.listings,
            self.answers,
            self.replays,
            self.directory.tenants,
        ]

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        for cache in self.tenant_scoped():
            cache.invalidate(tenant_id)

    def clear(self) -> None:
        for cache in self.tenant_scoped():
            cache.clear()


# The requests whose answers are kept: each reads what the tenant serves under a label and nothing
# else (no time, no caller but whether it is anonymous), so its answer is a function of the key below
# until the tenant changes. Not find_prompts (a tools/call): its pages carry cursors that expire.
KEPT = frozenset(
    {"prompts/get", "tools/call", "skills/get", "resources/read", "resources/directory/read"}
)
# The lists whose pages are kept: every client's first request of a list is the same, and the
# cursor a kept first page carries is then the same for all of them, and so are their next
# requests. A page's answer is a function of the same key (its cursor, in the params, says where it
# starts); the cursor to the next page it carries expires, so the page is sent again only while
# that cursor has at least half its life left, and while the cursor the request opened still opens
# (``Call.open_cursor``, ``Call.next_cursor``: ``Call.valid_until``).
KEPT_PAGES = frozenset({"prompts/list", "tools/list", "skills/list", "resources/list"})


def answer_key(
    caches: McpCaches,
    label: str,
    revision: Revision,
    principal: Principal,
    message: Message,
    sides: bytes = b"",
) -> bytes | None:
    """What the answer to a request of ``KEPT`` (or a page of ``KEPT_PAGES``) depends on besides
    its tenant, or None when it is not kept.

    Such an answer is a function of the served label, the revision (its shape and ``_meta``),
    whether the caller is anonymous (which labels it may read), the method and every param but
    ``_meta`` (the name or URI with its version or label, the arguments, and any field a later
    check might refuse), compared as canonical JSON; the rest is the tenant's, whose change drops
    the answers. Retries of an input-required result (``requestState``) and the forms they answer
    are never kept. While the tenant has live rollouts, the caller's side in each and the caller
    (``sides``) are part of the key: an answer kept for one side is never sent to the other, and a
    receipt that names its caller is that caller's.
    """
    method = message.method
    if (
        not caches.enabled
        or message.kind != "request"
        or (method not in KEPT and method not in KEPT_PAGES)
        or "requestState" in message.params
        or (method == "tools/call" and message.params.get("name") == FIND)
    ):
        return None
    assert method is not None
    params = {k: v for k, v in message.params.items() if k != "_meta"}
    return b"%s\0%s\0%s\0%d\0%s\0%s" % (
        method.encode(),
        label.encode(),
        revision.name.encode(),
        principal.anonymous,
        sides,
        orjson.dumps(params, option=orjson.OPT_SORT_KEYS),
    )


def largest_kept(method: str | None) -> int:
    """The largest answer to ``method`` that is kept, in bytes."""
    return PAGE_ANSWER_MAX_BYTES if method in KEPT_PAGES else ANSWER_MAX_BYTES


def remember_answer(
    caches: McpCaches,
    tenant_id: uuid.UUID,
    key: bytes,
    answer: dict[str, Any],
    generation: tuple[int, int],
    *,
    largest: int = ANSWER_MAX_BYTES,
    until: float = math.inf,
    served: Served | None = None,
) -> None:
    """Keep a successful, complete answer (``answer_key``) the second time it is asked for (encoded
    once: the transport sends the same bytes); errors and input-required results are answered
    afresh. It is sent again until ``until`` at most (``Call.valid_until``: the cursors a page
    opened and carries); an answer larger than ``largest`` bytes is not kept."""
    result = answer.get("result")
    if not isinstance(result, dict) or result.get("resultType") == "input_required":
        return
    seen, digest = caches.seen_once, hash((tenant_id, key))  # tenants may ask the same
    if digest not in seen:
        if len(seen) >= SEEN_ONCE:
            seen.clear()
        seen.add(digest)
        return
    seen.discard(digest)
    encoded = encoded_to_keep(result)
    fragment = orjson.Fragment(encoded)
    answer["result"] = fragment
    if len(encoded) <= largest:
        kept = Answer(fragment, len(encoded) + len(key), until, served)
        caches.answers.put(tenant_id, key, kept, generation)


@dataclass(frozen=True)
class _Refusal:
    """A cached "no such prompt, version or label": what it takes to raise the error afresh. Never
    the exception itself: its traceback would pin the frames (and the params) of the request that
    raised it, and grow with every request that raised it again."""

    message: str
    detail: tuple[tuple[str, Any], ...]

    def error(self) -> NotFound:
        return NotFound(self.message, **dict(self.detail))


async def render(
    caches: McpCaches,
    db: Database,
    tx: LazyTx,
    tenant: Tenant,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    version: int | None,
    label: str,
    max_value_length: int,
    max_rendered_chars: int = rendering.MAX_RENDERED_CHARS,
) -> RenderedPrompt:
    """prompts/get: from memory when this worker has seen the version, else one round trip."""
    enabled = caches.enabled
    key = ("resolve", label, name, version)
    compiled: Any = MISSING
    if enabled:
        found = caches.resolved.get(tenant.id, key)
        if isinstance(found, _Refusal):
            raise found.error()
        if found is not MISSING:
            compiled = caches.versions.get(tenant.id, found)
    library: str | None = None
    if compiled is not MISSING:
        library = found[2]
    else:
        generation = caches.resolved.generation(tenant.id)
        try:
            prompt_id, number, compiled, library = await _served_version(
                caches, db, tenant, name, version=version, label=label
            )
        except NotFound as error:
            if enabled:
                refusal = _Refusal(error.message, tuple(sorted(error.detail.items())))
                caches.resolved.put(tenant.id, key, refusal, generation)
            raise
        if enabled:
            # ints, not UUID objects: untracked by the cycle collector (see TenantScoped)
            caches.resolved.put(tenant.id, key, (prompt_id.int, number, library), generation)
            caches.versions.keep(tenant.id, (prompt_id.int, number), compiled)
    blobs: dict[bytes, str] = {}
    missing = []
    for sha in compiled.blobs:
        data = caches.blobs.get(tenant.id, sha) if enabled else MISSING
        if data is MISSING:
            missing.append(sha)
        else:
            blobs[sha] = data
    if missing:
        loaded = (
            await rendering.load_blobs(await tx.session(), tenant.id, missing)
            if library is None
            else await library_blobs(caches, db, tenant, library, missing)
        )
        for sha, data in loaded.items():
            blobs[sha] = caches.blobs.keep(tenant.id, sha, data) if enabled else data
    rendered = rendering.render_compiled(
        compiled,
        arguments,
        blobs,
        max_value_length=max_value_length,
        max_rendered_chars=max_rendered_chars,
    )
    if library is not None:
        rendered.library = library
    return rendered


async def _served_version(
    caches: McpCaches,
    db: Database,
    tenant: Tenant,
    name: str,
    *,
    version: int | None,
    label: str,
) -> tuple[uuid.UUID, int, CompiledVersion, str | None]:
    """The tenant's own version of ``name`` (by number, else as ``label`` serves it), else, for a
    name its label does not serve, the version a library it reads serves under that name (never
    by number: a subscriber reads what the library's label serves, not its other versions)."""
    reads = await db.read_pool(tenant.id)
    try:
        prompt_id, number, compiled = await rendering.served_version(
            reads, tenant, name, version=version, label=label
        )
        return prompt_id, number, compiled, None
    except NotFound as refused:
        if version is not None or refused.detail.get("field") not in ("name", "label"):
            raise
        served = await libraries.served_version(  # the primary: see listing
            await db.reads(), tenant, await library_reads(caches, db, tenant), name
        )
        if served is None:
            raise
        library, found = served
        prompt_id, number, compiled = rendering.compile_found(found)
        return prompt_id, number, compiled, library.library


async def library_specs(
    caches: McpCaches, db: Database, tenant: Tenant, name: str
) -> tuple[ArgumentSpec, ...] | None:
    """The arguments of the version a library the tenant reads serves under ``name`` (None: none
    serves it): what completion offers for a library's prompt."""
    served = await libraries.served_version(
        await db.reads(), tenant, await library_reads(caches, db, tenant), name
    )
    if served is None:
        return None
    _, found = served
    return rendering.compile_found(found)[2].specs


async def tool_target(
    caches: McpCaches, db: Database, tenant: Tenant, label: str, tool: str
) -> tuple[str, int] | None:
    """The prompt and the version that ``label`` serves as the marked tool ``tool`` (None: no such
    tool): from memory once this worker has resolved it, until the tenant changes (a mark, a label
    move, an archive), as a prompt's label is; else one round trip on the hot path's pool."""
    enabled = caches.enabled
    key = ("tool", label, tool)
    if enabled:
        found = caches.resolved.get(tenant.id, key)
        if found is not MISSING:
            return found  # type: ignore[no-any-return]
        generation = caches.resolved.generation(tenant.id)
    target = await hot_reads.served_tool(await db.read_pool(tenant.id), tenant.id, label, tool)
    if enabled:
        caches.resolved.put(tenant.id, key, target, generation)
    return target


@dataclass(frozen=True)
class Listing:
    """One page of a list (prompts, tools, skills, resources) as a revision shapes it, encoded once
    and served while the list stands; its cursor is made afresh for each request (cursors expire)."""

    entries: orjson.Fragment
    size: int  # bytes: what the cache weighs
    last_name: str | None  # where the next page starts, when there is one
    more: bool


# What a page's reader hands back: the page's entries, the name the next page starts after, and
# whether there is a next page.
PageRead = tuple[Any, str | None, bool]


async def kept_page(
    caches: McpCaches,
    tenant: Tenant,
    key: tuple[Any, ...],
    read: Callable[[], Awaitable[PageRead]],
) -> Listing:
    """The page ``key`` names (its kind, label, start and every option its entries depend on) from
    memory while the tenant has not changed, else as ``read`` finds it, encoded once and kept."""
    found = caches.listings.get(tenant.id, key) if caches.enabled else MISSING
    if found is not MISSING:
        return found
    generation = caches.listings.generation(tenant.id)
    entries, last_name, more = await read()
    encoded = entries if isinstance(entries, bytes) else encoded_to_keep(entries)
    made = Listing(orjson.Fragment(encoded), len(encoded), last_name, more)
    if caches.enabled:
        caches.listings.put(tenant.id, key, made, generation)
    return made


async def listing(
    caches: McpCaches,
    db: Database,
    tenant: Tenant,
    label: str,
    *,
    after: str | None,
    limit: int,
    revision: Revision,
) -> Listing:
    """A prompts/list page."""

    async def read() -> PageRead:
        reads = await db.read_pool(tenant.id)
        libs = await library_reads(caches, db, tenant)
        if libs:  # from the primary: a replica has replayed the subscriber, not the libraries
            return await merged_page(await db.reads(), tenant, label, libs, after, limit, revision)
        if shaping.serves_stored_entries(revision):  # each version's entry as written, concatenated
            return await reading.served_entries(reads, tenant, label, after=after, limit=limit)
        page, more = await reading.served_page(reads, tenant, label, after=after, limit=limit)
        return shaping.prompt_entries(revision, page), page[-1].name if page else None, more

    # Keyed by what an entry carries, not by revision: revisions that list the same shape share a
    # page.
    key = ("listing", label, after, limit, *shaping.entry_options(revision).values())
    return await kept_page(caches, tenant, key, read)


async def _count(caches: McpCaches, db: Database, tenant: Tenant, label: str) -> int:
    reads = await db.read_pool(tenant.id)
    own = await reading.served_count(reads, tenant, label)
    libs = await library_reads(caches, db, tenant)
    return own + (await libraries.count(await db.reads(), tenant, libs) if libs else 0)


async def served_count(caches: McpCaches, db: Database, tenant: Tenant, label: str) -> int:
    """How many prompts ``label`` serves the tenant, its libraries' included (a first page's size
    is chosen by it)."""
    if not caches.enabled:
        return await _count(caches, db, tenant, label)
    key = ("count", label)
    found = caches.counts.get(tenant.id, key)
    if found is MISSING:
        generation = caches.counts.generation(tenant.id)
        found = caches.counts.put(
            tenant.id, key, await _count(caches, db, tenant, label), generation
        )
    return int(found)


async def live_rollouts(caches: McpCaches, db: Database, tenant: Tenant) -> tuple[Live, ...]:
    """The tenant's live rollouts (read only when its row says it has some), from memory until
    the tenant changes (a rollout's every step is a change of the tenant)."""
    if not tenant.rollouts_live:
        return ()
    enabled, key = caches.enabled, ("rollouts",)
    if enabled:
        found = caches.resolved.get(tenant.id, key)
        if found is not MISSING:
            return found  # type: ignore[no-any-return]
        generation = caches.resolved.generation(tenant.id)
    lives = await rollouts.live(await db.read_pool(tenant.id), tenant)
    if enabled:
        caches.resolved.put(tenant.id, key, lives, generation)
    return lives
