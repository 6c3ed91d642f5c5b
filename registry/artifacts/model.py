"""One model of an artifact for the workflows written once over every kind (change requests today):
what a workflow may ask of any kind (``KindOps``), and what it gets back. Each kind answers in a
module of its own (``registry.artifacts.prompt``, ``registry.artifacts.skill``) over its domain's
services; ``registry.artifacts.ops`` is the table of them, keyed like ``ARTIFACT_KINDS``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import ArtifactKind
from registry.db.models import Tenant
from registry.labels import Terms
from registry.principal import Principal
from registry.prompts.schemas import ContractChange
from registry.testcases import TestRun


class Artifact(Protocol):
    """What every stored artifact (a prompt's or a skill's row) has."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def tenant_id(self) -> uuid.UUID: ...
    @property
    def name(self) -> str: ...
    @property
    def latest_version(self) -> int: ...
    @property
    def archived_at(self) -> datetime | None: ...
    @property
    def tests(self) -> list[dict[str, Any]] | None: ...


@dataclass
class Review:
    """What a reviewer sees of one label move: the diff (when shown), the artifact's stored tests
    run on the version it moves to, and the argument-contract changes that would break callers."""

    diff: dict[str, Any] | None = None
    tests: TestRun | None = None
    breaking: list[ContractChange] = field(default_factory=list)


@dataclass(frozen=True)
class MoveAt:
    """One label move as a workflow names it: ``label`` of the artifact to ``version``, from the
    version it serves now (``current``: None when it serves none)."""

    label: str
    version: int
    current: int | None


class KindOps(Protocol):
    """What a workflow asks of one kind. Every method runs in the caller's tenant transaction."""

    kind: ArtifactKind

    async def find(
        self, session: AsyncSession, tenant: Tenant, name: str, *, lock: bool = False
    ) -> Artifact:
        """The artifact ``name`` (a NotFound naming it when there is none)."""
        ...

    async def served(self, session: AsyncSession, artifact: Artifact, label: str) -> int | None:
        """The version ``label`` serves (None: the artifact has no such label)."""
        ...

    async def move(
        self,
        session: AsyncSession,
        tenant: Tenant,
        artifact: Artifact,
        move: MoveAt,
        caller: Principal,
        terms: Terms,
    ) -> None:
        """Move the label (``artifact`` locked) through the one label policy, on ``terms``."""
        ...

    async def review(
        self,
        session: AsyncSession,
        tenant: Tenant,
        artifact: Artifact,
        move: MoveAt,
        *,
        detailed: bool,
    ) -> Review:
        """What a reviewer sees of ``move`` (the diff only when ``detailed``)."""
        ...
