"""A skill's test cases run on one of its versions: each checks the version's SKILL.md (as one user
message; a skill takes no arguments). Run at every version written (the answer shows the results,
never blocking the write), on demand (``POST .../skills/{name}/test``) and on the versions a change
request moves labels to."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.audit import record_audit
from registry.db.skill_models import Skill
from registry.errors import InvalidInput, NotFound
from registry.principal import Principal
from registry.skills import folder
from registry.skills import repository as repo
from registry.testcases import TestCase, TestRequest, TestRun, loaded, run, stored


def _no_arguments(cases: Sequence[TestCase]) -> None:
    for case in cases:
        if case.arguments:
            raise InvalidInput(
                f"test case {case.name!r}: a skill's SKILL.md takes no arguments", field="tests"
            )


async def run_tests(
    session: AsyncSession, skill: Skill, version: int, cases: Sequence[TestCase] | None = None
) -> TestRun:
    chosen = list(cases) if cases is not None else loaded(skill.tests)
    _no_arguments(chosen)
    if not chosen:
        return TestRun(version=version, passed=0, failed=0, cases=[])
    found = await repo.file_bytes(session, skill.tenant_id, skill.id, version, folder.SKILL_MD)
    if found is None:
        raise NotFound(f"skill {skill.name!r} has no version {version}", field="version")
    text = found[1].decode("utf-8", errors="replace")
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return run(version, chosen, lambda _case: [message])


async def set_tests(
    session: AsyncSession, caller: Principal, skill: Skill, tests: Sequence[TestCase]
) -> None:
    """A skill's test cases replaced (``skill`` locked)."""
    _no_arguments(tests)
    before = [case.get("name") for case in skill.tests or []]
    await repo.set_tests(session, skill, stored(tests))
    await record_audit(
        session,
        tenant_id=skill.tenant_id,
        actor=caller.actor,
        action="skill.update",
        target=f"skill:{skill.name}",
        before={"tests": before},
        after={"tests": [case.name for case in tests]},
    )


async def version_asked(session: AsyncSession, skill: Skill, request: TestRequest) -> int:
    """The version a test request names: a number, what a label serves, or the latest."""
    if request.label is not None:
        row = await repo.label_row(session, skill, request.label)
        if row is None:
            raise NotFound(f"skill {skill.name!r} has no label {request.label!r}", field="label")
        return row.version
    version = request.version or skill.latest_version
    if version > skill.latest_version:
        raise NotFound(f"skill {skill.name!r} has no version {version}", field="version")
    return version


async def test_skill(session: AsyncSession, skill: Skill, request: TestRequest) -> TestRun:
    version = await version_asked(session, skill, request)
    return await run_tests(session, skill, version, request.tests)
