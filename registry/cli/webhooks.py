"""Webhook endpoints, signed snapshots of what a label serves, and verifying a downloaded skill or
the receipt of an answer."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import click
import orjson

from registry import outbound, receipts, signing
from registry.cli.base import CommandError, Registry, in_tenant, main, pass_registry, table, when
from registry.db.engine import Database, enter_tenant
from registry.libraries import serving as library_serving
from registry.principal import OPERATOR
from registry.skills import provenance
from registry.tenants import service as tenants
from registry.webhooks import service as webhooks
from registry.webhooks.schemas import EVENT_TYPES, EndpointIn

# --- snapshots -------------------------------------------------------------------------------


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option(
    "--label", default=None, help="The label to snapshot (default: the tenant's default)."
)
@pass_registry
def snapshot(registry: Registry, file: Path, slug: str, label: str | None) -> None:
    """Write every prompt LABEL serves to FILE, signed with REGISTRY_SNAPSHOT_KEY_FILE: what a
    PromptClient starts from when the registry cannot be reached."""
    key_file = registry.settings.snapshot_key_file
    if key_file is None:
        raise CommandError(
            "set REGISTRY_SNAPSHOT_KEY_FILE to an Ed25519 private key (PEM), e.g. one made by "
            "`openssl genpkey -algorithm ed25519 -out snapshot.pem`"
        )
    try:
        key = signing.private_key(key_file.read_bytes())
    except OSError as error:
        raise CommandError(f"cannot read the snapshot key {key_file}: {error.strerror}") from None
    except signing.SignatureRefused as error:
        raise CommandError(f"{key_file}: {error}") from None
    tenants.check_slug(slug)

    async def work(db: Database) -> dict[str, Any]:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            return await library_serving.snapshot(session, found, label or found.default_label)

    document = registry.run(work)
    signed = signing.sign(document, key)
    partial = file.with_name(file.name + ".partial")
    partial.write_bytes(orjson.dumps(signed))
    partial.replace(file)  # whole or not at all
    click.echo(
        f"wrote {len(document['prompts'])} prompt(s) of {slug}@{document['label']} "
        f"(change {document['seq']}) to {file}, signed by key {signed['key_id']}",
        err=True,
    )


# --- webhooks -----------------------------------------------------------------------------------


@main.group()
def webhook() -> None:
    """Register, list and remove webhook endpoints."""


def _public_host(url: str) -> bool:
    try:
        _, host, _ = outbound.check_url(url)
        outbound.check_literal(host, allow_private=False)
    except outbound.Refused:
        return False
    return host not in ("localhost",) and not host.endswith(".localhost")


@webhook.command("create")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option("--url", required=True, help="Where deliveries go (http or https).")
@click.option(
    "--event",
    "events",
    multiple=True,
    type=click.Choice(EVENT_TYPES),
    help="An event type to send (repeat; none: every event).",
)
@click.option("--description", default=None)
@pass_registry
def webhook_create(
    registry: Registry, slug: str, url: str, events: tuple[str, ...], description: str | None
) -> None:
    """Register an endpoint; its signing secret is printed once, alone on stdout."""
    body = EndpointIn.model_validate(
        {"url": url, "events": list(events), "description": description}
    )
    # The server that delivers is the one judge of private addresses (its own
    # REGISTRY_WEBHOOK_ALLOW_PRIVATE, which this command cannot see): registered as given, refused
    # at delivery there if it must be, with the reason in the delivery log.
    created = in_tenant(
        registry,
        slug,
        lambda session, found: webhooks.create(session, found, OPERATOR, body, allow_private=True),
    )
    click.echo(f"created webhook {created.id} for tenant {slug} -> {created.url}", err=True)
    if not _public_host(url):
        click.echo(
            f"note: {url} is not a public address: the server delivers to it only with "
            f"{webhooks.ALLOWED_BY}=true where it runs (its delivery log says so otherwise)",
            err=True,
        )
    click.echo(created.secret)


@webhook.command("list")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@pass_registry
def webhook_list(registry: Registry, slug: str) -> None:
    """List a tenant's endpoints (never their secrets)."""
    rows = in_tenant(registry, slug, lambda session, found: webhooks.list_endpoints(session, found))
    table(
        ("ID", "URL", "EVENTS", "FAILING SINCE", "DISABLED"),
        [
            (
                str(e.id),
                e.url,
                ",".join(e.events) or "all",
                when(e.failing_since),
                when(e.disabled_at),
            )
            for e in rows
        ],
    )


@webhook.command("delete")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.argument("endpoint_id", type=click.UUID)
@pass_registry
def webhook_delete(registry: Registry, slug: str, endpoint_id: uuid.UUID) -> None:
    """Remove an endpoint and its delivery log."""
    in_tenant(
        registry,
        slug,
        lambda session, found: webhooks.remove(session, found, OPERATOR, endpoint_id),
    )
    click.echo(f"deleted webhook {endpoint_id}", err=True)


@main.command("verify-skill")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--entry",
    "entry_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The skill's entry as skills/get or skills/list answered it (JSON; a whole skills/get "
    "result is taken too).",
)
@click.option(
    "--public-key",
    "key_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The registry's public key (PEM, GET /.well-known/prompt-registry/signing-key) or its "
    "key set (JSON, GET /.well-known/prompt-registry/signing-keys: every key it signed with).",
)
@click.option("--tenant", "slug", default=None, help="Also require the skill to be this tenant's.")
def verify_skill(folder: Path, entry_file: Path, key_file: Path, slug: str | None) -> None:
    """Check that FOLDER holds exactly the skill its entry names, as this registry signed it: the
    entry's signature, then every file's digest and size. Exit 0 when it does, 1 (with every
    problem) when it does not."""
    try:
        loaded = orjson.loads(entry_file.read_bytes())
    except orjson.JSONDecodeError as error:
        raise CommandError(f"{entry_file} is not JSON: {error}") from None
    entry = loaded.get("skill", loaded) if isinstance(loaded, dict) else loaded
    entry = (
        entry.get("result", {}).get("skill", entry)
        if isinstance(entry, dict) and "result" in entry
        else entry
    )
    if not isinstance(entry, dict):
        raise CommandError(f"{entry_file} holds no skill entry")
    try:
        keys = signing.public_keys(key_file.read_bytes())
        problems = provenance.verify_folder(folder, entry, keys, tenant=slug)
    except signing.SignatureRefused as refused:
        raise CommandError(f"not verified: {refused}") from None
    if problems:
        for problem in problems:
            click.echo(f"{folder}/{problem}", err=True)
        raise CommandError(f"not verified: {len(problems)} problem(s) with the folder")
    click.echo(f"verified: {folder} is {entry['frontmatter']['name']} as the registry signed it")


def _entry_of(loaded: object) -> dict[str, Any] | None:
    """The skill entry of a skills/get result, a whole JSON-RPC answer, or the entry itself."""
    if isinstance(loaded, dict) and isinstance(loaded.get("result"), dict):
        loaded = loaded["result"]
    if isinstance(loaded, dict) and isinstance(loaded.get("skill"), dict):
        loaded = loaded["skill"]
    return loaded if isinstance(loaded, dict) else None


@main.command("verify-receipt")
@click.argument("answer_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--public-key",
    "key_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The registry's public key (PEM, GET /.well-known/prompt-registry/signing-key) or its "
    "key set (JSON, GET /.well-known/prompt-registry/signing-keys: every key it signed with).",
)
def verify_receipt(answer_file: Path, key_file: Path) -> None:
    """Check the receipt an answer carries (prompts/get, a tool call, the REST render, a skill file
    read; saved as JSON): signed by the registry, and naming exactly the result beside it. Exit 0
    when it verifies, 1 when it does not."""
    try:
        answer = orjson.loads(answer_file.read_bytes())
    except orjson.JSONDecodeError as error:
        raise CommandError(f"{answer_file} is not JSON: {error}") from None
    try:
        document = receipts.check_answer(answer, signing.public_keys(key_file.read_bytes()))
    except signing.SignatureRefused as refused:
        raise CommandError(f"not verified: {refused}") from None
    what = document.get("prompt") or f"{document.get('skill')}/{document.get('file')}"
    click.echo(f"verified: {what} version {document.get('version')} of tenant {document['tenant']}")
