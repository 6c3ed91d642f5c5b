"""What the skills domain decides when a version is written or a label moves."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlalchemy import text

from registry.errors import Conflict, Forbidden, InvalidInput
from registry.prompts import partials, writing
from registry.skills import service as skills
from registry.skills.schemas import SkillCreate, SkillVersionIn
from tests.domain.conftest import Domain, prompt

SKILL_MD = """---
name: review
description: How we review a pull request
metadata:
  owner: platform
---
# Review

{{> checklist@latest}}

Keep `{{ braces }}` of other templates as they are.
"""


async def expand(session: Any, tenant: Any, source: str) -> tuple[str, list[Any]]:
    return await partials.expand_text(session, tenant, source, where="SKILL.md")


def folder(skill_md: str = SKILL_MD, **extra: str) -> list[dict[str, str]]:
    return [{"path": "SKILL.md", "text": skill_md}] + [
        {"path": path, "text": body} for path, body in extra.items()
    ]


async def test_a_version_resolves_partials_stores_files_and_moves_latest(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor = domain.caller(acme, "editor")
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, editor, prompt("checklist", "1. Tests pass."), max_blob_bytes=1 << 20
        )
        body = SkillCreate.model_validate(
            {"name": "review", "files": folder(**{"references/STYLE.md": "Short lines."})}
        )
        written = await skills.create_skill(session, acme, editor, body, expand=expand)
    assert (written.created, written.version, written.skill.labels) == (True, 1, {"latest": 1})
    latest = written.skill.latest
    assert latest is not None and latest.frontmatter["metadata"] == {"owner": "platform"}
    assert [f.path for f in latest.files] == ["SKILL.md", "references/STYLE.md"]
    assert [p.model_dump() for p in latest.partials] == [
        {"ref": "checklist@latest", "prompt": "checklist", "version": 1}
    ]
    async with domain.tx(acme) as session:
        mime, data = await skills.file_of_version(session, acme, "review", 1, "SKILL.md")
        again = await skills.create_version(
            session, acme, editor, "review",
            SkillVersionIn.model_validate({"files": folder(**{"references/STYLE.md": "Short lines."})}),
            if_match=1, expand=expand,
        )  # fmt: skip
    served = data.decode()
    assert mime == "text/markdown" and "1. Tests pass." in served and "{{> " not in served
    assert "{{ braces }}" in served
    assert latest.files[0].sha256 == hashlib.sha256(data).hexdigest()
    assert (again.created, again.version) == (False, 1)  # the same folder writes nothing


@pytest.mark.parametrize(
    ("files", "words"),
    [
        ([{"path": "README.md", "text": "no SKILL.md"}], "needs a SKILL.md"),
        (folder("no front matter"), "must begin with YAML front matter"),
        (folder(SKILL_MD.replace("name: review", "name: other")), "name must be 'review'"),
        (
            folder(SKILL_MD.replace("description: How we review a pull request\n", "")),
            "description",
        ),
        (
            folder(SKILL_MD.replace("  owner: platform", "  io.modelcontextprotocol/x: 1")),
            "reserved",
        ),
        (folder(SKILL_MD.replace("owner: platform", "since: 2026-01-01")), "not a JSON value"),
        (
            folder(SKILL_MD.replace("owner: platform", "n: 123456789012345678901234")),
            r"front matter\.metadata\.n: an integer of 77 bits",
        ),
        (folder(SKILL_MD.replace("owner: platform", "n: .nan")), "metadata.n: nan is not a JSON"),
        (folder(**{"../escape.md": "x"}), "invalid file path"),
        (folder(**{"a": "file", "a/b": "and folder"}), "both a file and a folder"),
        (
            folder(SKILL_MD.replace("{{> checklist@latest}}", "{{> nowhere}}")),
            "no prompt 'nowhere'",
        ),
    ],
)
async def test_a_folder_that_does_not_hold_up_is_refused_with_the_reason(
    domain: Domain, files: list[dict[str, str]], words: str
) -> None:
    acme = await domain.tenant("acme")
    editor = domain.caller(acme, "editor")
    async with domain.tx(acme) as session:
        await writing.create_prompt(
            session, acme, editor, prompt("checklist", "1. Tests pass."), max_blob_bytes=1 << 20
        )
    with pytest.raises(InvalidInput, match=words):
        async with domain.tx(acme) as session:
            body = SkillCreate.model_validate({"name": "review", "files": files})
            await skills.create_skill(session, acme, editor, body, expand=expand)
    async with domain.tx(acme) as session:  # nothing half-written
        assert (await session.execute(text("SELECT count(*) FROM skills"))).scalar_one() == 0


async def test_protected_labels_and_names(domain: Domain) -> None:
    acme = await domain.tenant("acme")
    editor, publisher = domain.caller(acme, "editor"), domain.caller(acme, "publisher")
    plain = SKILL_MD.replace("{{> checklist@latest}}", "1. Tests pass.")
    async with domain.tx(acme) as session:
        await skills.create_skill(
            session, acme, editor, SkillCreate.model_validate({"name": "review", "files": folder(plain)}),
            expand=expand,
        )  # fmt: skip
    with pytest.raises(Forbidden, match="publisher"):
        async with domain.tx(acme) as session:
            await skills.set_label(session, acme, editor, "review", "production", 1)
    async with domain.tx(acme) as session:
        moved = await skills.set_label(session, acme, publisher, "review", "production", 1)
        assert moved.version == 1
        served = await skills.served_skills(session, acme, "production", limit=10)
    assert [(s.name, s.version) for s in served] == [("review", 1)]
    with pytest.raises(Conflict, match="already exists"):
        async with domain.tx(acme) as session:
            await skills.create_skill(
                session, acme, editor,
                SkillCreate.model_validate({"name": "review", "files": folder(plain)}), expand=expand,
            )  # fmt: skip
