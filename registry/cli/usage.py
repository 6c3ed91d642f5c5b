"""``registry usage``: the serve ledger of a running registry, as a table or CSV. Answers grouped as
asked (``--by``), the prompts and skills nobody loaded (``--idle``), and who a label of one prompt
or skill reaches (``--reach``)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from typing import Any

import click

from registry.cli.base import CommandError, main, table
from registry.cli.files import key_option, url_option
from registry.cli.releases import _client, _name, _tenant_option

FILTERS = ("kind", "name", "version", "label", "surface", "caller", "client")
DIMENSIONS = ("version", "label", "surface", "caller", "client", "at")


def _reach_target(text: str) -> dict[str, str]:
    """``NAME@LABEL`` (a prompt) or ``skill:NAME@LABEL``."""
    kind = "skill" if text.startswith("skill:") else "prompt"
    name, _, label = text.removeprefix("skill:").partition("@")
    if not (name and label):
        raise click.BadParameter(f"{text!r}: write NAME@LABEL (skill:NAME@LABEL for a skill)")
    return {"kind": kind, "name": name, "label": label}


@main.command("usage")
@_tenant_option
@url_option
@key_option
@click.option("--kind", type=click.Choice(["prompt", "skill"]), default=None)
@click.option("--name", default=None, help="Only this prompt or skill.")
@click.option("--version", type=click.IntRange(1), default=None, help="Only this version.")
@click.option("--label", default=None, help="Only answers asked by this label.")
@click.option("--surface", default=None, help="Only this surface (prompts/get, rest/render, ...).")
@click.option("--caller", default=None, help="Only this caller (key:ID, token:SUBJECT, anonymous).")
@click.option("--client", "client_name", default=None, help="Only this client (NAME/VERSION).")
@click.option("--from", "since", default=None, help="From this time (ISO 8601 with zone).")
@click.option("--to", "until", default=None, help="Until this time (ISO 8601 with zone).")
@click.option(
    "--by", default="", help="Group by: version,label,surface,caller,client and day|hour|minute."
)
@click.option("--sort", type=click.Choice(["key", "answers"]), default="key")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, help="Rows at most.")
@click.option("--idle", is_flag=True, help="The prompts and skills nobody loaded in --days.")
@click.option("--reach", default=None, help="Who NAME@LABEL (skill:NAME@LABEL) reached in --days.")
@click.option("--days", type=click.IntRange(1, 3650), default=None, help="For --idle and --reach.")
@click.option("--csv", "as_csv", is_flag=True, help="CSV on standard output instead of a table.")
def usage_command(slug: str, url: str, key: str | None, **asked: Any) -> None:
    """Who got which version of the tenant's prompts and skills: answers served, grouped as asked."""
    idle, reach, days, as_csv = (
        asked.pop("idle"),
        asked.pop("reach"),
        asked.pop("days"),
        asked.pop("as_csv"),
    )
    limit = asked.pop("limit")
    if idle and reach:
        raise CommandError("give --idle or --reach, not both")
    with _client(url, slug, key) as client:
        if idle:
            params = {"days": days or 30, **({"kind": asked["kind"]} if asked["kind"] else {})}
            rows = _pages(client, "/usage/idle", params, "idle", limit)
            _show(
                ("KIND", "NAME", "LAST"),
                [(r["kind"], r["name"], r["last"] or "never") for r in rows],
                as_csv,
            )
            return
        if reach:
            params = {**_reach_target(reach), **({"days": days} if days else {})}
            found = client.request("GET", "/usage/reach", params=params).json()
            _show_reach(found, as_csv)
            return
        params = {k: v for k, v in _query(asked).items() if v is not None}
        answer: dict[str, Any] = {}
        rows = _pages(client, "/usage", params, "rows", limit, into=answer)
    shown = [d for d in DIMENSIONS if any(r.get(d) is not None for r in rows)]
    header = ("KIND", "NAME", *(d.upper() for d in shown), "ANSWERS", "FIRST", "LAST")
    _show(
        header,
        [
            (
                r["kind"],
                r["name"],
                *(_name(answer, r[d]) if d == "caller" else str(r[d]) for d in shown),
                str(r["answers"]),
                r["first"],
                r["last"],
            )
            for r in rows
        ],
        as_csv,
    )


def _query(asked: dict[str, Any]) -> dict[str, Any]:
    return {
        **{f: asked.get(f) for f in FILTERS if f != "client"},
        "client": asked.get("client_name"),
        "from": asked.get("since"),
        "to": asked.get("until"),
        "by": asked.get("by") or None,
        "sort": asked.get("sort"),
    }


def _pages(
    client: Any,
    path: str,
    params: dict[str, Any],
    field: str,
    limit: int,
    into: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every row of ``path`` (pages followed) up to ``limit``; the callers' names into ``into``."""
    rows: list[dict[str, Any]] = []
    cursor = None
    while len(rows) < limit:
        page = {
            **params,
            "limit": min(500, limit - len(rows)),
            **({"cursor": cursor} if cursor else {}),
        }
        answer = client.request("GET", path, params=page).json()
        rows += answer[field]
        if into is not None:
            into.setdefault("names", {}).update(answer.get("names") or {})
        cursor = answer.get("next_cursor")
        if not cursor:
            break
    return rows


def _show(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], as_csv: bool) -> None:
    if as_csv:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([h.lower() for h in header])
        writer.writerows(rows)
        return
    if not rows:
        click.echo("nothing was served that matches", err=True)
        return
    table(header, list(rows))


def _show_reach(found: dict[str, Any], as_csv: bool) -> None:
    rows: list[tuple[str, ...]] = [
        ("caller", _name(found, c), str(n)) for c, n in found["top_callers"]
    ]
    rows += [("client", str(c), str(n)) for c, n in found["top_clients"]]
    _show(("WHO", "NAME", "ANSWERS"), rows, as_csv)
    click.echo(
        f"{found['label']} of {found['kind']} {found['name']}: {found['answers']} answers to "
        f"{found['callers']} caller(s) and {found['clients']} client(s) in the last "
        f"{found['days']} days",
        err=True,
    )
