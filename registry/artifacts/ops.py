"""The table of each kind's ``KindOps``, keyed like ``ARTIFACT_KINDS`` (a kind added to one and not
the other fails at import)."""

from __future__ import annotations

from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.artifacts.model import KindOps
from registry.artifacts.prompt import PromptOps
from registry.artifacts.skill import SkillOps

OPS: dict[str, KindOps] = {ops.kind.name: ops for ops in (PromptOps(), SkillOps())}
if set(OPS) != set(ARTIFACT_KINDS):
    raise RuntimeError(f"artifact kinds without their operations: {set(ARTIFACT_KINDS) ^ set(OPS)}")


def ops_of(kind: str) -> KindOps:
    return OPS[kind]
