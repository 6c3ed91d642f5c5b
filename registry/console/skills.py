"""The tenant's skills in the console: the list, a skill (its labels and versions), a version's file
tree with SKILL.md shown as text (and any text file on request), the diff of two versions file by
file, and publishing (moving a label, protected labels by role: the skills domain decides)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from registry.console import change_requests as console_releases
from registry.console import rollouts as console_rollouts
from registry.console import usage as console_usage
from registry.console.pages import (
    ConsoleRoute,
    Form,
    as_number,
    people_of,
    posted,
    render,
    scope_of,
)
from registry.errors import InvalidInput
from registry.labels import Terms
from registry.skills import service as skills
from registry.skills.folder import SKILL_MD, is_text

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
SHOWN_MAX = 512 * 1024  # a text file shown in the page at most (larger ones: download over REST)


class SkillLabelForm(Form):
    label: str = ""
    version: str | None = None
    reason: str = ""  # an admin's break-glass move of a label that needs approvals


@router.get("/{tenant}/skills", response_class=HTMLResponse)
async def skills_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "reader") as scope:
        found = await skills.list_skills(scope.session, scope.tenant)
    return render(request, "skills.html", scope=scope, skills=found)


@router.get("/{tenant}/skills/{name}", response_class=HTMLResponse)
async def skill_page(tenant: str, name: str, request: Request) -> Response:
    async with scope_of(request, "reader") as scope:
        skill = await skills.get_skill(scope.session, scope.tenant, name)
        versions = await skills.list_versions(scope.session, scope.tenant, name)
        people = await people_of(scope)
        labels = await skills.label_moves(scope.session, scope.tenant, name)
        moves = [(m.label, m.version, m.updated_at) for m in labels]
        tokens = await request.app.state.db.tokens()
        shown = console_usage.Shown("skill", name, skill.labels, moves)
        ledger = await console_usage.panel(scope, tokens, shown, console_usage.days_of(request))
        live = await console_rollouts.shown(scope, "skill", name, sorted(skill.labels))
    message = request.query_params.get("message")
    return render(
        request,
        "skill.html",
        scope=scope,
        skill=skill,
        versions=versions,
        people=people,
        message=message,
        usage=ledger,
        rollouts=live,
        kind="skill",
        plural="skills",
        artifact=name,
    )


@router.get("/{tenant}/skills/{name}/versions/{version}", response_class=HTMLResponse)
async def skill_version_page(tenant: str, name: str, version: int, request: Request) -> Response:
    path = request.query_params.get("file") or SKILL_MD
    async with scope_of(request, "reader") as scope:
        shown = await skills.get_version(scope.session, scope.tenant, name, version)
        mime, data = await skills.file_of_version(scope.session, scope.tenant, name, version, path)
    text = data.decode("utf-8") if is_text(mime, data) and len(data) <= SHOWN_MAX else None
    tree = sorted(f.path for f in shown.files)
    return render(
        request,
        "skill_version.html",
        scope=scope,
        name=name,
        version=shown,
        tree=tree,
        path=path,
        text=text,
        size=len(data),
        mime=mime,
    )


@router.get("/{tenant}/skills/{name}/diff", response_class=HTMLResponse)
async def skill_diff_page(tenant: str, name: str, request: Request) -> Response:
    q = request.query_params
    before, after = as_number(q.get("a")), as_number(q.get("b"))
    async with scope_of(request, "reader") as scope:
        skill = await skills.get_skill(scope.session, scope.tenant, name)
        b = after or skill.latest_version
        a = before or max(1, b - 1)
        changes = await skills.diff(scope.session, scope.tenant, name, a, b)
    return render(request, "skill_diff.html", scope=scope, skill=skill, changes=changes, a=a, b=b)


@router.post("/{tenant}/skills/{name}/label")
async def skill_label(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await posted(request, "editor", SkillLabelForm)
    label, version = fields.label.strip(), as_number(fields.version)
    if version is None:
        raise InvalidInput("choose the version the label moves to", field="version")
    async with scope as console:
        gated = await console_releases.proposal(
            request, console, "skill", name, label, version, fields.reason
        )
        if gated is not None:  # the label moves through a change request: propose one here
            return gated
        await skills.set_label(
            console.session,
            console.tenant,
            console.principal,
            name,
            label,
            version,
            Terms(reason=fields.reason.strip() or None),
        )
    note = f"{label} now serves version {version}"
    return RedirectResponse(
        f"/ui/{quote(tenant)}/skills/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )
