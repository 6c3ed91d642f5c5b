"""Rollouts of a label over REST, for every kind (``/prompts/NAME/labels/LABEL/rollout`` and the
same under ``/skills/NAME``): start, show, pause, resume, promote, roll back. One service call per
route (registry.rollouts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Request, Response

from registry import receipts, signing
from registry.api.auth import require_credential, tenant_scope
from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.db import repository as db_repository
from registry.errors import InvalidInput
from registry.naming import LABEL_PATTERN
from registry.rollouts import assign, service
from registry.rollouts import feedback as outcomes
from registry.rollouts.assign import Routed
from registry.rollouts.schemas import FeedbackIn, FeedbackOut, ReasonIn, RolloutIn, RolloutOut
from registry.signing import SignatureRefused
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


async def _keys(request: Request, scope: TenantScope) -> dict[str, Any]:
    """Every public key the registry signed receipts with (its key file's, and those it recorded)."""
    keys: dict[str, Any] = {}
    key_file = request.app.state.settings.snapshot_key_file
    if key_file is not None:
        current = signing.key_file(key_file).current()[0].public_key()
        keys[signing.key_id(current)] = current
    for row in await db_repository.signing_keys(scope.session):
        keys.setdefault(row.key_id, signing.public_key(row.public_key.encode()))
    return keys


@router.post(
    "/feedback",
    response_model=FeedbackOut,
    status_code=201,
    summary="What an answer a rollout decided was worth (its signed receipt, an outcome)",
)
async def feedback(tenant: str, body: FeedbackIn, request: Request) -> FeedbackOut:
    async with tenant_scope(request, tenant, "reader") as scope:
        try:
            document = receipts.check(body.receipt, await _keys(request, scope))
        except SignatureRefused as refused:
            raise InvalidInput(f"receipt: {refused}", field="receipt") from None
        return await outcomes.report(
            scope.session,
            scope.tenant,
            scope.principal,
            document,
            str(body.receipt["signature"]),
            body,
        )


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
        tenant: str,
        name: str,
        label: Label,
        action: Action,
        request: Request,
        response: Response,
        body: Annotated[ReasonIn | None, Body()] = None,
    ) -> RolloutOut:
        del response
        async with tenant_scope(request, tenant, "editor") as scope:
            return await service.act(
                scope.session,
                scope.tenant,
                scope.principal,
                kind,
                name,
                label,
                action,
                body.reason if body else None,
            )


for _kind in ARTIFACT_KINDS.values():
    _routes(_kind.name, _kind.plural)
