"""Row-level security: the application role sees and writes only the tenant set for its transaction."""

from __future__ import annotations

import hashlib
import json
import uuid

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from registry.db.connect import APP_ROLE
from registry.db.engine import Database
from registry.db.library_models import LIBRARY_TABLES
from registry.db.models import TENANT_OWNED_TABLES


async def seed_tenant(conn: asyncpg.Connection, slug: str) -> uuid.UUID:
    """One row in every tenant-owned table, written as the superuser (who bypasses RLS)."""
    tenant_id: uuid.UUID = await conn.fetchval(
        "INSERT INTO tenants (slug) VALUES ($1) RETURNING id", slug
    )
    blob = slug.encode()
    sha = hashlib.sha256(blob).digest()
    prompt_id: uuid.UUID = await conn.fetchval(
        "INSERT INTO prompts (tenant_id, name, latest_version) VALUES ($1, $2, 1) RETURNING id",
        tenant_id,
        f"{slug}-prompt",
    )
    statements = [
        ("INSERT INTO api_keys (tenant_id, name, role, secret_hash, created_by) "
         "VALUES ($1, 'k', 'reader', $2, 'test')", (tenant_id, hashlib.sha256(slug.encode() * 2).digest())),
        ("INSERT INTO blobs (tenant_id, sha256, mime_type, size, data) VALUES ($1, $2, 'text/plain', $3, $4)",
         (tenant_id, sha, len(blob), blob)),
        ("INSERT INTO prompt_versions (tenant_id, prompt_id, version, author, content_hash) "
         "VALUES ($1, $2, 1, 'test', $3)", (tenant_id, prompt_id, sha)),
        ("INSERT INTO prompt_arguments (tenant_id, prompt_id, version, position, name) "
         "VALUES ($1, $2, 1, 0, 'topic')", (tenant_id, prompt_id)),
        ("INSERT INTO prompt_messages (tenant_id, prompt_id, version, position, role, content, blob_sha256) "
         "VALUES ($1, $2, 1, 0, 'user', '{\"type\": \"text\", \"text\": \"hi\"}', $3)",
         (tenant_id, prompt_id, sha)),
        ("INSERT INTO prompt_partials (tenant_id, prompt_id, version, ref, child_name, child_prompt_id, "
         "child_version) VALUES ($1, $2, 1, 'p@1', 'p', $2, 1)", (tenant_id, prompt_id)),
        ("INSERT INTO labels (tenant_id, prompt_id, label, prompt_name, version, updated_by) "
         "VALUES ($1, $2, 'production', $3, 1, 'test')", (tenant_id, prompt_id, f"{slug}-prompt")),
        ("INSERT INTO label_history (tenant_id, prompt_id, label, to_version, actor) "
         "VALUES ($1, $2, 'production', 1, 'test')", (tenant_id, prompt_id)),
        ("INSERT INTO change_log (tenant_id, seq, kind) VALUES ($1, 0, 'test')", (tenant_id,)),
        ("INSERT INTO audit_log (tenant_id, actor, action, target) VALUES ($1, 'test', 'seed', 'x')",
         (tenant_id,)),
        ("INSERT INTO webhook_endpoints (tenant_id, id, url, secret, created_by) "
         "VALUES ($1, $1, 'https://hooks.example/' || $2, 'whsec_x', 'test')", (tenant_id, slug)),
        ("WITH d AS (INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, "
         "payload) VALUES ($1, $1, 'msg_' || $2, 'test', '{}') RETURNING id) "
         "INSERT INTO webhook_attempts (tenant_id, delivery_id, attempt, latency_ms) "
         "SELECT $1, id, 1, 5 FROM d", (tenant_id, slug)),
        ("INSERT INTO event_subscriptions (tenant_id, id, principal, url, name, secret, expires_at, "
         "position) VALUES ($1, 'sub_' || $2, 'key:x', 'https://hooks.example/', 'prompt.changed', "
         "'whsec_x', now() + interval '1 hour', 0)", (tenant_id, slug)),
        ("INSERT INTO tenant_issuers (tenant_id, issuer, rules, created_by) "
         "VALUES ($1, 'https://idp.example/' || $2, '[]', 'test')", (tenant_id, slug)),
        ("INSERT INTO console_sessions (tenant_id, id, subject, role, csrf, expires_at) "
         "VALUES ($1, 'c-' || $2, 'someone', 'reader', 'x', now() + interval '1 hour')",
         (tenant_id, slug)),
        ("INSERT INTO mcp_sessions (tenant_id, id, label, protocol_version) "
         "VALUES ($1, $2, 'production', '2025-11-25')", (tenant_id, f"s-{slug}")),
        ("WITH s AS (INSERT INTO skills (tenant_id, name, latest_version) VALUES ($1, $2, 1) "
         "RETURNING id), v AS (INSERT INTO skill_versions (tenant_id, skill_id, version, description, "
         "frontmatter, source, manifest_sha256, author) SELECT $1, id, 1, 'd', '{}', 's', $3, 'test' "
         "FROM s RETURNING skill_id), f AS (INSERT INTO skill_files (tenant_id, skill_id, version, path, "
         "sha256, size, mime_type) SELECT $1, skill_id, 1, 'SKILL.md', $3, 1, 'text/markdown' FROM v "
         "RETURNING skill_id) INSERT INTO skill_labels (tenant_id, skill_id, label, skill_name, version, "
         "updated_by) SELECT $1, skill_id, 'production', $2, 1, 'test' FROM f",
         (tenant_id, f"{slug}-skill", sha)),
        ("WITH r AS (INSERT INTO change_requests (tenant_id, id, author, description) "
         "VALUES ($1, 1, 'test', $2) RETURNING tenant_id, id), m AS (INSERT INTO "
         "change_request_moves (tenant_id, request_id, position, kind, name, label, version) "
         "SELECT tenant_id, id, 0, 'prompt', $2, 'production', 1 FROM r) INSERT INTO "
         "change_request_reviews (tenant_id, request_id, actor, kind, revision) "
         "SELECT tenant_id, id, 'test', 'comment', 1 FROM r", (tenant_id, slug)),
    ]  # fmt: skip
    for table in ("usage_minutes", "usage_hours", "usage_days"):
        statements.append(
            (
                f"INSERT INTO {table} (tenant_id, kind, name, at, version, label, surface, caller, "
                "client, answers, first_at, last_at) VALUES ($1, 'prompt', $2, "
                "date_trunc('hour', now()), 1, 'production', 'prompts/get', 'anonymous', '', 1, "
                "now(), now())",
                (tenant_id, slug),
            )
        )
    statements.append(
        (
            "INSERT INTO rollouts (tenant_id, kind, name, label, from_version, to_version, steps, salt,"
            " started_by) VALUES ($1, 'prompt', $2, 'production', 1, 2, ARRAY[50, 100], '\\x00', 'test')",
            (tenant_id, slug),
        )
    )
    statements.append(
        (
            "INSERT INTO rollout_feedback (tenant_id, rollout_id, receipt, caller, step, side, good,"
            " reported_by) SELECT tenant_id, id, '\\x01', 'c', 0, 'new', true, 'test' FROM rollouts"
            " WHERE tenant_id = $1",
            (tenant_id,),
        )
    )
    has_usage = await conn.fetchval("SELECT to_regclass('public.usage_days') IS NOT NULL")
    has_rollouts = await conn.fetchval("SELECT to_regclass('public.rollouts') IS NOT NULL")
    has_skills = await conn.fetchval("SELECT to_regclass('public.skills') IS NOT NULL")
    has_releases = await conn.fetchval("SELECT to_regclass('public.change_requests') IS NOT NULL")
    has_events = await conn.fetchval("SELECT to_regclass('public.event_subscriptions') IS NOT NULL")
    for sql, args in statements:
        if "skills" in sql and not has_skills:  # a schema from before 0021 (migration tests)
            continue
        if "change_requests" in sql and not has_releases:  # before 0023
            continue
        if "usage_" in sql and not has_usage:  # before 0030
            continue
        if "rollouts" in sql and not has_rollouts:  # before 0031
            continue
        if "event_subscriptions" in sql and not has_events:  # before 0036
            continue
        await conn.execute(sql, *args)
    return tenant_id


# Rows that outlive their transaction, which the seed can therefore show to other transactions: a
# change_pending row is moved to the change log as its transaction commits (its isolation is
# checked by the insert tests below). A library's offers and a subscriber's acceptances are each
# seen by the other side too, by design: tests/db/test_library_rls.py checks them.
SEEDED_TABLES = [
    table
    for table in TENANT_OWNED_TABLES
    if table != "change_pending" and table not in LIBRARY_TABLES
]


async def test_seed_covers_every_tenant_owned_table(
    superuser: asyncpg.Connection, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    for table in SEEDED_TABLES:
        assert await superuser.fetchval(f"SELECT count(*) FROM {table}") == 2, table


async def test_tenant_sees_only_its_own_rows(
    db: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    alpha, bravo = two_tenants
    for tenant in (alpha, bravo):
        async with db.tenant_tx(tenant) as session:
            for table in SEEDED_TABLES:
                rows = (await session.execute(text(f"SELECT tenant_id FROM {table}"))).all()
                assert [r.tenant_id for r in rows] == [tenant], table


async def test_no_tenant_set_sees_nothing(
    db: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    async with db.app_tx() as session:
        for table in SEEDED_TABLES:
            count = (await session.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            assert count == 0, table
        # The directory itself is not tenant-owned and stays readable.
        assert (await session.execute(text("SELECT count(*) FROM tenants"))).scalar_one() == 2


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("audit_log", "(tenant_id, actor, action, target) VALUES (:other, 'x', 'x', 'x')"),
        ("change_log", "(tenant_id, seq, kind) VALUES (:other, 0, 'x')"),
        ("change_pending", "(tenant_id, kind) VALUES (:other, 'x')"),
        ("prompts", "(tenant_id, name) VALUES (:other, 'sneaky')"),
        ("mcp_sessions", "(tenant_id, id, label, protocol_version) VALUES (:other, 's', 'l', 'v')"),
    ],
)
async def test_insert_with_another_tenants_id_fails(
    db: Database, two_tenants: tuple[uuid.UUID, uuid.UUID], table: str, columns: str
) -> None:
    alpha, bravo = two_tenants
    with pytest.raises(DBAPIError, match="row-level security"):
        async with db.tenant_tx(alpha) as session:
            await session.execute(text(f"INSERT INTO {table} {columns}"), {"other": bravo})


async def test_update_cannot_move_a_row_to_another_tenant(
    db: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    alpha, bravo = two_tenants
    with pytest.raises(DBAPIError, match="row-level security"):
        async with db.tenant_tx(alpha) as session:
            await session.execute(text("UPDATE prompts SET tenant_id = :b"), {"b": bravo})


async def test_application_role_cannot_bypass(db: Database, superuser: asyncpg.Connection) -> None:
    role = await superuser.fetchrow(
        "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = $1", APP_ROLE
    )
    assert role is not None
    assert (role["rolsuper"], role["rolbypassrls"]) == (False, False)
    rows = await superuser.fetch(
        "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = ANY($1::text[])",
        list(TENANT_OWNED_TABLES),
    )
    assert {
        r["relname"]: (r["relrowsecurity"], r["relforcerowsecurity"]) for r in rows
    } == dict.fromkeys(TENANT_OWNED_TABLES, (True, True))
    async with db.tenant_tx(uuid.uuid4()) as session:
        assert (await session.execute(text("SELECT current_user"))).scalar_one() == APP_ROLE
        # The role cannot switch row security off for itself.
        with pytest.raises(DBAPIError):
            async with session.begin_nested():
                await session.execute(text("SET LOCAL row_security = off"))
                await session.execute(text("SELECT count(*) FROM prompts"))


async def test_tenant_setting_does_not_leak_past_the_transaction(
    db: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    alpha, _ = two_tenants
    async with db.tenant_tx(alpha) as session:
        assert (await session.execute(text("SELECT count(*) FROM prompts"))).scalar_one() == 1
    # Same pool, likely the same connection: the setting and role were transaction-local.
    async with db.app_tx() as session:
        assert (await session.execute(text("SELECT count(*) FROM prompts"))).scalar_one() == 0
    async with db.operator_tx() as session:
        setting = await session.execute(text("SELECT current_setting('registry.tenant_id', true)"))
        assert setting.scalar_one() in (None, "")


async def test_served_version_function_runs_as_the_app_role_inside_its_tenant(
    superuser: asyncpg.Connection, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    alpha, bravo = two_tenants
    found = await superuser.fetchval(
        "SELECT registry_served_version_v1($1, 'alpha-prompt', 'production', NULL)::text", alpha
    )
    assert '"version": 1' in found and '"name": "topic"' in found
    # Another tenant's prompt, asked for under this tenant's id: not there.
    missing = await superuser.fetchval(
        "SELECT registry_served_version_v1($1, 'bravo-prompt', 'production', NULL)::text", alpha
    )
    assert missing == '{"missing": "prompt"}'
    assert (
        await superuser.fetchval(
            "SELECT registry_served_version_v1($1, 'alpha-prompt', NULL, 2)::text", alpha
        )
        == '{"missing": "version"}'
    )
    # Inside a transaction the function leaves it as the application role, scoped to the tenant:
    # row-level security applies to what it read (even for a superuser caller), and ends with it.
    async with superuser.transaction():
        await superuser.fetchval(
            "SELECT registry_served_version_v1($1, 'alpha-prompt', 'production', NULL)", alpha
        )
        assert await superuser.fetchval("SELECT current_user") == APP_ROLE
        assert await superuser.fetchval("SELECT count(*) FROM prompts") == 1
        assert (
            await superuser.fetchval("SELECT count(*) FROM prompts WHERE tenant_id = $1", bravo)
            == 0
        )
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == 2


async def test_api_key_function_and_the_entering_statement_read_only_their_tenant(
    superuser: asyncpg.Connection, db: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """A request's first round trip reads its caller's key beside its tenant
    (registry_api_key_v1): a key is found under its own tenant only, as the application role."""
    alpha, bravo = two_tenants
    alpha_key, bravo_key = (hashlib.sha256(s.encode() * 2).digest() for s in ("alpha", "bravo"))
    key_of = "SELECT role, revoked_at FROM registry_api_key_v1($1, $2)"
    assert tuple(await superuser.fetchrow(key_of, alpha, alpha_key)) == ("reader", None)
    assert await superuser.fetchrow(key_of, alpha, bravo_key) is None  # bravo's key, alpha's path
    async with superuser.transaction():
        await superuser.fetchrow(key_of, bravo, bravo_key)
        assert await superuser.fetchval("SELECT current_user") == APP_ROLE
        assert await superuser.fetchval("SELECT count(*) FROM api_keys") == 1
    # The statement that enters a tenant by its name, as every REST request does.
    for slug, key_hash, role in (
        ("alpha", alpha_key, "reader"), ("alpha", bravo_key, None), ("bravo", bravo_key, "reader"),
        ("nobody", alpha_key, None),
    ):  # fmt: skip
        async with db.named_tenant_tx(slug, key_hash=key_hash) as (session, tenant, key):
            assert (tenant is None) == (slug == "nobody")
            assert (key.role if key else None) == role
            seen = await session.execute(text("SELECT count(*) FROM api_keys"))
            assert seen.scalar_one() == (0 if tenant is None else 1)
            user = await session.execute(text("SELECT current_user"))
            assert user.scalar_one() == APP_ROLE


async def test_served_page_and_count_functions_read_only_their_tenant(
    superuser: asyncpg.Connection, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    alpha, bravo = two_tenants
    for tenant, name in ((alpha, "alpha-prompt"), (bravo, "bravo-prompt")):
        page = json.loads(
            await superuser.fetchval(
                "SELECT registry_served_page_v1($1, 'production', NULL, 10)::text", tenant
            )
        )
        assert [row[:2] for row in page] == [[name, 1]]
        assert page[0][5][0][0] == "topic"  # the served version's first argument, by name
        for count in ("registry_served_count_v1", "registry_served_count_v2"):
            assert await superuser.fetchval(f"SELECT {count}($1, 'production')", tenant) == 1
    # Keyset: nothing after the last name; a label nobody has serves nothing.
    after = "SELECT registry_served_page_v1($1, 'production', 'alpha-prompt', 10)::text"
    assert await superuser.fetchval(after, alpha) == "[]"
    nothing = "SELECT registry_served_page_v1($1, 'nobody', NULL, 10)::text"
    assert await superuser.fetchval(nothing, alpha) == "[]"


@pytest.mark.parametrize("function", ["registry_served_entries_v1", "registry_served_entries_v2"])
async def test_served_entries_function_reads_only_its_tenant(
    superuser: asyncpg.Connection, two_tenants: tuple[uuid.UUID, uuid.UUID], function: str
) -> None:
    """The seeded versions were inserted without an entry (as before schema 0015): each row comes
    back with the version's fields for the worker to shape, as registry_served_page_v1 has them."""
    alpha, bravo = two_tenants
    entries = f"SELECT name, entry, served::text FROM {function}($1, $2, $3, 10)"
    for tenant, name in ((alpha, "alpha-prompt"), (bravo, "bravo-prompt")):
        async with superuser.transaction():
            rows = await superuser.fetch(entries, tenant, "production", None)
            assert await superuser.fetchval("SELECT current_user") == APP_ROLE
        assert [(row["name"], row["entry"]) for row in rows] == [(name, None)]
        page = json.loads(
            await superuser.fetchval(
                "SELECT registry_served_page_v1($1, 'production', NULL, 10)::text", tenant
            )
        )
        assert [name, *json.loads(rows[0]["served"])] == page[0]
    assert await superuser.fetch(entries, alpha, "production", "alpha-prompt") == []
    assert await superuser.fetch(entries, alpha, "nobody", None) == []


async def test_served_version_v3_answers_as_v2_did(
    superuser: asyncpg.Connection, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """v3 walks partial locks only when a version has some: the seeded version has one (a lock on
    itself, bounded by the walk's depth), so both branches are compared with v2."""
    alpha, _ = two_tenants
    for name, label, version in (
        ("alpha-prompt", "production", None),
        ("alpha-prompt", "nowhere", None),
        ("alpha-prompt", "production", 1),
        ("nobody", "production", None),
    ):
        answers = [
            json.loads(
                await superuser.fetchval(
                    f"SELECT registry_served_version_{v}($1, $2, $3, $4)::text",
                    alpha, name, label, version,
                )
            )
            for v in ("v2", "v3")
        ]  # fmt: skip
        assert answers[0] == answers[1], (name, label, version)
    found = json.loads(
        await superuser.fetchval(
            "SELECT registry_served_version_v3($1, 'alpha-prompt', 'production', NULL)::text", alpha
        )
    )
    assert found["locks"] and found["sources"], found
