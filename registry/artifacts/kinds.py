"""The table of artifact kinds: each kind the registry keeps (prompts, skills) is one row, and every
place that must tell kinds apart reads it here rather than comparing strings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

KindName = Literal["prompt", "skill"]


@dataclass(frozen=True)
class ArtifactKind:
    name: KindName
    plural: str  # the segment of its REST routes and of a pushed folder (``skills/``)
    move_key: str  # the field that names it in a change request's move
    event_prefix: str  # before its change-log kinds: ``label.move`` or ``skill.label.move``

    def event(self, what: str) -> str:
        """The change-log kind of ``what`` happening to an artifact of this kind."""
        return self.event_prefix + what


PROMPT = ArtifactKind(name="prompt", plural="prompts", move_key="prompt", event_prefix="")
SKILL = ArtifactKind(name="skill", plural="skills", move_key="skill", event_prefix="skill.")
ARTIFACT_KINDS: dict[str, ArtifactKind] = {kind.name: kind for kind in (PROMPT, SKILL)}


def of_event(kind: str) -> ArtifactKind:
    """The artifact kind a change-log kind is about (a tenant's own changes count as prompts')."""
    return SKILL if kind.startswith(SKILL.event_prefix) else PROMPT
