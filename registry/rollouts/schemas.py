"""The typed shapes of rollouts: what starts one, and what is shown of one."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from registry.inputs import StrictInput

State = Literal["running", "paused", "promoted", "rolled_back"]


class RolloutPlan(StrictInput):
    """The steps and gates of a rollout: what a change request's move carries to start one."""

    steps: list[int] = Field(
        default=[1, 10, 50, 100],
        min_length=1,
        max_length=20,
        description="the share of callers on the new side at each step, in percent, rising to 100",
    )
    min_answers: int = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="answers the new side must have served in a step before it advances",
    )
    min_seconds: int = Field(
        default=300, ge=0, le=30 * 86400, description="the least time a step lasts"
    )
    min_outcomes: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="reported outcomes each side needs in a step before it is judged (POST /feedback)",
    )

    @model_validator(mode="after")
    def _rising_to_all(self) -> RolloutPlan:
        steps = self.steps
        if any(not 1 <= s <= 100 for s in steps) or any(
            a >= b for a, b in itertools.pairwise(steps)
        ):
            raise ValueError("steps: percents from 1 to 100, each above the one before")
        if steps[-1] != 100:
            raise ValueError("steps: the last step is 100 (every caller), then it is promoted")
        return self


class RolloutIn(RolloutPlan):
    version: int = Field(ge=1, le=2**31 - 1, description="the version the new side gets")
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="an admin's reason, for a label that needs approvals (break-glass)",
    )

    @property
    def plan(self) -> RolloutPlan:
        return RolloutPlan.model_validate(self.model_dump(include=set(RolloutPlan.model_fields)))


class Side(BaseModel):
    version: int
    answers: int = Field(description="answers the ledger counted for this side since the start")
    errors: int = Field(
        default=0,
        description="requests it was sent that ended in an error (argument errors, refusals) since "
        "the start",
    )
    good: int = Field(default=0, description="outcomes reported good in this step")
    bad: int = Field(default=0, description="outcomes reported bad in this step")


class RolloutOut(BaseModel):
    id: int
    kind: str
    name: str
    label: str
    state: State
    step: int = Field(description="the step, counted from 1")
    steps: list[int]
    share: int = Field(description="percent of callers on the new side now")
    min_answers: int
    min_seconds: int
    min_outcomes: int
    step_started_at: datetime
    old: Side
    new: Side
    reason: str | None = Field(description="why it ended or paused, or the break-glass reason")
    started_by: str
    change_request: int | None = Field(
        default=None, description="the change request whose approval started it"
    )
    created_at: datetime
    updated_at: datetime


class ReasonIn(StrictInput):
    reason: str | None = Field(default=None, min_length=1, max_length=2000)


class FeedbackIn(StrictInput):
    receipt: dict[str, Any] = Field(description="the signed receipt of the answer, as it came")
    outcome: Literal["good", "bad"]
    score: float | None = Field(default=None, ge=0, le=1)


class FeedbackOut(BaseModel):
    rollout: int
    step: int
    side: str
    counted: bool
