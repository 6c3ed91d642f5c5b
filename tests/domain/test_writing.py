"""What the prompts domain decides when a version is written or a label moves, called as the doors
call it (tests/api and tests/console check only their own statuses and words)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from registry.errors import Conflict, Forbidden
from registry.prompts import reading, rendering, writing
from registry.prompts.schemas import VersionIn
from tests.domain.conftest import Domain, prompt

BLOBS = 1024 * 1024
WHO = {"name": "who"}
TOPIC = {"name": "topic", "required": True, "enum": ["billing", "shipping"]}


async def test_a_write_moves_latest_and_the_same_content_writes_nothing(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor = domain.caller(acme, "editor")
    async with domain.tx(acme) as session:
        first = await writing.create_prompt(
            session,
            acme,
            editor,
            prompt("greet", "Hello {{who}}.", arguments=[WHO]),
            max_blob_bytes=BLOBS,
        )
    assert (first.created, first.version, first.labels_moved) == (True, 1, [])
    again = VersionIn.model_validate(
        {
            "arguments": [WHO],
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hello {{who}}."}}],
        }
    )
    async with domain.tx(acme) as session:
        same = await writing.create_version(
            session, acme, editor, "greet", again, if_match=1, max_blob_bytes=BLOBS
        )
        served = await rendering.render(
            session, acme, "greet", {"who": "Ada"}, label="latest", max_value_length=100
        )
    assert (same.created, same.version) == (False, 1)
    assert served.messages[0]["content"]["text"] == "Hello Ada."


async def test_a_protected_label_moves_for_a_publisher_only(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor, publisher = domain.caller(acme, "editor"), domain.caller(acme, "publisher")
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, editor, prompt("greet", "Hi."), max_blob_bytes=BLOBS
        )
    with pytest.raises(Forbidden, match="publisher"):
        async with domain.tx(acme) as session:
            await writing.set_label(session, acme, editor, "greet", "production", 1)
    async with domain.tx(acme) as session:  # the refused move left nothing behind
        assert (await reading.get_prompt(session, acme, "greet")).labels == {"latest": 1}
        moved = await writing.set_label(session, acme, publisher, "greet", "production", 1)
    assert moved.version == 1
    async with domain.tx(acme) as session:  # unprotected labels move for an editor
        await writing.set_label(session, acme, editor, "greet", "staging", 1)
        labels = (await reading.get_prompt(session, acme, "greet")).labels
    assert labels == {"latest": 1, "production": 1, "staging": 1}


async def test_a_breaking_move_of_a_protected_label_needs_force_and_is_audited(
    domain: Domain,
) -> None:
    acme = await domain.tenant("acme")
    publisher = domain.caller(acme, "publisher")
    first = prompt("reply", "About {{topic}}.", arguments=[TOPIC], labels=["production"])
    async with domain.tx(acme) as session:
        await writing.create_prompt(session, acme, publisher, first, max_blob_bytes=BLOBS)
    narrower = VersionIn.model_validate(
        {
            "arguments": [{**TOPIC, "enum": ["billing"]}],  # shipping callers would now be refused
            "messages": [{"role": "user", "content": {"type": "text", "text": "On {{topic}}."}}],
        }
    )
    async with domain.tx(acme) as session:
        await writing.create_version(
            session, acme, publisher, "reply", narrower, if_match=1, max_blob_bytes=BLOBS
        )
    with pytest.raises(Conflict) as refused:
        async with domain.tx(acme) as session:
            await writing.set_label(session, acme, publisher, "reply", "production", 2)
    assert refused.value.detail["overridable_by"] == "force"
    assert "shipping" in refused.value.message
    async with domain.tx(acme) as session:
        forced = await writing.set_label(
            session, acme, publisher, "reply", "production", 2, force=True
        )
    async with domain.tx(acme) as session:  # the audit row is appended as the move commits
        audit = (
            await session.execute(
                text(
                    "SELECT after FROM audit_log WHERE action = 'label.move' "
                    "ORDER BY created_at DESC LIMIT 1"
                )
            )
        ).scalar_one()
    assert forced.version == 2
    assert audit["force"] is True and "shipping" in audit["breaking"][0]


async def test_a_partial_is_locked_when_its_parent_is_written(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor = domain.caller(acme, "editor")
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, editor, prompt("tone", "Be brief."), max_blob_bytes=BLOBS
        )
        await writing.create_prompt(
            session,
            acme,
            editor,
            prompt("reply", "{{> tone@latest}} Answer."),
            max_blob_bytes=BLOBS,
        )
    newer = VersionIn.model_validate(
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Be warm."}}]}
    )
    async with domain.tx(acme) as session:
        await writing.create_version(
            session, acme, editor, "tone", newer, if_match=1, max_blob_bytes=BLOBS
        )
        kept = await rendering.render(
            session, acme, "reply", {}, label="latest", max_value_length=100
        )
    assert kept.messages[0]["content"]["text"] == "Be brief. Answer."  # the lock holds
    async with domain.tx(acme) as session:
        refreshed = await writing.refresh_partials(
            session, acme, editor, "reply", [], if_match=1, max_blob_bytes=BLOBS
        )
        now = await rendering.render(
            session, acme, "reply", {}, label="latest", max_value_length=100
        )
    assert refreshed.version == 2
    assert now.messages[0]["content"]["text"] == "Be warm. Answer."


async def test_a_version_appends_the_queued_rows_with_its_own_and_an_identical_one_leaves_them(
    domain: Domain,
) -> None:
    """A version write appends the transaction's queued audit and change rows in its own statement,
    before its own (the logs keep the order of the transaction); a write that writes nothing (the
    same content) leaves them for the commit."""
    acme = await domain.tenant("acme")
    editor, publisher = domain.caller(acme, "editor"), domain.caller(acme, "publisher")
    same = VersionIn.model_validate(
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi."}}]}
    )
    new = VersionIn.model_validate(
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Hello."}}]}
    )
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, editor, prompt("greet", "Hi."), max_blob_bytes=BLOBS
        )
    async with domain.tx(acme) as session:
        await writing.set_label(session, acme, publisher, "greet", "production", 1)
        kept = await writing.create_version(
            session, acme, editor, "greet", same, if_match=None, max_blob_bytes=BLOBS
        )
    async with domain.tx(acme) as session:
        await writing.set_label(session, acme, publisher, "greet", "staging", 1)
        written = await writing.create_version(
            session, acme, editor, "greet", new, if_match=None, max_blob_bytes=BLOBS
        )
    assert (kept.created, written.created, written.version) == (False, True, 2)
    async with domain.tx(acme) as session:
        audit = (
            await session.execute(
                text(
                    "SELECT action, target FROM audit_log WHERE target LIKE 'prompt:%' ORDER BY id"
                )
            )
        ).all()
        changes = (
            await session.execute(text("SELECT kind, label FROM change_log ORDER BY seq"))
        ).all()
    assert [tuple(row) for row in audit] == [
        ("prompt.create", "prompt:greet"),
        ("version.create", "prompt:greet@1"),
        ("label.move", "prompt:greet@production"),
        ("label.move", "prompt:greet@staging"),
        ("version.create", "prompt:greet@2"),
    ]
    assert [tuple(row) for row in changes] == [
        ("label.move", "latest"),
        ("label.move", "production"),
        ("label.move", "staging"),
        ("label.move", "latest"),
    ]
