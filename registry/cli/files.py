"""Prompt files: push, pull and refresh against a running registry, and `registry login`."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from registry import login, pulling, skill_sync, sync
from registry.cli.base import DEFAULT_URL, CommandError, main, report

# --- push / pull ------------------------------------------------------------------------------

url_option = click.option(
    "--url",
    envvar="REGISTRY_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The registry's base URL [REGISTRY_URL].",
)
key_option = click.option(
    "--key",
    envvar="REGISTRY_API_KEY",
    default=None,
    help="An API key of the tenant [REGISTRY_API_KEY]; without one, the token of 'registry login'.",
)


def credential(url: str, slug: str, key: str | None) -> str:
    """The API key given, else the tenant's login token (refreshed when due)."""
    if key:
        return key
    token = login.access_token(url, slug)
    if token is None:
        raise CommandError(
            f"no credential for tenant {slug!r}: give --key (REGISTRY_API_KEY) "
            f"or run 'registry login --tenant {slug}'"
        )
    return token


@main.command()
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@key_option
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Move protected labels even onto versions whose arguments break their callers.",
)
@click.option(
    "--release",
    "release_description",
    default=None,
    metavar="DESCRIPTION",
    help="Write the versions, but open one change request (described so) for the labels that "
    "need approvals instead of moving them.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 listing each file the registry does not hold as it is (for CI).",
)
@click.option(
    "--label",
    "check_label",
    default=None,
    help="With --check: also each file's version must be what this label serves.",
)
def push(
    folder: Path,
    slug: str,
    url: str,
    key: str | None,
    dry_run: bool,
    force: bool,
    release_description: str | None,
    check: bool,
    check_label: str | None,
) -> None:
    """Push every prompt file in FOLDER (NAME.yaml, NAME.md) and every skill folder
    (FOLDER/skills/NAME/) to the tenant.

    Unchanged files write nothing; a bad file is reported and the others still go. With --check,
    nothing is written and the exit status says whether the registry holds the folder."""
    if release_description is not None and (dry_run or check):
        raise CommandError(
            "--release goes with neither --dry-run nor --check: they write nothing, so open nothing"
        )
    if check_label is not None and not check:
        raise CommandError("--label goes with --check (a push moves the labels its files name)")
    dry_run = dry_run or check
    files = sync.prompt_files(folder)
    skills = skill_sync.skill_folders(folder)
    if not files and not skills:
        raise CommandError(
            f"no prompt files (*.yaml, *.yml, *.md) and no skill folders (skills/NAME/) in {folder}"
        )
    with (
        contextlib.closing(_connected(url, slug, key)) as client,
        click.progressbar(length=len(files) + len(skills), label="pushing", file=sys.stderr) as bar,
    ):
        outcomes = []
        if dry_run:  # one plan: the skills see what the prompts before them would write
            planned, unread = skill_sync.plan_bodies(skills)
            outcomes += (
                sync.push(
                    client,
                    folder,
                    dry_run=True,
                    force=force,
                    progress=lambda _: bar.update(1),
                    skills=planned,
                )
                + unread
            )
            bar.update(len(skills))
        else:
            release = None
            if release_description is not None:
                settings = client.request("GET", "").json()
                release = sync.Release(frozenset(settings.get("approvals") or {}))
            outcomes += sync.push(
                client,
                folder,
                dry_run=False,
                force=force,
                progress=lambda _: bar.update(1),
                release=release,
            )  # fmt: skip  (prompts first: a skill's SKILL.md may include them)
            for path in skills:
                outcomes.append(skill_sync.push_skill(client, path, release))
                bar.update(1)
            if release is not None and release_description is not None:
                opened = release.open(client, release_description)
                if release.already:
                    ids = ", ".join(str(number) for number in release.already)
                    click.echo(
                        f"change request(s) {ids} propose some of these moves already: "
                        "not proposed again",
                        err=True,
                    )
                if opened is None:
                    click.echo("no label needing approvals moves: no change request", err=True)
                else:
                    click.echo(
                        f"opened change request {opened['id']} ({len(release.moves)} move(s)): "
                        f"registry release show {opened['id']} --tenant {slug}",
                        err=True,
                    )
        if check:
            outcomes = _checked(client, outcomes, check_label)
    if check:
        _drift(outcomes, check_label)
        return
    report(outcomes, dry_run=dry_run)


def _checked(
    client: sync.Client, outcomes: list[sync.Outcome], label: str | None
) -> list[sync.Outcome]:
    """The plan's outcomes, and with ``label`` each file the registry holds at a version that
    label does not serve turned into a difference."""
    if label is None:
        return outcomes
    checked = []
    for outcome in outcomes:
        if outcome.action == "unchanged" and outcome.version is not None:
            plural = "skills" if outcome.kind == "skill" else "prompts"
            shown = client.request("GET", f"/{plural}/{outcome.name}").json()
            served = (shown.get("labels") or {}).get(label)
            if served != outcome.version:
                where = f"version {served}" if served is not None else "nothing"
                outcome = sync.Outcome(
                    outcome.path,
                    "label",
                    f"{label} serves {where} of {outcome.name}; the folder is version "
                    f"{outcome.version}",
                )
        checked.append(outcome)
    return checked


def _drift(outcomes: list[sync.Outcome], label: str | None) -> None:
    """What push --check says: each difference on stdout, a summary, exit 1 when any."""
    differ = [o for o in outcomes if o.action != "unchanged"]
    for outcome in differ:
        click.echo(outcome.line())
    held = f" and {label} serves it" if label else ""
    if differ:
        click.echo(
            f"{len(differ)} of {len(outcomes)} file(s) differ from the registry (push writes "
            "them; nothing was written)",
            err=True,
        )
        sys.exit(1)
    click.echo(f"the registry holds all {len(outcomes)} file(s) as they are{held}", err=True)


@main.command()
@click.argument("names", nargs=-1, required=True)
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@key_option
@click.option("--label", "labels", multiple=True, help="Move this label to the new version.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Move protected labels even onto versions whose arguments break their callers.",
)
def refresh(
    names: tuple[str, ...],
    slug: str,
    url: str,
    key: str | None,
    labels: tuple[str, ...],
    dry_run: bool,
    force: bool,
) -> None:
    """Write new versions of the prompts NAMES whose partials are resolved anew (a prompt whose
    partials still resolve to the locked versions is left as it is)."""
    with contextlib.closing(_connected(url, slug, key)) as client:
        outcomes = [
            sync.refresh_prompt(client, name, list(labels), dry_run=dry_run, force=force)
            for name in names
        ]
    report(outcomes, dry_run=dry_run, unit="prompt(s)")


@main.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@key_option
@click.option("--label", default=None, help="Pull the version under this label (default: latest).")
def pull(folder: Path, slug: str, url: str, key: str | None, label: str | None) -> None:
    """Write the tenant's prompts into FOLDER, one NAME.yaml per prompt (blobs under FOLDER/blobs),
    and its skills, one folder each under FOLDER/skills/."""
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(_connected(url, slug, key)) as client:
        names = sync.list_names(client)
        with click.progressbar(names, label="pulling", file=sys.stderr) as bar:
            outcomes = [pulling.pull_prompt(client, name, folder, label=label) for name in bar]
        for name in skill_sync.skill_names(client):
            outcomes.append(skill_sync.pull_skill(client, name, folder, label=label))
    report(outcomes, dry_run=False)


def _connected(url: str, slug: str, key: str | None) -> sync.Client:
    """A client of the tenant, once it answers: a wrong key or address is said once, not once
    per file."""
    client = sync.Client(url, credential(url, slug, key), slug)
    try:
        client.check()
    except sync.FileError as refused:
        client.close()
        raise CommandError(str(refused)) from None
    return client


@main.command("login")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@click.option(
    "--client-id",
    envvar="REGISTRY_OAUTH_CLIENT_ID",
    default=login.DEFAULT_CLIENT_ID,
    show_default=True,
    help="The CLI's client at the tenant's issuer [REGISTRY_OAUTH_CLIENT_ID].",
)
def login_command(slug: str, url: str, client_id: str) -> None:
    """Sign in at the tenant's identity provider (device flow) and keep the token for push, pull
    and refresh, which use it when no API key is given."""
    from registry.tenants.service import check_slug

    check_slug(slug)
    credential = login.device_login(
        url, slug, client_id=client_id, tell=lambda line: click.echo(line, err=True)
    )
    where = login.save(credential)
    click.echo(f"logged in to {slug} through {credential.issuer}; token kept in {where}", err=True)


@main.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--from",
    "source",
    type=click.Choice(["langfuse"]),
    required=True,
    help="The format of FILE: langfuse (prompt versions as its public API answers them).",
)
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@key_option
@click.option("--dry-run", is_flag=True, help="Print what would be imported; write nothing.")
def import_command(
    file: Path, source: str, slug: str, url: str, key: str | None, dry_run: bool
) -> None:
    """Bring prompts in from FILE, written by another tool: versions, labels, tags, model config and
    variables (as arguments), with a report of what could not be mapped as it was."""
    from registry import importing

    del source  # one format so far
    try:
        plan = importing.read_langfuse(file.read_bytes())
    except sync.FileError as refused:
        raise CommandError(f"{file}: {refused}") from None
    with contextlib.closing(_connected(url, slug, key)) as client:
        outcomes = importing.apply(client, plan, dry_run=dry_run)
    for outcome in outcomes:
        click.echo(outcome.line())
    for line in plan.report:
        click.echo(f"not as it was: {line}", err=True)
    failed = [o for o in outcomes if o.action == "error"]
    done = "would import" if dry_run else "imported"
    created = [o for o in outcomes if o.action in ("create", "would create")]
    click.echo(
        f"{done} {len(created)} of {len(outcomes)} prompt(s); {len(plan.report)} thing(s) not "
        "mapped as they were (above)",
        err=True,
    )
    if failed:
        sys.exit(1)


@main.command("server-json")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@key_option
@click.option("--label", default=None, help="The endpoint of this label (default: the tenant's).")
@click.option(
    "--name",
    default=None,
    help="The server's name in the registry you publish to (NAMESPACE/NAME; default: the card's).",
)
def server_json(slug: str, url: str, key: str | None, label: str | None, name: str | None) -> None:
    """Print the server.json the official MCP Registry takes for the tenant's endpoint, made from
    its Server Card (GET /mcp/TENANT[/LABEL]/server-card)."""
    import httpx

    from registry.naming import LABEL_RE, SERVER_CARD

    if label is not None and not LABEL_RE.fullmatch(label):
        raise CommandError(f"--label {label!r} is not a label name")
    headers = {"Accept": "application/mcp-server-card+json"}
    if key or login.access_token(url, slug):
        headers["Authorization"] = f"Bearer {credential(url, slug, key)}"
    path = f"/mcp/{slug}" + (f"/{label}" if label else "") + f"/{SERVER_CARD}"
    answer = httpx.get(url.rstrip("/") + path, headers=headers, timeout=30)
    if answer.status_code != 200:
        raise CommandError(f"{path}: {answer.status_code} {answer.text[:200]}")
    card = answer.json()
    published = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": name or card["name"],
        "title": card.get("title"),
        "description": card["description"],
        "version": card["version"],
        "websiteUrl": card.get("websiteUrl"),
        "remotes": [
            {k: v for k, v in remote.items() if k in ("type", "url", "headers")}
            for remote in card.get("remotes", [])
        ],
        "_meta": {"io.modelcontextprotocol.registry/publisher-provided": card.get("_meta", {})},
    }
    click.echo(json.dumps({k: v for k, v in published.items() if v is not None}, indent=2))
