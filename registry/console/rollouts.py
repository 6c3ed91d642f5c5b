"""Rollouts in the console: on a prompt's or skill's page, each label's live (or last) rollout with
its step, share and each side's answers, and the forms that start one, pause, resume, promote or
roll it back. The same service calls as REST (registry.rollouts)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import ValidationError

from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.change_requests import service as releases
from registry.change_requests.schemas import ChangeRequestIn, MoveIn
from registry.console.pages import ConsoleRoute, Form, as_number, posted
from registry.console.sessions import ConsoleScope
from registry.errors import InvalidInput, NotFound
from registry.labels import approvals_needed
from registry.rollouts import service
from registry.rollouts.schemas import RolloutIn, RolloutOut

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
ACTIONS = ("pause", "resume", "promote", "rollback")


class StartForm(Form):
    label: str = ""
    version: str | None = None
    steps: str = "1,10,50,100"
    min_seconds: str = "300"
    min_answers: str = "0"
    reason: str = ""


class ActionForm(Form):
    label: str = ""
    reason: str = ""


async def shown(scope: ConsoleScope, kind: str, name: str, labels: list[str]) -> list[RolloutOut]:
    """Each label's last rollout, where it had one (what the page shows)."""
    found = []
    for label in labels:
        try:
            found.append(await service.show(scope.session, scope.tenant, kind, name, label))
        except NotFound:
            continue
    return found


def _back(tenant: str, kind: str, name: str, note: str) -> Response:
    plural = ARTIFACT_KINDS[kind].plural
    return RedirectResponse(
        f"/ui/{tenant}/{plural}/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


def _body(fields: StartForm) -> RolloutIn:
    parts = [s.strip() for s in fields.steps.split(",") if s.strip()]
    if not all(p.isascii() and p.isdigit() and len(p) <= 3 for p in parts):
        raise InvalidInput("steps: percents separated by commas, e.g. 1,10,50,100", field="steps")
    try:
        return RolloutIn(
            version=as_number(fields.version) or 0,
            steps=[int(p) for p in parts],
            min_seconds=as_number(fields.min_seconds) or 0,
            min_answers=as_number(fields.min_answers) or 0,
            reason=fields.reason.strip() or None,
        )
    except (ValueError, ValidationError) as error:
        raise InvalidInput(f"rollout: {error}", field="steps") from None


async def _propose(console: ConsoleScope, kind: str, name: str, label: str, body: RolloutIn) -> int:
    """A change request whose one move starts the rollout (the label needs approvals): its id."""
    steps = ", ".join(str(s) for s in body.steps)
    move = MoveIn.model_validate(
        {
            ARTIFACT_KINDS[kind].move_key: name,
            "label": label,
            "version": body.version,
            "rollout": body.plan,
        }
    )
    wanted = ChangeRequestIn(
        description=f"Roll out {label} of {name} to version {body.version} in steps of {steps} %",
        moves=[move],
    )
    opened = await releases.open_request(console.session, console.tenant, console.principal, wanted)
    return opened.id


def _pages(kind: str, plural: str) -> None:
    @router.post(f"/{{tenant}}/{plural}/{{name}}/rollout")
    async def start(tenant: str, name: str, request: Request) -> Response:
        fields, scope = await posted(request, "editor", StartForm)
        body, label = _body(fields), fields.label.strip()
        async with scope as console:
            if approvals_needed(console.tenant, label) and body.reason is None:
                opened = await _propose(console, kind, name, label, body)
                return RedirectResponse(
                    f"/ui/{quote(tenant)}/change-requests/{opened}?"
                    + urlencode({"message": "opened: the rollout starts once approved"}),
                    status_code=303,
                )
            started = await service.start(
                console.session, console.tenant, console.principal, kind, name, label, body
            )
        return _back(
            tenant,
            kind,
            name,
            f"rollout {started.id} started: {started.share} % of "
            f"callers get v{started.new.version}",
        )

    @router.post(f"/{{tenant}}/{plural}/{{name}}/rollout/{{action}}")
    async def act(tenant: str, name: str, action: str, request: Request) -> Response:
        if action not in ACTIONS:
            raise NotFound(f"no such rollout action {action!r}", field="action")
        fields, scope = await posted(request, "editor", ActionForm)
        async with scope as console:
            done = await service.act(
                console.session,
                console.tenant,
                console.principal,
                kind,
                name,
                fields.label.strip(),
                action,
                fields.reason.strip() or None,
            )
        return _back(tenant, kind, name, f"rollout {done.id}: {done.state}")


for _kind in ARTIFACT_KINDS.values():
    _pages(_kind.name, _kind.plural)
