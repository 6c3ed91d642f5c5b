"""Rendering and bundles below the doors: what a label serves rendered with its partial as it was
locked, a partial's new version reaching only the versions that follow it, and a bundle exported
and imported into another tenant rendering the same, twice without writing anything more."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from registry.errors import InvalidInput
from registry.prompts import bundles, rendering, writing
from registry.prompts.schemas import Bundle, VersionIn
from tests.domain.conftest import Domain, prompt

LIMIT = 10_000


def _version(text_: str) -> VersionIn:
    return VersionIn.model_validate(
        {"messages": [{"role": "user", "content": {"type": "text", "text": text_}}]}
    )


async def test_a_label_renders_with_the_partial_it_locked(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor = domain.caller(acme, "publisher")
    async with domain.tx(acme) as session:
        await writing.create_prompt(session, acme, editor, prompt("sign", "-- Ann"),
                                    max_blob_bytes=1 << 20)  # fmt: skip
        body = prompt("greet", "Hello {{who}}\n{{> sign@1}}", labels=["production"],
                      arguments=[{"name": "who", "required": True}])  # fmt: skip
        await writing.create_prompt(session, acme, editor, body, max_blob_bytes=1 << 20)
        await writing.create_version(session, acme, editor, "sign", _version("-- Bob"),
                                     if_match=None, max_blob_bytes=1 << 20)  # fmt: skip
    async with domain.tx(acme) as session:
        shown = await rendering.render(session, acme, "greet", {"who": "Cy"}, label="production",
                                       max_value_length=LIMIT)  # fmt: skip
        assert shown.messages[0]["content"]["text"] == "Hello Cy\n-- Ann"  # sign@1, not latest
        with pytest.raises(InvalidInput, match="who"):
            await rendering.render(session, acme, "greet", {}, label="production",
                                   max_value_length=LIMIT)  # fmt: skip


async def test_a_bundle_renders_the_same_in_another_tenant_and_imports_once(
    domain: Domain,
) -> None:
    acme, other = await domain.tenant("acme"), await domain.tenant("other")
    editor = domain.caller(acme, "publisher")
    async with domain.tx(acme) as session:
        await writing.create_prompt(session, acme, editor, prompt("sign", "-- Ann"),
                                    max_blob_bytes=1 << 20)  # fmt: skip
        body = prompt("greet", "Hello {{who}}\n{{> sign@1}}", labels=["production"],
                      arguments=[{"name": "who", "required": True}])  # fmt: skip
        await writing.create_prompt(session, acme, editor, body, max_blob_bytes=1 << 20)
        exported = b"".join([
            part async for part in bundles.export_stream(session, acme, only_labelled=False)
        ])  # fmt: skip
    bundle = Bundle.model_validate(json.loads(exported))
    importer = domain.caller(other, "admin")
    async with domain.tx(other) as session:
        first = await bundles.import_bundle(
            session, other, importer, bundle, max_blob_bytes=1 << 20
        )
    async with domain.tx(other) as session:
        again = await bundles.import_bundle(
            session, other, importer, bundle, max_blob_bytes=1 << 20
        )
        shown = await rendering.render(session, other, "greet", {"who": "Cy"}, label="production",
                                       max_value_length=LIMIT)  # fmt: skip
        versions = (await session.execute(text("SELECT count(*) FROM prompt_versions"))).scalar()
    assert shown.messages[0]["content"]["text"] == "Hello Cy\n-- Ann"
    assert (first.prompts_created, first.versions_created) == (2, 2)
    assert (again.prompts_created, again.versions_created, again.labels_moved) == (0, 0, 0)
    assert versions == 2  # greet@1 and sign@1, once
