"""The hot path's SQL: what MCP serving (and the REST served routes, snapshots and the client's
records) reads, each one statement calling a versioned SQL function (``migrations/sql/``) that
enters the tenant for its own transaction, so it runs on the plain driver pool as well as inside a
tenant transaction. The statements are named here, at the top; nothing else builds them."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.connect import stored_json
from registry.db.repository import driver

SERVED_VERSION = "SELECT registry_served_version_v3($1, $2, $3, $4)"
SERVED_PAGE = "SELECT registry_served_page_v1($1, $2, $3, $4)"
SERVED_ENTRIES = "SELECT name, entry, served FROM registry_served_entries_v2($1, $2, $3, $4)"
SERVED_COUNT = "SELECT registry_served_count_v3($1, $2)"  # kept with the writes (0029)
SERVED_TOOL = "SELECT prompt_name, served_version FROM registry_served_tool_v1($1, $2, $3)"


async def served_version(
    reads: asyncpg.Pool | AsyncSession,
    tenant_id: uuid.UUID,
    name: str,
    label: str,
    version: int | None,
) -> dict[str, Any]:
    """The version ``name`` resolves to (by number, else by label) with its arguments and messages,
    or ``{"missing": "prompt" | "version" | "label"}``: one round trip, whether on the hot path's plain
    pool or inside a tenant transaction."""
    raw = await (await driver(reads)).fetchval(SERVED_VERSION, tenant_id, name, label, version)
    found: dict[str, Any] = _parsed(raw)
    return found


async def served_tool(
    reads: asyncpg.Pool | AsyncSession, tenant_id: uuid.UUID, label: str, tool: str
) -> tuple[str, int] | None:
    """The marked prompt (not archived) whose tool name is ``tool`` and the version ``label``
    serves of it, if ``label`` serves it (the first by name, should two marks ever share a tool
    name): one round trip through the tool-name index."""
    rows = await (await driver(reads)).fetch(SERVED_TOOL, tenant_id, label, tool)
    return min(((row[0], row[1]) for row in rows), default=None)


def _parsed(raw: Any) -> Any:
    """jsonb as the driver hands it (its text) parsed as every stored JSON is (``stored_json``)."""
    return stored_json(raw) if isinstance(raw, str) else raw


async def served_page(
    reads: asyncpg.Pool | AsyncSession,
    tenant_id: uuid.UUID,
    label: str,
    *,
    after: str | None,
    limit: int,
) -> list[list[Any]]:
    """One keyset page of the prompts a label serves, by name, in one round trip: rows of
    ``[name, version, title, description, icons, arguments]`` (each argument ``[name, title,
    description, required, default, enum, pattern, max_length]``, or None when there are none).

    Driven by the (tenant_id, label, prompt_name) index, so a deep page costs what the first does."""
    raw = await (await driver(reads)).fetchval(SERVED_PAGE, tenant_id, label, after, limit)
    rows: list[list[Any]] = _parsed(raw)
    return rows


async def served_entries(
    reads: asyncpg.Pool | AsyncSession,
    tenant_id: uuid.UUID,
    label: str,
    *,
    after: str | None,
    limit: int,
) -> list[tuple[str, str | None, list[Any] | None]]:
    """``served_page`` as each version's stored list entry: rows of ``(name, entry, served)``, where
    ``served`` (``[version, title, description, icons, arguments]``, as ``served_page`` has them) is
    there only for a version stored without an entry (written before schema 0015). Each row is read
    from the label alone, which carries its version's entry and its prompt's state (schema 0016)."""
    rows = await (await driver(reads)).fetch(SERVED_ENTRIES, tenant_id, label, after, limit)
    return [(name, entry, _parsed(served)) for name, entry, served in rows]


async def served_count(reads: asyncpg.Pool | AsyncSession, tenant_id: uuid.UUID, label: str) -> int:
    return int(await (await driver(reads)).fetchval(SERVED_COUNT, tenant_id, label))
