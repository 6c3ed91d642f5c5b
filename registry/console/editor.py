"""Writing in the console: new prompts and versions in the editor (checked by the server as the
person types), uploads, and publishing (label moves reviewed first, restore, archive)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from registry.console import change_requests as console_releases
from registry.console import documents
from registry.console.pages import (
    ConsoleRoute,
    Form,
    as_number,
    people_of,
    posted,
    render,
    scope_of,
    settings_of,
    where_of,
)
from registry.console.sessions import (
    ConsoleScope,
)
from registry.errors import (
    BadCsrf,
    Conflict,
    InvalidInput,
    NotSignedIn,
    PreconditionFailed,
    RegistryError,
)
from registry.labels import Terms
from registry.prompts import blobs, diff, lifecycle, policy, reading, writing
from registry.prompts.schemas import PromptCreate
from registry.usage import service as usage_service

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


# --- editing, with the server's validation as the person types ---------------------------------


@router.get("/{tenant}/new", response_class=HTMLResponse)
async def new_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "editor") as scope:
        pass
    return render(
        request,
        "edit.html",
        scope=scope,
        name=None,
        base=0,
        text=documents.TEMPLATE,
        message="",
        error=None,
        conflict=None,
    )


@router.get("/{tenant}/prompts/{name}/edit", response_class=HTMLResponse)
async def edit_page(tenant: str, name: str, request: Request) -> Response:
    async with scope_of(request, "editor") as scope:
        prompt = await reading.get_prompt(scope.session, scope.tenant, name)
    assert prompt.latest is not None
    text = documents.dump(prompt.latest, prompt.tests)
    return render(
        request,
        "edit.html",
        scope=scope,
        name=name,
        base=prompt.latest.version,
        text=text,
        message="",
        error=None,
        conflict=None,
    )


def _edited(text: str, message: str) -> documents.Edited:
    return documents.parse(text, commit_message=message or None)


class DocumentForm(Form):
    """The editor: the prompt's name, its YAML document, a commit message, the version it edits."""

    name: str = ""
    text: str = ""
    message: str = ""
    base: str | None = None


class LabelForm(Form):
    label: str = ""
    version: str | None = None
    confirm: str = ""  # "yes": the move was reviewed
    force: str = ""  # "yes": move it although it breaks the contract
    reason: str = ""  # an admin's break-glass move of a label that needs approvals


class VersionForm(Form):
    version: str | None = None


class ArchiveForm(Form):
    archived: str = ""  # "yes": archive


class _DryRun(Exception):
    """Ends a check's transaction without committing it."""


@router.post("/{tenant}/check")
async def check(tenant: str, request: Request) -> Response:
    """The editor's live validation: every problem of the document itself (its YAML, its fields,
    each message's template) at the editor's lines; then the whole write path, dry, in a
    transaction that is rolled back, for what only the registry can tell (partials, blobs)."""
    fields, scope = await posted(request, "editor", DocumentForm)
    name = fields.name or "new-prompt"
    text = fields.text
    found = documents.problems(text)
    if found:
        async with scope:
            pass  # the caller checked (role, CSRF) before anything is told
        return JSONResponse({"ok": False, "errors": [p.shown() for p in found]})
    try:
        body = _edited(text, fields.message)
        async with scope as console:
            await _write(console, name, body, base=None, request=request, dry_run=True)
            raise _DryRun  # nothing of the check is kept
    except _DryRun:
        pass
    except RegistryError as error:
        if isinstance(error, (BadCsrf, NotSignedIn)):
            raise
        where = where_of(error)
        placed = documents.as_written(
            text, str(where.get("field", "")), where.get("line"), where.get("column")
        )
        if placed is not None:  # a template's place, moved to the editor's
            said = error.message.rsplit(" at line ", 1)[0].split(": ", 1)[-1]
            where = {**placed.shown(), "message": f"{placed.field}: {said}"}
        else:
            where = {**where, "message": error.message}
        return JSONResponse({"ok": False, "errors": [where]})
    return JSONResponse({"ok": True})


async def _write(
    console: ConsoleScope,
    name: str,
    edited: documents.Edited,
    *,
    base: int | None,
    request: Request,
    dry_run: bool = False,
) -> Any:
    """The version written, with the document's test cases saved first (so the answer's test
    results are of the cases as edited)."""
    body = edited.version
    exists = await _exists(console, name)
    limit = settings_of(request).max_blob_bytes
    if not exists:
        create = PromptCreate.model_validate(
            {**body.model_dump(exclude_none=True), "name": name, "tests": edited.tests or []}
        )
        return await writing.create_prompt(
            console.session,
            console.tenant,
            console.principal,
            create,
            max_blob_bytes=limit,
            dry_run=dry_run,
        )
    if edited.tests is not None:
        await lifecycle.patch_prompt(
            console.session, console.tenant, console.principal, name, tests=edited.tests
        )
    return await writing.create_version(
        console.session,
        console.tenant,
        console.principal,
        name,
        body,
        if_match=base,
        max_blob_bytes=limit,
        dry_run=dry_run,
    )


async def _exists(console: ConsoleScope, name: str) -> bool:
    try:
        await reading.find_prompt(console.session, console.tenant, name)
    except RegistryError:
        return False
    return True


@router.post("/{tenant}/save")
async def save(tenant: str, request: Request) -> Response:
    fields, scope = await posted(request, "editor", DocumentForm)
    name = fields.name.strip()
    text, message = fields.text, fields.message
    base = as_number(fields.base) or 0
    try:
        body = _edited(text, message)
        async with scope as console:
            result = await _write(console, name, body, base=base or None, request=request)
    except (Conflict, PreconditionFailed) as conflict:
        async with scope_of(request, "editor") as console:
            latest = await reading.get_prompt(console.session, console.tenant, name)
            changes = None
            if base and latest.latest is not None:
                changes = await diff.diff_versions(
                    console.session, console.tenant, name, base, latest.latest.version
                )
        # Someone wrote meanwhile: the section says what they changed and what to do (the REST
        # words, "reload it and write again", would contradict it); a label's refusal is told.
        told = None if isinstance(conflict, PreconditionFailed) and changes else conflict.message
        return render(
            request,
            "edit.html",
            409,
            scope=console,
            name=name,
            base=base,
            text=text,
            message=message,
            error=told,
            conflict=changes,
        )
    except RegistryError as error:
        if isinstance(error, (BadCsrf, NotSignedIn)):
            raise
        async with scope_of(request, "editor") as console:
            pass
        return render(
            request,
            "edit.html",
            error.http_status,
            scope=console,
            name=name or None,
            base=base,
            text=text,
            message=message,
            error=error.message,
            conflict=None,
        )
    note = f"version {result.version} written" if result.created else result.detail
    if result.tests is not None:
        note += f"; tests: {result.tests.passed} passed, {result.tests.failed} failed"
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


@router.post("/{tenant}/blobs")
async def upload(tenant: str, request: Request) -> Response:
    """An image or audio file for the editor: stored as a blob, answered with its reference."""
    form = await request.form()
    token = form.get("csrf") or request.headers.get("x-csrf-token")
    upload = form.get("file")
    if not isinstance(token, str) or not token:
        raise BadCsrf("the upload carries no CSRF token: reload the page")
    if upload is None or isinstance(upload, str):
        raise InvalidInput("choose a file to upload", field="file")
    data = await upload.read()
    kind = upload.content_type or "application/octet-stream"
    async with scope_of(request, "editor", csrf=token) as console:
        sha, _ = await blobs.upload_blob(
            console.session, console.tenant, console.principal, data, kind
        )
    return JSONResponse(
        {"sha256": sha, "mimeType": kind, "snippet": documents.blob_snippet(sha, kind)}
    )


@router.get("/{tenant}/blobs/{sha256}")
async def blob(tenant: str, sha256: str, request: Request) -> Response:
    async with scope_of(request, "reader") as console:
        data, kind = await blobs.get_blob(console.session, console.tenant, sha256)
    if not kind.startswith(("image/", "audio/")):
        return Response(
            data,
            media_type="application/octet-stream",
            headers={"Content-Disposition": "attachment"},
        )
    return Response(
        data, media_type=kind, headers={"Content-Security-Policy": "default-src 'none'"}
    )


# --- publishing: labels, restore, archive ------------------------------------------------------


@router.post("/{tenant}/prompts/{name}/label", response_class=HTMLResponse)
async def move_label(tenant: str, name: str, request: Request) -> Response:
    """A first POST shows what the move changes (the diff against what the label serves now and
    the contract's breaks); the confirmed one moves it."""
    fields, scope = await posted(request, "editor", LabelForm)
    label = fields.label.strip()
    version = as_number(fields.version) or 0
    async with scope as console:
        gated = await console_releases.proposal(
            request, console, "prompt", name, label, version, fields.reason
        )
        if gated is not None:  # the label moves through a change request: propose one here
            return gated
        if fields.confirm != "yes":
            return await _review_move(request, console, name, label, version)
        try:
            await writing.set_label(
                console.session,
                console.tenant,
                console.principal,
                name,
                label,
                version,
                force=fields.force == "yes",
                terms=Terms(reason=fields.reason.strip() or None),
            )
        except Conflict as refused:
            if refused.detail.get("overridable_by") != "force":
                raise
            # Back on the review, in the console's words: the box to tick is on this page.
            why = f"{refused.message}. Tick “Move it anyway” to move it."
            return await _review_move(request, console, name, label, version, error=why)
    note = f"{label} now serves version {version}"
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


async def _review_move(
    request: Request,
    console: ConsoleScope,
    name: str,
    label: str,
    version: int,
    error: str | None = None,
) -> Response:
    """What moving ``label`` to ``version`` changes: the diff against what it serves now and the
    contract's breaks, with the form that confirms it (and why it was not done, when it was not)."""
    writing.check_label_name(label)
    prompt = await reading.get_prompt(console.session, console.tenant, name)
    refused = policy.role_refusal(console.tenant, console.principal, label)
    if refused is not None:  # said before the review: the move could never be confirmed
        raise refused
    current = prompt.labels.get(label)
    changes = None
    if current and current != version:
        changes = await diff.diff_versions(console.session, console.tenant, name, current, version)
    reach = await usage_service.reach(console.session, console.tenant, "prompt", name, label)
    people = await people_of(console)
    return render(
        request,
        "confirm.html",
        409 if error else 200,
        scope=console,
        name=name,
        label=label,
        version=version,
        current=current,
        changes=changes,
        error=error,
        reach=reach,
        people=people,
    )


@router.post("/{tenant}/prompts/{name}/restore")
async def restore(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await posted(request, "editor", VersionForm)
    version = as_number(fields.version) or 0
    async with scope as console:
        result = await writing.restore_version(
            console.session,
            console.tenant,
            console.principal,
            name,
            version,
            if_match=None,
            max_blob_bytes=settings_of(request).max_blob_bytes,
        )
    note = (
        f"version {version} restored as version {result.version}"
        if result.created
        else result.detail
    )
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


@router.post("/{tenant}/prompts/{name}/archive")
async def archive(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await posted(request, "editor", ArchiveForm)
    hide = fields.archived == "yes"
    async with scope as console:
        await lifecycle.set_archived(console.session, console.tenant, console.principal, name, hide)
    note = "archived: MCP clients no longer see it" if hide else "restored from the archive"
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )
