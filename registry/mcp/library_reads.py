"""The MCP endpoint's reads of the libraries a tenant subscribes to (registry.libraries.serving),
kept as the tenant's own reads are: which libraries it reads (until the tenant changes, or a library
it reads does: ``registry.events.listener`` fans a library's change out to its readers' caches), a
list page merged with its own, and the blobs of a library's version. Library reads go to the
primary: a replica has replayed the subscriber's changes, not its libraries'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from registry.db.engine import Database
from registry.db.models import Tenant
from registry.events.cache import MISSING
from registry.libraries import serving as libraries
from registry.libraries.serving import LibraryRead
from registry.mcp import shaping
from registry.prompts import listing as prompt_listing
from registry.revisions import Revision

if TYPE_CHECKING:
    from registry.mcp.caching import McpCaches, PageRead


async def merged_page(
    reads: Any,
    tenant: Tenant,
    label: str,
    libs: tuple[LibraryRead, ...],
    after: str | None,
    limit: int,
    revision: Revision,
) -> PageRead:
    """A prompts/list page of the tenant's own prompts and its libraries', merged by name."""
    rows = await libraries.merged_entries(reads, tenant, label, libs, after=after, limit=limit + 1)
    page, more = rows[:limit], len(rows) > limit
    last = page[-1][0] if page else None
    if shaping.serves_stored_entries(revision):
        return ("[" + ",".join(entry for _, entry in page) + "]").encode(), last, more
    options = shaping.entry_options(revision)
    return [prompt_listing.narrowed(orjson.loads(e), **options) for _, e in page], last, more


async def library_reads(caches: McpCaches, db: Database, tenant: Tenant) -> tuple[LibraryRead, ...]:
    """The libraries the tenant reads now (read only when its row says it subscribes to some),
    from memory until the tenant changes (a subscription's every change is one, and a library's
    consent changing drops its subscribers' caches in every worker)."""
    if not tenant.library_reads:
        return ()
    enabled, key = caches.enabled, ("libraries",)
    if enabled:
        found = caches.resolved.get(tenant.id, key)
        if found is not MISSING:
            return found  # type: ignore[no-any-return]
        generation = caches.resolved.generation(tenant.id)
    read = await libraries.reads(await db.reads(), tenant)
    caches.reading_libraries(tenant.id, [(r.library_id, r.follow) for r in read])
    if enabled:
        caches.resolved.put(tenant.id, key, read, generation)
    return read


async def library_blobs(
    caches: McpCaches, db: Database, tenant: Tenant, library: str, shas: list[bytes]
) -> dict[bytes, str]:
    """The blobs a library's version uses, read through the library's grant."""
    for read in await library_reads(caches, db, tenant):
        if read.library == library:
            return await libraries.blobs(await db.reads(), tenant, read, shas)
    return {}
