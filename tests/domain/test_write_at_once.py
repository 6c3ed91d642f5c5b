"""A version written in one database call (registry.prompts.at_once): the ordinary write leaves
what the general path leaves (the version, ``latest`` moved with its history, the audit and change
rows, the same answer as the prompt read back), and every write that is not the ordinary case is
declined with nothing written, whatever the worker believed of its caller: the statement checks the
key again (revoked, expired, another role, another tenant's, the tenant's keys switched off)."""

from __future__ import annotations

import asyncio
import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from sqlalchemy import text

from registry.db.engine import ONE_CALL_WRITES_PER_TENANT
from registry.db.models import Tenant
from registry.principal import OPERATOR, Principal
from registry.prompts import at_once, lifecycle, reading, writing
from registry.prompts.schemas import VersionIn, WriteResult
from registry.tenants import service as tenants
from registry.testcases import TestCase
from tests.domain.conftest import Domain, prompt

BLOBS = 1024 * 1024
WHO = {"name": "who"}


def version(text_: str, **fields: Any) -> VersionIn:
    return VersionIn.model_validate(
        {
            "arguments": [WHO],
            "messages": [{"role": "user", "content": {"type": "text", "text": text_}}],
            **fields,
        }
    )


async def keyed(domain: Domain, tenant: Tenant, role: str) -> tuple[Principal, bytes]:
    """A new API key of ``tenant``: its principal, as the worker remembers it, and its hash."""
    async with domain.tx(tenant) as session:
        key, secret = await tenants.create_key(
            session, tenant=tenant, role=role, name=None, actor="operator"
        )
    return Principal(role=role, tenant_id=tenant.id, key_id=key.id), tenants.hash_secret(secret)


async def write(
    domain: Domain,
    tenant_id: uuid.UUID,
    caller: Principal,
    key_hash: bytes | None,
    body: VersionIn,
    *,
    name: str = "greet",
    if_match: int | None = None,
) -> WriteResult | None:
    return await at_once.create_version(
        domain.db, tenant_id, caller, key_hash, "editor", name, body,
        if_match=if_match, max_blob_bytes=BLOBS,
    )  # fmt: skip


async def journal(domain: Domain, tenant: Tenant) -> tuple[list[tuple[Any, ...]], int, int]:
    """The tenant's audit rows of versions (actor, target, before, after), and how many audit rows
    and change rows it has."""
    async with domain.tx(tenant) as session:
        versions = (
            await session.execute(
                text(
                    "SELECT actor, target, before, after FROM audit_log "
                    "WHERE action = 'version.create' ORDER BY id"
                )
            )
        ).all()
        audit = (await session.execute(text("SELECT count(*) FROM audit_log"))).scalar_one()
        changes = (await session.execute(text("SELECT count(*) FROM change_log"))).scalar_one()
    return [tuple(row) for row in versions], audit, changes


async def test_the_ordinary_write_leaves_what_the_general_path_leaves(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor, hashed = await keyed(domain, acme, "editor")
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, editor, prompt("greet", "Hi {{who}}", arguments=[WHO]),
            max_blob_bytes=BLOBS,
        )  # fmt: skip
        general = await writing.create_version(
            session, acme, editor, "greet", version("Hello {{who}}"),
            if_match=None, max_blob_bytes=BLOBS,
        )  # fmt: skip
    before = await journal(domain, acme)
    written = await write(domain, acme.id, editor, hashed, version("Hey {{who}}"), if_match=2)
    assert written is not None
    assert (written.created, written.version, written.labels_moved) == (True, 3, [])
    assert written.detail == "version 3 written" and general.detail == "version 2 written"
    async with domain.tx(acme) as session:
        # The answer is the prompt as the registry reads it back, as the general path's is.
        assert written.prompt == await reading.get_prompt(session, acme, "greet")
        history = (
            await session.execute(
                text("SELECT from_version, to_version, actor FROM label_history ORDER BY id")
            )
        ).all()
        served = (await session.execute(text("SELECT kind, label FROM change_log"))).all()
    assert written.prompt.labels == {"latest": 3}
    assert written.prompt.latest is not None and written.prompt.latest.version == 3
    assert written.prompt.latest.messages[0].content["text"] == "Hey {{who}}"
    # The same journal rows both ways: the version's audit row (numbered by the locked prompt),
    # the move of latest with its history, one change-log row.
    versions, audit, changes = await journal(domain, acme)
    actor = f"key:{editor.key_id}"
    assert [row[:3] for row in versions] == [
        (actor, "prompt:greet@1", None),
        (actor, "prompt:greet@2", {"version": 1}),
        (actor, "prompt:greet@3", {"version": 2}),
    ]
    for number, (_, _, _, after) in enumerate(versions, start=1):
        assert set(after) == {"version", "content_hash", "commit_message"}
        assert after["version"] == number
    assert versions[2][3]["content_hash"] == written.prompt.latest.content_hash
    assert (audit, changes) == (before[1] + 1, before[2] + 1)
    assert history[-1] == (2, 3, actor)
    assert served[-1] == ("label.move", "latest")


async def test_the_operator_writes_at_once(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, OPERATOR, prompt("greet", "Hi {{who}}", arguments=[WHO]),
            max_blob_bytes=BLOBS,
        )  # fmt: skip
    written = await write(domain, acme.id, OPERATOR, None, version("Hey {{who}}"))
    assert written is not None and written.version == 2
    versions, _, _ = await journal(domain, acme)
    assert versions[-1][:2] == ("operator", "prompt:greet@2")


async def test_what_is_not_the_ordinary_write_is_declined_with_nothing_written(
    domain: Domain, superuser: asyncpg.Connection
) -> None:
    acme, globex = await domain.tenant("acme"), await domain.tenant("globex")
    editor, hashed = await keyed(domain, acme, "editor")
    async with domain.tx(acme) as session:
        for name in ("greet", "tested", "child"):
            await writing.create_prompt(
                session, acme, editor, prompt(name, "Hi {{who}}", arguments=[WHO]),
                max_blob_bytes=BLOBS,
            )  # fmt: skip
        await lifecycle.patch_prompt(
            session, acme, editor, "tested",
            tests=[TestCase.model_validate({"name": "t", "arguments": {"who": "a"}, "expect": {"contains": ["a"]}})],
        )  # fmt: skip
    reader, read_hash = await keyed(domain, acme, "reader")
    other, other_hash = await keyed(domain, globex, "admin")
    revoked, revoked_hash = await keyed(domain, acme, "editor")
    async with domain.tx(acme) as session:
        await tenants.revoke_key(session, tenant_id=acme.id, key_id=revoked.key_id, actor="t")  # type: ignore[arg-type]
    expired, expired_hash = await keyed(domain, acme, "editor")
    await superuser.execute(
        "UPDATE api_keys SET expires_at = $1 WHERE id = $2",
        datetime.now(UTC) - timedelta(seconds=1),
        expired.key_id,
    )
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()
    image = {"type": "image", "data": png, "mimeType": "image/png"}
    new = version("Hey {{who}}")
    declined: list[tuple[str, Any]] = [
        ("a label besides latest", write(domain, acme.id, editor, hashed, version("Hey {{who}}", labels=["staging"]))),
        ("a partial", write(domain, acme.id, editor, hashed, version("{{> child}} {{who}}"))),
        ("a blob", write(domain, acme.id, editor, hashed, VersionIn.model_validate({"messages": [{"role": "user", "content": image}]}))),
        ("an unknown variable", write(domain, acme.id, editor, hashed, version("Hey {{whom}}"))),
        ("a stale If-Match", write(domain, acme.id, editor, hashed, new, if_match=7)),
        ("the latest's content", write(domain, acme.id, editor, hashed, version("Hi {{who}}"))),
        ("no such prompt", write(domain, acme.id, editor, hashed, new, name="nope")),
        ("a prompt with test cases", write(domain, acme.id, editor, hashed, new, name="tested")),
        ("a reader key believed an editor", write(domain, acme.id, Principal(role="editor", tenant_id=acme.id, key_id=reader.key_id), read_hash, new)),
        ("a revoked key", write(domain, acme.id, revoked, revoked_hash, new)),
        ("an expired key", write(domain, acme.id, expired, expired_hash, new)),
        ("another key's secret", write(domain, acme.id, editor, read_hash, new)),
        ("another tenant's key", write(domain, acme.id, other, other_hash, new)),
        ("another tenant's key, believed this one's", write(domain, acme.id, Principal(role="admin", tenant_id=acme.id, key_id=other.key_id), other_hash, new)),
        ("a key without its secret", write(domain, acme.id, editor, None, new)),
        ("a token's caller", write(domain, acme.id, Principal(role="admin", tenant_id=acme.id, subject="s from i"), None, new)),
    ]  # fmt: skip
    before = await journal(domain, acme)
    for why, declining in declined:
        assert await declining is None, why
    # The tenant's keys switched off: the key is refused where it used to write.
    await superuser.execute("UPDATE tenants SET api_keys = false WHERE id = $1", acme.id)
    assert await write(domain, acme.id, editor, hashed, new) is None
    assert await journal(domain, acme) == before
    async with domain.tx(acme) as session:
        latest = (await session.execute(text("SELECT max(latest_version) FROM prompts"))).scalar()
        blobs = (await session.execute(text("SELECT count(*) FROM blobs"))).scalar_one()
    assert (latest, blobs) == (1, 0)
    # Switched on again, the same write is the ordinary one.
    await superuser.execute("UPDATE tenants SET api_keys = true WHERE id = $1", acme.id)
    written = await write(domain, acme.id, editor, hashed, new)
    assert written is not None and written.version == 2


async def test_a_tenants_one_call_writes_take_turns_and_no_other_tenant_waits(
    domain: Domain,
) -> None:
    """At most ONE_CALL_WRITES_PER_TENANT of one tenant's writes are in the database at once from
    a worker; the next waits its turn and goes in when one ends, while another tenant's goes in at
    once. Nothing is kept once no write of the tenant is under way."""
    db = domain.db
    acme, globex = uuid.uuid4(), uuid.uuid4()
    release = asyncio.Event()
    inside: list[str] = []
    entered = asyncio.Condition()

    async def hold(name: str, tenant_id: uuid.UUID) -> None:
        async with db.one_call(tenant_id) as connection:
            assert await connection.fetchval("SELECT 1") == 1
            async with entered:
                inside.append(name)
                entered.notify_all()
            await release.wait()

    async def seen(count: int) -> None:
        async with entered:
            await entered.wait_for(lambda: len(inside) >= count)

    holders = [
        asyncio.create_task(hold(f"acme-{i}", acme)) for i in range(ONE_CALL_WRITES_PER_TENANT)
    ]
    await asyncio.wait_for(seen(ONE_CALL_WRITES_PER_TENANT), 30)
    waiting = asyncio.create_task(hold("acme-next", acme))
    other = asyncio.create_task(hold("globex", globex))
    await asyncio.wait_for(seen(ONE_CALL_WRITES_PER_TENANT + 1), 30)
    assert inside[-1] == "globex" and "acme-next" not in inside
    release.set()
    await asyncio.wait_for(asyncio.gather(*holders, waiting, other), 30)
    assert inside[-1] == "acme-next"
    assert db._turns == {}
