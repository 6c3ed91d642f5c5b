"""``registry library offer|withdraw|subscribe|pin|follow|list|end``: shared libraries through a
running registry (the library's admin offers a label; the subscriber's admin accepts it, following
the label or pinning versions)."""

from __future__ import annotations

from typing import Any

import click

from registry.cli.base import main, table
from registry.cli.files import key_option, url_option
from registry.cli.releases import _client, _tenant_option


def _pins(pinned: tuple[str, ...]) -> dict[str, int]:
    pins = {}
    for one in pinned:
        name, _, version = one.partition("@")
        if not (name and version.isdigit()):
            raise click.BadParameter(f"{one!r}: write NAME@VERSION", param_hint="PINS")
        pins[name] = int(version)
    return pins


def _said(shown: dict[str, Any]) -> None:
    how = (
        "follows"
        if shown["follow"]
        else "pins "
        + ", ".join(f"{name}@{version}" for name, version in sorted(shown["pins"].items()))
    )
    click.echo(f"{shown['library']}@{shown['label']}: {shown['state']}, {how}")


@main.group()
def library() -> None:
    """Shared libraries: a tenant offers a label's prompts and skills; others follow or pin."""


@library.command("offer")
@click.argument("subscriber")
@_tenant_option
@url_option
@key_option
@click.option("--label", default="production", show_default=True, help="The label offered.")
def library_offer(subscriber: str, slug: str, url: str, key: str | None, label: str) -> None:
    """Offer what this tenant's LABEL serves to SUBSCRIBER (a tenant, or * for every tenant)."""
    with _client(url, slug, key) as client:
        body = {"tenant": subscriber, "label": label}
        client.request("POST", "/subscribers", json=body)
    click.echo(f"offered {slug}@{label} to {subscriber}: its admin accepts it to read it")


@library.command("withdraw")
@click.argument("subscriber")
@_tenant_option
@url_option
@key_option
def library_withdraw(subscriber: str, slug: str, url: str, key: str | None) -> None:
    """Withdraw this tenant's offer to SUBSCRIBER (or *)."""
    with _client(url, slug, key) as client:
        client.request("DELETE", f"/subscribers/{subscriber}")
    click.echo(f"withdrawn: {subscriber} reads nothing of {slug} any more")


@library.command("subscribe")
@click.argument("name")
@click.argument("pins", nargs=-1)
@_tenant_option
@url_option
@key_option
@click.option("--label", default="production", show_default=True, help="The label offered.")
@click.option("--prefix", default=None, help="Put before each of the library's names.")
def library_subscribe(
    name: str,
    pins: tuple[str, ...],
    slug: str,
    url: str,
    key: str | None,
    label: str,
    prefix: str | None,
) -> None:
    """Accept library NAME's offer: follow its label, or pin PINS (NAME@VERSION ...)."""
    body: dict[str, Any] = {"library": name, "label": label}
    body |= {"pins": _pins(pins)} if pins else {"follow": True}
    if prefix:
        body["prefix"] = prefix
    with _client(url, slug, key) as client:
        _said(client.request("POST", "/libraries", json=body).json())


@library.command("pin")
@click.argument("name")
@click.argument("pins", nargs=-1, required=True)
@_tenant_option
@url_option
@key_option
def library_pin(name: str, pins: tuple[str, ...], slug: str, url: str, key: str | None) -> None:
    """Pin (or move the pins of) library NAME: PINS as NAME@VERSION ..."""
    with _client(url, slug, key) as client:
        _said(client.request("PATCH", f"/libraries/{name}", json={"pins": _pins(pins)}).json())


@library.command("follow")
@click.argument("name")
@_tenant_option
@url_option
@key_option
def library_follow(name: str, slug: str, url: str, key: str | None) -> None:
    """Follow library NAME's label again (its pins dropped)."""
    with _client(url, slug, key) as client:
        _said(client.request("PATCH", f"/libraries/{name}", json={"follow": True}).json())


@library.command("end")
@click.argument("name")
@_tenant_option
@url_option
@key_option
def library_end(name: str, slug: str, url: str, key: str | None) -> None:
    """End this tenant's subscription to library NAME."""
    with _client(url, slug, key) as client:
        client.request("DELETE", f"/libraries/{name}")
    click.echo(f"ended: this tenant reads nothing of {name} any more")


@library.command("list")
@_tenant_option
@url_option
@key_option
def library_list(slug: str, url: str, key: str | None) -> None:
    """The libraries this tenant subscribes to, and the offers it makes as a library."""
    with _client(url, slug, key) as client:
        taken = client.request("GET", "/libraries").json()
        made = client.request("GET", "/subscribers").json()
    table(
        ("LIBRARY", "LABEL", "STATE", "FOLLOWS OR PINS"),
        [
            (
                s["library"],
                s["label"],
                s["state"],
                "follows"
                if s["follow"]
                else ", ".join(f"{n}@{v}" for n, v in sorted(s["pins"].items())),
            )
            for s in taken
        ],
    )
    if made:
        click.echo()
        table(
            ("OFFERED TO", "LABEL", "ACCEPTED BY"),
            [
                (o["tenant"], o["label"], ", ".join(a["tenant"] for a in o["accepted"]) or "-")
                for o in made
            ],
        )
