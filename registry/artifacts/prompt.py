"""Prompts as a kind of artifact: ``KindOps`` over the prompts domain."""

from __future__ import annotations

from typing import cast

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import PROMPT
from registry.artifacts.model import Artifact, MoveAt, Review
from registry.db.models import Prompt, Tenant
from registry.labels import Terms
from registry.principal import Principal
from registry.prompts import contracts, diff, policy, prompt_tests, writing
from registry.prompts import label_repository as labels
from registry.prompts.reading import find_prompt
from registry.prompts.schemas import ContractChange


class PromptOps:
    kind = PROMPT

    async def find(
        self, session: AsyncSession, tenant: Tenant, name: str, *, lock: bool = False
    ) -> Artifact:
        return await find_prompt(session, tenant, name, lock=lock)

    async def served(self, session: AsyncSession, artifact: Artifact, label: str) -> int | None:
        return await labels.label_version(session, cast(Prompt, artifact), label)

    async def move(
        self,
        session: AsyncSession,
        tenant: Tenant,
        artifact: Artifact,
        move: MoveAt,
        caller: Principal,
        terms: Terms,
    ) -> None:
        # force: a change request's contract breaks were weighed when it was approved
        await writing.move_label(
            session,
            tenant,
            cast(Prompt, artifact),
            move.label,
            move.version,
            caller,
            force=terms.release is not None,
            terms=terms,
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
        """The tests, and the contract changes of a protected label's move; the whole diff only
        when it is shown (reviewing needs the arguments alone)."""
        prompt = cast(Prompt, artifact)
        review = Review()
        before = move.current
        moving = before is not None and before != move.version
        checked = moving and policy.needs_contract_check(tenant, move.label, before)
        changes: list[ContractChange] = []
        if moving and detailed:
            assert before is not None
            compared = await diff.diff_versions(session, tenant, prompt.name, before, move.version)
            review.diff = compared.model_dump(mode="json")
            changes = compared.contract
        elif checked:
            assert before is not None
            changes = await writing.contract_changes(session, prompt, before, move.version)
        if checked:
            review.breaking = list(contracts.breaking(changes))
        if prompt.tests:
            review.tests = await prompt_tests.run_tests(session, tenant, prompt, move.version)
        return review
