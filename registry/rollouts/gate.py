"""The rule that decides a step from what callers reported (pure).

At the end of each step (its ``min_seconds`` passed, its ``min_answers`` served), the share of
"bad" outcomes on the new side is compared with the old side's by a one-sided two-proportion z-test
(pooled): the new side is **worse** when z ≥ 2.326, a false alarm rate of 1 % per step when both
sides are alike (so at most 4 % over the four steps of 1, 10, 50, 100 %, by the union bound). It
is tested once per step, at its end, not at every look: repeated looks would raise the false alarm
rate. A step waits while either side has fewer than ``min_outcomes`` outcomes; with no
``min_outcomes`` it is tested once both sides have ``MIN_TESTED`` (below that a z-test says
nothing) and otherwise passes on time and answers alone.

The registry's own signal is tested the same way, with no report needed: the share of requests a
side was sent that ended in an error (an argument error, a refusal) against the other side's
(``judge_errors``), once both sides had ``MIN_TESTED`` requests in the step. A step where both
signals are tested has a false alarm rate of at most 2 % (1 % each); one where neither side had an
error spends nothing on it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Z_WORSE = 2.326  # the 99th percentile of the standard normal: one-sided, alpha 0.01
MIN_TESTED = 10


@dataclass(frozen=True)
class Outcomes:
    good: int = 0
    bad: int = 0

    @property
    def n(self) -> int:
        return self.good + self.bad

    @property
    def bad_rate(self) -> float:
        return self.bad / self.n if self.n else 0.0


@dataclass(frozen=True)
class Verdict:
    decision: Literal["wait", "worse", "fine"]
    reason: str


def _z(old: Outcomes, new: Outcomes) -> float | None:
    """The pooled two-proportion z of the new side's bad rate over the old's (None: the sides
    are alike, all bad or none)."""
    pooled = (old.bad + new.bad) / (old.n + new.n)
    if pooled in (0.0, 1.0):
        return None
    spread = math.sqrt(pooled * (1 - pooled) * (1 / old.n + 1 / new.n))
    return (new.bad_rate - old.bad_rate) / spread


def judge(old: Outcomes, new: Outcomes, least: int) -> Verdict:
    counts = f"bad {new.bad} of {new.n} on the new side, {old.bad} of {old.n} on the old"
    if least and (old.n < least or new.n < least):
        return Verdict("wait", f"waiting for {least} outcomes a side ({counts})")
    if old.n < MIN_TESTED or new.n < MIN_TESTED:
        return Verdict("fine", f"too few outcomes to compare ({counts})")
    z = _z(old, new)
    if z is None:
        return Verdict("fine", f"the sides are alike ({counts})")
    if z >= Z_WORSE:
        return Verdict("worse", f"the new side is worse: {counts}, z = {z:.2f} ≥ {Z_WORSE}")
    return Verdict("fine", f"not worse: {counts}, z = {z:.2f}")


def judge_errors(old: Outcomes, new: Outcomes) -> Verdict:
    """The sides' errors (``bad``) among the requests they were sent (``good``: answers)."""
    counts = (
        f"errors in {new.bad} of {new.n} requests on the new side, {old.bad} of {old.n} on the old"
    )
    if old.n < MIN_TESTED or new.n < MIN_TESTED:
        return Verdict("fine", f"too few requests to compare ({counts})")
    z = _z(old, new)
    if z is None or z < Z_WORSE:
        return Verdict("fine", f"errors not worse ({counts})")
    return Verdict("worse", f"the new side fails more: {counts}, z = {z:.2f} ≥ {Z_WORSE}")
