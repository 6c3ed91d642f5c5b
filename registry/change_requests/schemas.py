"""The shapes of change requests that cross the releases boundary: what a caller sends, and what it
is answered."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, Field, field_validator, model_validator

from registry.inputs import StrictInput
from registry.naming import LABEL_PATTERN, MAX_VERSION, PROMPT_NAME_PATTERN
from registry.prompts.schemas import ContractChange
from registry.rollouts.schemas import RolloutPlan
from registry.skills.schemas import SKILL_NAME_PATTERN
from registry.testcases import TestRun

MAX_MOVES = 100  # moves of one request
State = Literal["open", "approved", "applied", "rejected", "withdrawn", "stale"]


class MoveIn(StrictInput):
    """Move ``label`` of a prompt (or of a skill) to ``version``."""

    prompt: str | None = Field(default=None, pattern=PROMPT_NAME_PATTERN)
    skill: str | None = Field(default=None, pattern=SKILL_NAME_PATTERN, max_length=64)
    label: str = Field(pattern=LABEL_PATTERN)
    version: int = Field(ge=1, le=MAX_VERSION)
    rollout: RolloutPlan | None = Field(
        default=None,
        description="start a rollout of the label to the version, in these steps, instead of "
        "moving it (the approval covers every step and the promotion)",
    )

    @model_validator(mode="after")
    def _one_artifact(self) -> MoveIn:
        if (self.prompt is None) == (self.skill is None):
            raise ValueError("name a prompt or a skill (one of them)")
        return self

    @property
    def kind(self) -> Literal["prompt", "skill"]:
        return "prompt" if self.prompt is not None else "skill"

    @property
    def name(self) -> str:
        return self.prompt if self.prompt is not None else str(self.skill)


def _future(value: datetime | None) -> datetime | None:
    if value is not None and value <= datetime.now(UTC):
        raise ValueError("apply_at must be in the future (leave it out to apply on approval)")
    return value


class ChangeRequestIn(StrictInput):
    description: str = Field(min_length=1, max_length=10_000)
    moves: list[MoveIn] = Field(min_length=1, max_length=MAX_MOVES)
    apply_at: AwareDatetime | None = Field(
        default=None, description="apply at this time once approved (else: on the last approval)"
    )

    _apply_at_future = field_validator("apply_at")(_future)

    @model_validator(mode="after")
    def _distinct(self) -> ChangeRequestIn:
        seen = {(m.kind, m.name, m.label) for m in self.moves}
        if len(seen) != len(self.moves):
            raise ValueError("a label of one prompt or skill is moved twice")
        return self


class ChangeRequestPatch(StrictInput):
    """A change of an open request; new moves (or a new time) reset its approvals."""

    description: str | None = Field(default=None, min_length=1, max_length=10_000)
    moves: list[MoveIn] | None = Field(default=None, min_length=1, max_length=MAX_MOVES)
    apply_at: AwareDatetime | None = None

    _apply_at_future = field_validator("apply_at")(_future)


class CommentIn(StrictInput):
    comment: str = Field(min_length=1, max_length=10_000)


class ApproveIn(StrictInput):
    comment: str | None = Field(default=None, max_length=10_000)
    override: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="an admin's reason to approve despite failing tests or broken argument "
        "contracts (recorded in the audit log)",
    )


class ReasonIn(StrictInput):
    reason: str | None = Field(default=None, max_length=10_000)


class MoveOut(BaseModel):
    prompt: str | None = None
    skill: str | None = None
    label: str
    version: int
    before: int | None = Field(description="what the label served when the move was written")
    rollout: RolloutPlan | None = Field(default=None, description="a rollout instead of a move")
    current: int | None = Field(default=None, description="what the label serves now")
    breaking: list[ContractChange] = Field(
        default_factory=list, description="how the move breaks what callers send"
    )
    tests: TestRun | None = None
    diff: dict[str, Any] | None = Field(
        default=None, description="the version against what the label serves now"
    )


class ReviewOut(BaseModel):
    actor: str
    kind: str
    body: str | None
    revision: int
    created_at: datetime


class Checks(BaseModel):
    tests_failed: int = 0
    breaking: int = 0
    overridden_by: str | None = None
    override_reason: str | None = None

    @property
    def blocking(self) -> bool:
        return (self.tests_failed > 0 or self.breaking > 0) and self.overridden_by is None


class ChangeRequestOut(BaseModel):
    id: int
    state: State
    author: str
    description: str
    revision: int
    apply_at: datetime | None
    approvals_needed: int
    approved_by: list[str] = Field(description="who approved the current revision")
    stale_reason: str | None = None
    applied_by: str | None = None
    applied_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    moves: list[MoveOut]
    checks: Checks | None = Field(default=None, description="tests and contracts (shown requests)")
    reviews: list[ReviewOut] = Field(default_factory=list)
    names: dict[str, str] = Field(
        default_factory=dict,
        description="each actor named here (author, approvers, reviewers) as a person reads it",
    )


class ChangeRequestSummary(BaseModel):
    id: int
    state: State
    author: str
    description: str
    apply_at: datetime | None
    moves: int
    created_at: datetime
    updated_at: datetime
    names: dict[str, str] = Field(
        default_factory=dict,
        description="each actor named here (author, approvers, reviewers) as a person reads it",
    )
