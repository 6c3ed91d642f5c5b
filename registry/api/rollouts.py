"""Rollouts of a label over REST, for every kind (``/prompts/NAME/labels/LABEL/rollout`` and the
same under ``/skills/NAME``): start, show, pause, resume, promote, roll back. One service call per
route (registry.rollouts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Path, Request, Response

from registry.api.auth import require_credential, tenant_scope
from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.naming import LABEL_PATTERN
from registry.rollouts import assign, service
from registry.rollouts.assign import Routed
from registry.rollouts.schemas import ReasonIn, RolloutIn, RolloutOut
from registry.tenants.access import TenantScope
from registry.usage.ledger import caller_of, client_of

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["rollouts"], dependencies=[Depends(require_credential)]
)
Label = Annotated[str, Path(pattern=LABEL_PATTERN)]
Action = Literal["pause", "resume", "promote", "rollback"]


async def route(
    request: Request, scope: TenantScope, kind: str, names: Sequence[str], label: str
) -> dict[str, Routed]:
    """Where the tenant's live rollouts of ``label`` send this REST caller, for each of ``names``
    that has one (nothing is read unless the tenant has live rollouts)."""
    lives = await service.live(scope.session, scope.tenant)
    if not lives:
        return {}
    agent = request.headers.get("user-agent")
    identity = assign.identity_of(
        caller_of(scope.principal), scope.principal.anonymous, client_of({"name": agent})
    )
    found = {name: assign.route(lives, kind, name, label, identity) for name in names}
    return {name: routed for name, routed in found.items() if routed is not None}


def _routes(kind: str, plural: str) -> None:
    base = f"/{plural}/{{name}}/labels/{{label}}/rollout"

    started = f"Start a rollout of a {kind}'s label (a new version, a share of callers)"

    @router.put(base, response_model=RolloutOut, status_code=201, summary=started)
    async def start(
        tenant: str, name: str, label: Label, body: RolloutIn, request: Request
    ) -> RolloutOut:
        async with tenant_scope(request, tenant, "editor") as scope:
            return await service.start(
                scope.session, scope.tenant, scope.principal, kind, name, label, body
            )

    @router.get(
        base, response_model=RolloutOut, summary=f"A {kind}'s label's rollout: its step and sides"
    )
    async def show(tenant: str, name: str, label: Label, request: Request) -> RolloutOut:
        async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
            return await service.show(scope.session, scope.tenant, kind, name, label)

    acted = f"Pause, resume, promote or roll back a {kind}'s label's rollout"

    @router.post(base + "/{action}", response_model=RolloutOut, summary=acted)
    async def act(
        tenant: str, name: str, label: Label, action: Action, request: Request,
        response: Response, body: Annotated[ReasonIn | None, Body()] = None,
    ) -> RolloutOut:  # fmt: skip
        del response
        async with tenant_scope(request, tenant, "editor") as scope:
            return await service.act(
                scope.session, scope.tenant, scope.principal, kind, name, label, action,
                body.reason if body else None,
            )  # fmt: skip


for _kind in ARTIFACT_KINDS.values():
    _routes(_kind.name, _kind.plural)
