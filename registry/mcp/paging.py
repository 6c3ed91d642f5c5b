"""A page of a list method of the newer surfaces (tools/list, skills/list, resources/list): its cursor
opened, the page read once and kept until the tenant changes (``caching.kept_page``), its next cursor
made afresh for each answer (cursors expire), and the caching hints of 2026-07-28."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from registry.mcp import caching
from registry.mcp.call import Call
from registry.prompts import reading

T = TypeVar("T")


async def kept_list(
    call: Call,
    kind: str,
    cursor: str | None,
    *,
    size: int,
    fetch: Callable[[AsyncSession, str | None, int], Awaitable[Sequence[T]]],
    entries: Callable[[Sequence[T], str | None], list[dict[str, Any]]],
    position: Callable[[T], str],
    options: tuple[Any, ...] = (),
) -> dict[str, Any]:
    """The page of ``kind`` (the result's field and the cursor's kind) that ``cursor`` points to:
    ``fetch(session, after, limit)`` reads at most ``limit`` items after the name ``after``,
    ``entries(page, after)`` shapes them (their fields may depend on ``options`` besides the
    tenant's state and the label: the key the page is kept under), and ``position`` names where an
    item stands in the list. An empty first page on a label no prompt ever had is refused naming
    it, as prompts/list refuses it, and never kept."""
    after = None
    if cursor is not None:
        after = call.open_cursor(cursor, kind).last_name

    async def read() -> caching.PageRead:
        session = await call.tx.session()
        found = await fetch(session, after, size + 1)
        page = found[:size]
        if not page and after is None:
            await reading.check_label(session, call.tenant, call.label)
        return entries(page, after), position(page[-1]) if page else None, len(found) > size

    key = (kind, call.label, after, *options)
    listed = await caching.kept_page(call.caches, call.tenant, key, read)
    result: dict[str, Any] = {kind: listed.entries}
    if listed.more and listed.last_name is not None:
        result["nextCursor"] = call.next_cursor(listed.last_name, size, kind)
    return call.cacheable(result)
