"""Skills as a kind of artifact: ``KindOps`` over the skills domain."""

from __future__ import annotations

from typing import cast

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import SKILL
from registry.artifacts.model import Artifact, MoveAt, Review
from registry.db.models import Tenant
from registry.db.skill_models import Skill
from registry.labels import Terms
from registry.principal import Principal
from registry.skills import service as skills
from registry.skills import skill_tests


class SkillOps:
    kind = SKILL

    async def find(
        self, session: AsyncSession, tenant: Tenant, name: str, *, lock: bool = False
    ) -> Artifact:
        return await skills.find_skill(session, tenant, name, lock=lock)

    async def served(self, session: AsyncSession, artifact: Artifact, label: str) -> int | None:
        return await skills.label_version(session, cast(Skill, artifact), label)

    async def move(
        self,
        session: AsyncSession,
        tenant: Tenant,
        artifact: Artifact,
        move: MoveAt,
        caller: Principal,
        terms: Terms,
    ) -> None:
        await skills.move_checked(
            session, tenant, cast(Skill, artifact), move.label, move.version, caller, terms
        )

    async def review(
        self,
        session: AsyncSession,
        tenant: Tenant,
        artifact: Artifact,
        move: MoveAt,
        *,
        detailed: bool,
    ) -> Review:
        """The tests (on the version's SKILL.md), and the folder's diff file by file when shown;
        a skill has no argument contract to break."""
        skill = cast(Skill, artifact)
        review = Review()
        if detailed and move.current is not None and move.current != move.version:
            changed = await skills.diff(session, tenant, skill.name, move.current, move.version)
            review.diff = changed.model_dump(mode="json")
        if skill.tests:
            review.tests = await skill_tests.run_tests(session, skill, move.version)
        return review
