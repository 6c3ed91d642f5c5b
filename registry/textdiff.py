"""Line diffs, bounded: one side of at most ``MAX_DIFF_LINES`` lines, and at most ``DIFF_BUDGET``
lines compared by one request, whatever it compares (a prompt's messages, a skill's files). Past
either, no diff: a note that says why. difflib's cost grows faster than its input, so a stored text
never makes a reader's request (a diff, a change request's page) hold a worker. Pure; blocking,
so callers run it in a worker thread."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

MAX_DIFF_LINES = 5_000
DIFF_BUDGET = 20_000


@dataclass
class Budget:
    """The lines one request may still compare."""

    lines: int = DIFF_BUDGET


def unified(
    left: list[str], right: list[str], fromfile: str, tofile: str, budget: Budget
) -> tuple[list[str] | None, str | None]:
    """(the unified diff of ``left`` and ``right``, None) within the bounds, else (None, why)."""
    size = len(left) + len(right)
    if max(len(left), len(right)) > MAX_DIFF_LINES or size > budget.lines:
        return None, (
            f"too large to diff line by line ({len(left):,} and {len(right):,} lines; "
            f"the limit is {MAX_DIFF_LINES:,} per side and {DIFF_BUDGET:,} per request)"
        )
    budget.lines -= size
    return list(difflib.unified_diff(left, right, fromfile, tofile, lineterm="")), None
