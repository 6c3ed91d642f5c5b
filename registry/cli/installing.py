"""`registry install`: a tenant's skills in the folders agent hosts read (``registry.installing``)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from registry import installing, signing
from registry.cli.base import CommandError, main
from registry.cli.files import credential, key_option, url_option
from registry.naming import LABEL_RE


def _pins(given: tuple[str, ...]) -> dict[str, int]:
    pins: dict[str, int] = {}
    for item in given:
        name, at, version = item.partition("@")
        if not at or not version.isdigit() or not 1 <= int(version) < 2**31:
            raise CommandError(f"{item!r}: pin a skill as NAME@VERSION, such as review@3")
        if not installing.NAME_RE.fullmatch(name):
            raise CommandError(f"{item!r}: {name!r} is not a skill name")
        pins[name] = int(version)
    return pins


@main.command()
@click.argument("pins", nargs=-1, metavar="[NAME@VERSION]...")
@click.option(
    "--host",
    type=click.Choice(sorted(installing.HOSTS)),
    required=True,
    help="The host whose skills folder to write.",
)
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@url_option
@key_option
@click.option(
    "--label",
    default=None,
    help="Follow this label (default: the tenant's default label, or what the lock file says).",
)
@click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="The host's user folder (under the home directory) or the project's.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Instead of the home directory (user) or the current directory (project).",
)
@click.option("--follow", is_flag=True, help="Stay running, keeping the folder current.")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 listing what is stale, missing, removed upstream or edited.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace or remove skills edited by hand, and folders this command did not write.",
)
@click.option(
    "--keep-removed",
    is_flag=True,
    help="Keep skills no longer served (marked in the lock file) instead of removing them.",
)
@click.option(
    "--public-key",
    "public_key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Trust these keys (PEM, or the key set of /.well-known/prompt-registry/signing-keys) "
    "instead of those pinned at the first install.",
)
def install(
    pins: tuple[str, ...],
    host: str,
    slug: str,
    url: str,
    key: str | None,
    label: str | None,
    scope: str,
    root: Path | None,
    follow: bool,
    check: bool,
    force: bool,
    keep_removed: bool,
    public_key: Path | None,
) -> None:
    """Write the tenant's skills into the folder HOST reads them from, each verified against the
    registry's signature before it replaces the old one, with skills.lock.json beside them.
    NAME@VERSION pins a skill; --label follows a label."""
    if label is not None and not LABEL_RE.fullmatch(label):
        raise CommandError(f"--label {label!r} is not a label name")
    if follow and check:
        raise CommandError("--follow and --check do not go together")
    options = installing.Options(
        host=host,
        folder=installing.skills_folder(host, scope, root),
        label=label,
        pins=_pins(pins),
        force=force,
        keep_removed=keep_removed,
        public_keys=public_key.read_bytes() if public_key else None,
    )
    registry = installing.Registry(url, credential(url, slug, key), slug)
    with contextlib.closing(registry):
        try:
            if check:
                _check(registry, url, options)
                return
            lock = installing.open_lock(registry, url, options)
            lines = installing.install(registry, lock, options)
            for line in lines:
                click.echo(f"{host}: {line.text()}")
            click.echo(f"{host}: {len(lock.skills)} skill(s) in {options.folder}", err=True)
            if follow:
                click.echo(f"{host}: following tenant {slug}'s changes (Ctrl-C stops)", err=True)
                with contextlib.suppress(KeyboardInterrupt):
                    installing.follow(
                        registry,
                        lock,
                        options,
                        lambda line: click.echo(f"{host}: {line.text()}"),
                    )
                return
        except (installing.InstallError, signing.SignatureRefused) as failed:
            raise CommandError(str(failed)) from None
    if any(line.action == "refused" for line in lines):
        sys.exit(1)


def _check(registry: installing.Registry, url: str, options: installing.Options) -> None:
    lock = installing.Lock.read(options.folder / installing.LOCK_FILE)
    if lock is None:
        raise CommandError(f"nothing installed in {options.folder} (no {installing.LOCK_FILE})")
    if options.label is not None or options.pins:
        lock.label, lock.pins = options.label, options.pins
    lines = installing.check(registry, lock, options.folder)
    for line in lines:
        click.echo(f"{options.host}: {line.text()}")
    differ = [line for line in lines if line.action != "ok"]
    if differ:
        click.echo(f"{len(differ)} of {len(lines)} skill(s) differ from the registry", err=True)
        sys.exit(1)
    click.echo(f"all {len(lines)} skill(s) installed as the registry serves them", err=True)
