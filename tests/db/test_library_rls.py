"""A library's offers and a subscriber's acceptances under row-level security: each side writes
only its own consent, sees of the other's only what was addressed to it, and a tenant may read a
library (``registry_library_grant_v1``) only while both consents hold; a stranger sees neither."""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from registry.db.engine import Database


@pytest.fixture
async def three(superuser: asyncpg.Connection) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """A library, a subscriber it offers 'production' to by name, and a stranger; the library
    also offers 'public' to every tenant."""
    ids = [
        await superuser.fetchval("INSERT INTO tenants (slug) VALUES ($1) RETURNING id", slug)
        for slug in ("lib", "sub", "stranger")
    ]
    library, subscriber, _ = ids
    await superuser.execute(
        "INSERT INTO library_offers (tenant_id, subscriber_id, label) VALUES ($1, $2, 'production'),"
        " ($1, NULL, 'public')",
        library,
        subscriber,
    )
    await superuser.execute(
        "INSERT INTO library_subscriptions (tenant_id, library_id, label, accepted_by) "
        "VALUES ($1, $2, 'production', 'key:x')",
        subscriber,
        library,
    )
    return library, subscriber, ids[2]


async def _rows(
    db: Database, tenant: uuid.UUID, sql: str, **args: object
) -> list[tuple[object, ...]]:
    async with db.tenant_tx(tenant) as session:
        return [tuple(r) for r in (await session.execute(text(sql), args)).all()]


async def test_each_side_sees_its_own_and_what_was_addressed_to_it(
    db: Database, three: tuple[uuid.UUID, uuid.UUID, uuid.UUID]
) -> None:
    library, subscriber, stranger = three
    offers = "SELECT tenant_id, label FROM library_offers ORDER BY label"
    assert await _rows(db, library, offers) == [(library, "production"), (library, "public")]
    assert await _rows(db, subscriber, offers) == [(library, "production"), (library, "public")]
    assert await _rows(db, stranger, offers) == [(library, "public")]  # not the offer to sub
    subscriptions = "SELECT tenant_id, library_id FROM library_subscriptions"
    assert await _rows(db, subscriber, subscriptions) == [(subscriber, library)]
    assert await _rows(db, library, subscriptions) == [(subscriber, library)]
    assert await _rows(db, stranger, subscriptions) == []


async def test_neither_side_writes_the_others_consent(
    db: Database, three: tuple[uuid.UUID, uuid.UUID, uuid.UUID]
) -> None:
    library, subscriber, stranger = three
    with pytest.raises(DBAPIError, match="row-level security"):  # the library accepting for sub
        async with db.tenant_tx(library) as session:
            await session.execute(
                text("INSERT INTO library_subscriptions (tenant_id, library_id, label, accepted_by)"
                     " VALUES (:sub, :lib, 'public', 'key:x')"),
                {"sub": stranger, "lib": library},
            )  # fmt: skip
    with pytest.raises(DBAPIError, match="row-level security"):  # a tenant offering for a library
        async with db.tenant_tx(subscriber) as session:
            await session.execute(
                text("INSERT INTO library_offers (tenant_id, subscriber_id, label)"
                     " VALUES (:lib, :sub, 'drafts')"),
                {"lib": library, "sub": subscriber},
            )  # fmt: skip
    async with db.tenant_tx(library) as session:  # what it sees, it cannot change or remove
        changed = await session.execute(text("UPDATE library_subscriptions SET label = 'drafts'"))
        removed = await session.execute(text("DELETE FROM library_subscriptions"))
        assert (changed.rowcount, removed.rowcount) == (0, 0)  # type: ignore[attr-defined]
    async with db.tenant_tx(subscriber) as session:
        changed = await session.execute(text("UPDATE library_offers SET label = 'drafts'"))
        removed = await session.execute(text("DELETE FROM library_offers"))
        assert (changed.rowcount, removed.rowcount) == (0, 0)  # type: ignore[attr-defined]


async def test_a_library_is_read_only_with_both_consents(
    db: Database, three: tuple[uuid.UUID, uuid.UUID, uuid.UUID]
) -> None:
    library, subscriber, stranger = three
    grant = "SELECT registry_library_grant_v1(:lib)"
    assert await _rows(db, subscriber, grant, lib=library) == [("production",)]
    assert await _rows(db, stranger, grant, lib=library) == [(None,)]  # no acceptance
    assert await _rows(db, library, grant, lib=library) == [(None,)]  # itself: not a library
    async with db.tenant_tx(stranger) as session:  # accepting a label it was not offered
        await session.execute(
            text("INSERT INTO library_subscriptions (tenant_id, library_id, label, accepted_by)"
                 " VALUES (:me, :lib, 'production', 'key:y')"),
            {"me": stranger, "lib": library},
        )  # fmt: skip
    assert await _rows(db, stranger, grant, lib=library) == [(None,)]
    async with db.tenant_tx(stranger) as session:  # the label offered to every tenant
        await session.execute(text("UPDATE library_subscriptions SET label = 'public'"))
    assert await _rows(db, stranger, grant, lib=library) == [("public",)]
    async with db.tenant_tx(library) as session:  # the library withdraws its offer to sub
        await session.execute(
            text("DELETE FROM library_offers WHERE subscriber_id = :sub"), {"sub": subscriber}
        )
    # sub now falls under the offer to every tenant, of another label than it accepted.
    assert await _rows(db, subscriber, grant, lib=library) == [(None,)]


async def test_the_serving_functions_read_a_library_only_with_both_consents(
    db: Database, superuser: asyncpg.Connection, three: tuple[uuid.UUID, uuid.UUID, uuid.UUID]
) -> None:
    """Each serving function asks for the grant itself: called with the subscriber's id after the
    offer is withdrawn (or with a stranger's, or the library's own draft), it reads nothing."""
    library, subscriber, stranger = three
    prompt = await superuser.fetchval(
        "INSERT INTO prompts (tenant_id, name, latest_version) VALUES ($1, 'tone', 2) RETURNING id",
        library,
    )
    for version in (1, 2):
        await superuser.execute(
            "INSERT INTO prompt_versions (tenant_id, prompt_id, version, author, content_hash) "
            "VALUES ($1, $2, $3::integer, 'key:x', sha256(convert_to($3::integer::text, 'UTF8')))",
            library, prompt, version,
        )  # fmt: skip
    await superuser.execute(
        "INSERT INTO labels (tenant_id, prompt_id, prompt_name, label, version, updated_by) "
        "VALUES ($1, $2, 'tone', 'production', 1, 'key:x')",
        library, prompt,
    )  # fmt: skip
    pool = await db.reads()
    entries = "SELECT name, version FROM registry_library_entries_v1($1, $2, NULL, 100)"
    served = "SELECT registry_library_served_version_v1($1, $2, 'tone')::text"
    assert [tuple(r) for r in await pool.fetch(entries, subscriber, library)] == [("tone", 1)]
    assert '"version": 1' in await pool.fetchval(served, subscriber, library)
    assert await pool.fetch(entries, stranger, library) == []  # never subscribed
    assert "library" in await pool.fetchval(served, stranger, library)
    await superuser.execute(
        "DELETE FROM library_offers WHERE tenant_id = $1 AND subscriber_id = $2",
        library,
        subscriber,
    )
    assert await pool.fetch(entries, subscriber, library) == []  # withdrawn: nothing
    assert "library" in await pool.fetchval(served, subscriber, library)
    # Pinning version 2, which production never served: not read either.
    await superuser.execute(
        "INSERT INTO library_offers (tenant_id, subscriber_id, label) VALUES ($1, $2, 'production')",
        library, subscriber,
    )  # fmt: skip
    await superuser.execute(
        "UPDATE library_subscriptions SET follow = false, pins = '{\"tone\": 2}' "
        "WHERE tenant_id = $1",
        subscriber,
    )
    assert await pool.fetch(entries, subscriber, library) == []
    assert "prompt" in await pool.fetchval(served, subscriber, library)


async def test_a_library_read_leaves_the_subscriber_set_in_its_transaction(
    db: Database, three: tuple[uuid.UUID, uuid.UUID, uuid.UUID]
) -> None:
    """Called inside the subscriber's own transaction (the REST reads do), each function enters the
    library for its own statement and leaves the subscriber set again: what the transaction reads
    and writes next is still the subscriber's."""
    library, subscriber, _ = three
    async with db.tenant_tx(subscriber) as session:
        for sql in (
            "SELECT count(*) FROM registry_library_entries_v1(:t, :l, NULL, 10)",
            "SELECT registry_library_served_version_v1(:t, :l, 'tone')",
            "SELECT count(*) FROM registry_library_blobs_v1(:t, :l, ARRAY[]::bytea[])",
            "SELECT registry_library_count_v1(:t, :l)",
        ):
            await session.execute(text(sql), {"t": subscriber, "l": library})
            now = await session.scalar(text("SELECT current_setting('registry.tenant_id')"))
            assert now == str(subscriber), sql
