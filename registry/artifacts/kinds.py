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
    events: tuple[str, ...]  # how its change-log kinds start (the webhook trigger says the same)

    def event(self, what: str) -> str:
        """The change-log kind of ``what`` happening to an artifact of this kind."""
        return self.event_prefix + what


PROMPT = ArtifactKind(
    name="prompt",
    plural="prompts",
    move_key="prompt",
    event_prefix="",
    events=("label.", "prompt."),
)
SKILL = ArtifactKind(
    name="skill", plural="skills", move_key="skill", event_prefix="skill.", events=("skill.",)
)
ARTIFACT_KINDS: dict[str, ArtifactKind] = {kind.name: kind for kind in (PROMPT, SKILL)}


def of_event(kind: str) -> ArtifactKind | None:
    """The kind of artifact a change-log kind is about; None for a change of the tenant or a
    change request's review (``migrations/sql/0028_artifact_in_events_v1.sql`` says the same for
    webhook payloads)."""
    for artifact in ARTIFACT_KINDS.values():
        if kind.startswith(artifact.events):
            return artifact
    return None
