"""A marked prompt's tool name: applied in Python (``as_tools.tool_name``, what tools/list offers) and
by the database, which keeps it on the prompt's row (migration 0025) where tools/call finds the
prompt through an index; the two agree on every name a prompt may have, the column follows a mark,
an unmark and any write to it, and the lookup uses the index under row-level security."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from registry.db.engine import Database
from registry.errors import Conflict
from registry.naming import PROMPT_NAME_PATTERN
from registry.prompts import as_tools, hot_reads
from registry.prompts import repository as repo
from registry.prompts.lifecycle import patch_prompt
from registry.prompts.writing import create_prompt
from tests.domain.conftest import Domain, prompt

NAMES = st.from_regex(PROMPT_NAME_PATTERN, fullmatch=True)
EDGES = ["a", "a.b:c_d-e", "x" * 64, "x" * 63 + ".", "y" * 65 + ":z", "A:" * 64, "Z_9.:-" * 21]
MARKED = text(
    "INSERT INTO prompts (tenant_id, name, as_tool) SELECT :tenant, n, true "
    "FROM unnest(CAST(:names AS text[])) AS n "
    "ON CONFLICT (tenant_id, name) DO UPDATE SET as_tool = true RETURNING name, tool_name"
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(names=st.lists(NAMES, min_size=1, max_size=30, unique=True))
async def test_the_database_keeps_the_python_tool_name(
    domain: Domain, db: Database, names: list[str]
) -> None:
    tenant = await domain.tenant(f"t-{uuid.uuid4().hex[:12]}")
    async with db.operator_tx() as session:
        given_names = list(dict.fromkeys([*EDGES, *names]))
        rows = (await session.execute(MARKED, {"tenant": tenant.id, "names": given_names})).all()
    assert dict(rows) == {n: as_tools.tool_name(n) for n in given_names}


async def test_a_tool_is_found_through_the_index_and_a_taken_name_is_refused(
    domain: Domain, db: Database
) -> None:
    tenant = await domain.tenant("acme")
    publisher = domain.caller(tenant, "publisher")
    async with domain.tx(tenant) as session:
        for name in ("support.reply", "support-reply", "plain"):
            body = prompt(name, "Hello", labels=["production"], as_tool=name != "plain")
            await create_prompt(session, tenant, publisher, body, max_blob_bytes=1024)
    async with domain.tx(tenant) as session:
        found = await hot_reads.served_tool(session, tenant.id, "production", "support_reply")
        assert found == ("support.reply", 1)
        assert await hot_reads.served_tool(session, tenant.id, "staging", "support_reply") is None
        assert await hot_reads.served_tool(session, tenant.id, "production", "plain") is None
        assert await repo.marked_as_tool(session, tenant.id, "support_reply", besides="x") == (
            "support.reply"
        )
        assert await repo.marked_as_tool(
            session, tenant.id, "support_reply", besides="support.reply"
        ) is None  # fmt: skip
        # As a tenant's transaction reads (row-level security on): through the index.
        await session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join((await session.execute(text(
            "EXPLAIN SELECT p.name, l.version FROM prompts p JOIN labels l ON l.tenant_id = "
            "p.tenant_id AND l.prompt_id = p.id AND l.label = 'production' WHERE p.tenant_id = :t "
            "AND p.tool_name = 'support_reply' AND p.archived_at IS NULL"
        ), {"t": tenant.id})).scalars())  # fmt: skip
        assert "ix_prompts_tenant_id_tool_name" in plan, plan
    async with db.operator_tx() as session:  # unmarked, and a write to the column itself
        changed = text(
            "UPDATE prompts SET as_tool = :marked, tool_name = 'x' WHERE tenant_id = :t "
            "AND name = 'support.reply' RETURNING tool_name"
        )
        for marked, kept in ((False, None), (True, "support_reply")):
            written = await session.execute(changed, {"t": tenant.id, "marked": marked})
            assert written.scalar_one() == kept


async def test_of_two_concurrent_marks_of_one_tool_name_the_second_is_refused(
    domain: Domain, db: Database
) -> None:
    """Two transactions mark prompts whose tool names are the same: the second check waits for
    the first transaction, then sees its mark and refuses it."""
    tenant = await domain.tenant("acme")
    publisher = domain.caller(tenant, "publisher")
    async with domain.tx(tenant) as session:
        for name in ("support.reply", "support:reply"):
            body = prompt(name, "Hello", labels=["production"])
            await create_prompt(session, tenant, publisher, body, max_blob_bytes=1024)
    marked, release = asyncio.Event(), asyncio.Event()

    async def mark(name: str, then: asyncio.Event | None = None) -> None:
        async with domain.tx(tenant) as session:
            await patch_prompt(session, tenant, publisher, name, as_tool=True)
            if then is not None:
                marked.set()
                await then.wait()  # committed only when the test says so

    first = asyncio.create_task(mark("support.reply", release))
    await marked.wait()
    second = asyncio.create_task(mark("support:reply"))
    waiting = text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
    async with asyncio.timeout(30):  # bounds a hang; the check is the lock, not the time
        while not second.done():
            async with db.operator_tx() as session:
                if await session.scalar(waiting):
                    break
            await asyncio.sleep(0.01)
    assert not second.done(), "the second mark did not wait for the first"
    release.set()
    await first
    with pytest.raises(Conflict, match=r"which the marked prompt .support\.reply. already is"):
        await second
    async with domain.tx(tenant) as session:
        assert await hot_reads.served_tool(session, tenant.id, "production", "support_reply") == (
            "support.reply", 1,
        )  # fmt: skip
