"""``registry rollout start|show|pause|resume|promote|rollback``: a label's rollout through a
running registry (a new version to a share of callers, in steps)."""

from __future__ import annotations

from typing import Any

import click

from registry.cli.base import main
from registry.cli.files import key_option, url_option
from registry.cli.releases import _client, _tenant_option


def _path(target: str) -> str:
    """``NAME@LABEL`` (a prompt) or ``skill:NAME@LABEL``, as the REST path of its rollout."""
    plural = "skills" if target.startswith("skill:") else "prompts"
    name, _, label = target.removeprefix("skill:").partition("@")
    if not (name and label):
        raise click.BadParameter(f"{target!r}: write NAME@LABEL (skill:NAME@LABEL for a skill)")
    return f"/{plural}/{name}/labels/{label}/rollout"


def _steps(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: percents separated by commas, e.g. 1,10,50,100"
        ) from None


def _said(shown: dict[str, Any]) -> None:
    click.echo(
        f"rollout {shown['id']} of {shown['kind']} {shown['name']}@{shown['label']}: "
        f"{shown['state']}, step {shown['step']} of {len(shown['steps'])} ({shown['share']} % of "
        f"callers on v{shown['new']['version']}); answers v{shown['old']['version']} "
        f"{shown['old']['answers']}, v{shown['new']['version']} {shown['new']['answers']}; errors "
        f"{shown['old']['errors']}, {shown['new']['errors']}"
        + (f"; {shown['reason']}" if shown.get("reason") else "")
    )


@main.group()
def rollout() -> None:
    """A label's rollout: a new version to a share of callers, in steps, then promoted."""


@rollout.command("start")
@click.argument("target")
@_tenant_option
@url_option
@key_option
@click.option("--version", type=click.IntRange(1), required=True, help="The new version.")
@click.option("--steps", default="1,10,50,100", show_default=True, help="Percents of callers.")
@click.option("--min-answers", type=click.IntRange(0), default=0, help="Per step, on the new side.")
@click.option("--min-seconds", type=click.IntRange(0), default=300, show_default=True)
@click.option("--min-outcomes", type=click.IntRange(0), default=0, help="Reports a side, per step.")
@click.option("--reason", default=None, help="An admin's reason, where the label needs approvals.")
@click.option(
    "--release",
    "description",
    default=None,
    help="Open a change request that starts the rollout once approved (where the label needs "
    "approvals; one approval covers every step), described so.",
)
def rollout_start(
    target: str,
    slug: str,
    url: str,
    key: str | None,
    version: int,
    steps: str,
    min_answers: int,
    min_seconds: int,
    min_outcomes: int,
    reason: str | None,
    description: str | None,
) -> None:
    """Start a rollout of TARGET (NAME@LABEL, or skill:NAME@LABEL) to VERSION."""
    plan: dict[str, Any] = {
        "steps": _steps(steps),
        "min_answers": min_answers,
        "min_seconds": min_seconds,
        "min_outcomes": min_outcomes,
    }
    with _client(url, slug, key) as client:
        if description is not None:
            kind = "skill" if target.startswith("skill:") else "prompt"
            name, _, label = target.removeprefix("skill:").partition("@")
            move = {kind: name, "label": label, "version": version, "rollout": plan}
            body = {"description": description, "moves": [move]}
            opened = client.request("POST", "/change-requests", json=body).json()
            click.echo(
                f"change request {opened['id']} opened: the rollout starts once approved "
                f"({opened['approvals_needed']} approval(s))"
            )
            return
        wanted = {"version": version, **plan} | ({"reason": reason} if reason else {})
        _said(client.request("PUT", _path(target), json=wanted).json())


@rollout.command("show")
@click.argument("target")
@_tenant_option
@url_option
@key_option
def rollout_show(target: str, slug: str, url: str, key: str | None) -> None:
    """The rollout of TARGET: its state, step, share and each side's answers."""
    with _client(url, slug, key) as client:
        _said(client.request("GET", _path(target)).json())


def _action(name: str, helped: str) -> None:
    @rollout.command(name, help=helped)
    @click.argument("target")
    @_tenant_option
    @url_option
    @key_option
    @click.option("--reason", default=None, help="Why (kept with the rollout and in the audit).")
    def act(target: str, slug: str, url: str, key: str | None, reason: str | None) -> None:
        body = {"reason": reason} if reason else None
        with _client(url, slug, key) as client:
            _said(client.request("POST", f"{_path(target)}/{name}", json=body).json())


_action("pause", "Hold TARGET's rollout at its step (its callers keep their sides).")
_action("resume", "Let TARGET's rollout advance again.")
_action("promote", "Move the label to the new version now, ending the rollout.")
_action("rollback", "End TARGET's rollout: every caller gets what the label serves.")
