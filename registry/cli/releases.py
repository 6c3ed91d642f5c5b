"""Review and release through a running registry: ``registry test`` (a prompt's test cases, exiting
non-zero on a failure, for CI) and ``registry release open|list|show|approve|apply``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from registry import sync
from registry.cli.base import CommandError, main, table
from registry.cli.files import credential, key_option, url_option

_tenant_option = click.option("--tenant", "slug", required=True, help="Tenant slug.")


@contextlib.contextmanager
def _client(url: str, slug: str, key: str | None) -> Iterator[sync.Client]:
    with contextlib.closing(sync.Client(url, credential(url, slug, key), slug)) as client:
        yield client


@main.command("test")
@click.argument("names", nargs=-1)
@_tenant_option
@url_option
@key_option
@click.option("--label", default=None, help="Test what this label serves (default: the latest).")
@click.option("--version", type=click.IntRange(1), default=None, help="Test this version.")
def test_command(
    names: tuple[str, ...],
    slug: str,
    url: str,
    key: str | None,
    label: str | None,
    version: int | None,
) -> None:
    """Run the test cases of prompts NAMES (none: every prompt) on what LABEL serves; exits 1
    when a case fails. Nothing calls a model: a case checks the rendering."""
    if label is not None and version is not None:
        raise CommandError("give --label or --version, not both")
    failed = cases = 0
    with _client(url, slug, key) as client:
        chosen = list(names) or sync.list_names(client)
        for name in chosen:
            body = {"label": label} if label else {"version": version} if version else {}
            run = client.request("POST", f"/prompts/{name}/test", json=body).json()
            for case in run["cases"]:
                cases += 1
                if case["passed"]:
                    click.echo(f"ok    {name} v{run['version']} {case['name']}")
                    continue
                failed += 1
                click.echo(f"FAIL  {name} v{run['version']} {case['name']}")
                for failure in case["failures"]:
                    click.echo(f"      {failure}")
    click.echo(f"{cases} case(s), {failed} failed", err=True)
    if failed:
        raise SystemExit(1)


@main.group()
def release() -> None:
    """Change requests: label moves reviewed, then applied together as one release."""


def _move(text: str) -> dict[str, Any]:
    """``NAME@LABEL=VERSION`` (a prompt) or ``skill:NAME@LABEL=VERSION``."""
    kind, _, rest = text.rpartition(":") if text.startswith("skill:") else ("", "", text)
    name, _, rest = rest.partition("@")
    label, _, version = rest.partition("=")
    if not (name and label and version.isdigit()):
        raise click.BadParameter(f"{text!r}: write NAME@LABEL=VERSION (skill:NAME@... for a skill)")
    return {"skill" if kind else "prompt": name, "label": label, "version": int(version)}


@release.command("open")
@click.argument("moves", nargs=-1, required=True)
@_tenant_option
@url_option
@key_option
@click.option("--description", "-m", required=True, help="What the release does, for reviewers.")
@click.option("--at", "apply_at", default=None, help="Apply at this time (ISO 8601, with zone).")
def release_open(
    moves: tuple[str, ...],
    slug: str,
    url: str,
    key: str | None,
    description: str,
    apply_at: str | None,
) -> None:
    """Open a change request of MOVES, each NAME@LABEL=VERSION (skill:NAME@LABEL=VERSION for a
    skill); prints its number."""
    body: dict[str, Any] = {"description": description, "moves": [_move(m) for m in moves]}
    if apply_at:
        body["apply_at"] = apply_at
    with _client(url, slug, key) as client:
        opened = client.request("POST", "/change-requests", json=body).json()
    click.echo(opened["id"])
    click.echo(
        f"opened change request {opened['id']}: {opened['approvals_needed']} approval(s) needed",
        err=True,
    )


def _name(answer: dict[str, Any], actor: str) -> str:
    """An actor as the server shows it (a key by its owner and name), else as recorded."""
    return str((answer.get("names") or {}).get(actor, actor))


@release.command("list")
@_tenant_option
@url_option
@key_option
@click.option("--state", "states", multiple=True, help="Only these states (repeatable).")
def release_list(slug: str, url: str, key: str | None, states: tuple[str, ...]) -> None:
    """Change requests, newest first."""
    with _client(url, slug, key) as client:
        found = client.request("GET", "/change-requests", params={"state": list(states)}).json()
    table(
        ("ID", "STATE", "MOVES", "AUTHOR", "DESCRIPTION"),
        [
            (
                str(r["id"]),
                r["state"],
                str(r["moves"]),
                _name(r, r["author"]),
                r["description"][:60],
            )
            for r in found
        ],
    )


@release.command("show")
@click.argument("request_id", type=click.IntRange(1))
@_tenant_option
@url_option
@key_option
def release_show(request_id: int, slug: str, url: str, key: str | None) -> None:
    """A change request: its moves against what each label serves, contract breaks, tests,
    approvals and reviews."""
    with _client(url, slug, key) as client:
        shown = client.request("GET", f"/change-requests/{request_id}").json()
    click.echo(f"change request {shown['id']}: {shown['state']} (revision {shown['revision']})")
    click.echo(f"  by {_name(shown, shown['author'])}: {shown['description']}")
    if shown.get("stale_reason"):
        click.echo(f"  stale: {shown['stale_reason']}")
    for move in shown["moves"]:
        name = f"prompt {move['prompt']}" if move.get("prompt") else f"skill {move['skill']}"
        current = move.get("current")
        click.echo(f"  {name} @{move['label']}: {current or '-'} -> {move['version']}")
        for change in move.get("breaking") or []:
            click.echo(f"    breaks: {change['detail']}")
        tests = move.get("tests")
        if tests:
            click.echo(f"    tests: {tests['passed']} passed, {tests['failed']} failed")
    approvers = ", ".join(_name(shown, actor) for actor in shown["approved_by"]) or "none"
    click.echo(
        f"  approvals: {len(shown['approved_by'])} of {shown['approvals_needed']} ({approvers})"
    )
    for review in shown["reviews"]:
        said = f": {review['body']}" if review.get("body") else ""
        who = _name(shown, review["actor"])
        click.echo(f"  {review['created_at'][:19]} {who} {review['kind']}{said}")


@release.command("approve")
@click.argument("request_id", type=click.IntRange(1))
@_tenant_option
@url_option
@key_option
@click.option("--comment", default=None)
@click.option("--override", default=None, help="An admin's reason to approve despite failures.")
def release_approve(
    request_id: int,
    slug: str,
    url: str,
    key: str | None,
    comment: str | None,
    override: str | None,
) -> None:
    """Approve a change request (the last approval needed applies it, unless it has a time)."""
    body = {k: v for k, v in {"comment": comment, "override": override}.items() if v}
    with _client(url, slug, key) as client:
        done = client.request("POST", f"/change-requests/{request_id}/approve", json=body).json()
    click.echo(
        f"change request {request_id}: {done['state']} ({len(done['approved_by'])} of "
        f"{done['approvals_needed']} approval(s))",
        err=True,
    )


@release.command("apply")
@click.argument("request_id", type=click.IntRange(1))
@_tenant_option
@url_option
@key_option
def release_apply(request_id: int, slug: str, url: str, key: str | None) -> None:
    """Apply an approved change request now."""
    with _client(url, slug, key) as client:
        done = client.request("POST", f"/change-requests/{request_id}/apply").json()
    click.echo(f"change request {request_id}: {done['state']}", err=True)
