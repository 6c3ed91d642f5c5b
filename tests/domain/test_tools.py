"""A marked prompt's tool name: computed in Python (``tools.tool_name``, what tools/list offers) and
in SQL (the expression the index of migration 0025 holds, which tools/call finds a tool's prompt
by); the two agree on every name a prompt may have, and the statement uses the index."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from registry.db.engine import Database
from registry.naming import PROMPT_NAME_PATTERN
from registry.prompts import repository as repo
from registry.prompts import tools
from registry.prompts.writing import create_prompt
from tests.domain.conftest import Domain, prompt

NAMES = st.from_regex(PROMPT_NAME_PATTERN, fullmatch=True)
EDGES = ["a", "a.b:c_d-e", "x" * 64, "x" * 63 + ".", "y" * 65 + ":z", "A:" * 64, "Z_9.:-" * 21]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(names=st.lists(NAMES, min_size=1, max_size=30))
async def test_the_sql_tool_name_is_the_python_one(db: Database, names: list[str]) -> None:
    expression = str(repo._tool_name.compile())
    assert "prompts.name" in expression
    over = text(
        f"SELECT {expression.replace('prompts.name', 'n')} FROM unnest(CAST(:names AS text[])) WITH ORDINALITY AS u(n, i) ORDER BY i"
    )
    given_names = [*EDGES, *names]
    async with db.operator_tx() as session:
        computed = list((await session.execute(over, {"names": given_names})).scalars())
    assert computed == [tools.tool_name(name) for name in given_names]


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
        assert await tools.tool_target(session, tenant, "production", "support_reply") == (
            "support.reply", 1,
        )  # fmt: skip
        assert await tools.tool_target(session, tenant, "staging", "support_reply") is None
        assert await tools.tool_target(session, tenant, "production", "plain") is None
        assert await repo.marked_as_tool(session, tenant.id, "support_reply", besides="x") == (
            "support.reply"
        )
        assert await repo.marked_as_tool(
            session, tenant.id, "support_reply", besides="support.reply"
        ) is None  # fmt: skip
    async with db.operator_tx() as session:
        await session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            (await session.execute(text(
                "EXPLAIN SELECT name FROM prompts WHERE tenant_id = :t AND as_tool AND "
                + str(repo._tool_name.compile()) + " = 'support_reply'"
            ), {"t": tenant.id})).scalars()
        )  # fmt: skip
    assert "ix_prompts_tenant_id_tool_name" in plan, plan
