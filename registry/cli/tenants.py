"""The operator's commands on tenants, the OAuth issuers they trust, and their API keys."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from registry.cli.base import CommandError, Registry, in_tenant, main, pass_registry, table, when
from registry.db.engine import Database, enter_tenant
from registry.naming import API_KEY_PREFIX, ROLE_RANK
from registry.tenants import service as tenants
from registry.tenants.schemas import IssuersIn, TenantPatch

# --- tenants ----------------------------------------------------------------------------------


@main.group()
def tenant() -> None:
    """Create and list tenants."""


@tenant.command("create")
@click.argument("slug")
@click.option("--title", default=None, help="Human-readable name.")
@click.option("--public-read", is_flag=True, help="Serve the MCP endpoint without an API key.")
@pass_registry
def tenant_create(registry: Registry, slug: str, title: str | None, public_read: bool) -> None:
    """Create a tenant named SLUG."""
    tenants.check_slug(slug)

    async def work(db: Database) -> uuid.UUID:
        async with db.app_tx() as session:
            created = await tenants.create_tenant(
                session, slug=slug, title=title, public_read=public_read, actor=tenants.OPERATOR
            )
            return created.id

    click.echo(f"created tenant {slug} ({registry.run(work)})")


@tenant.command("list")
@pass_registry
def tenant_list(registry: Registry) -> None:
    """List tenants."""

    async def work(db: Database) -> list[tuple[str, ...]]:
        async with db.app_tx() as session:
            return [
                (t.slug, str(t.id), "public" if t.public_read else "private", t.title or "")
                for t in await tenants.list_tenants(session)
            ]

    table(("SLUG", "ID", "READ", "TITLE"), registry.run(work))


@tenant.command("api-keys")
@click.argument("slug")
@click.argument("state", type=click.Choice(["on", "off"]))
@pass_registry
def tenant_api_keys(registry: Registry, slug: str, state: str) -> None:
    """Accept API keys for SLUG, or not (off: OAuth access tokens only)."""
    patch = TenantPatch(api_keys=state == "on")
    in_tenant(
        registry,
        slug,
        lambda session, found: tenants.update_tenant(session, found, patch, actor=tenants.OPERATOR),
    )
    click.echo(f"API keys of tenant {slug}: {state}", err=True)


@tenant.command("tools")
@click.argument("slug")
@click.argument("state", type=click.Choice(["on", "off"]))
@pass_registry
def tenant_tools(registry: Registry, slug: str, state: str) -> None:
    """Offer SLUG's prompts to MCP clients as tools too (its marked prompts, and a finder and a
    renderer of every served one), or not."""
    patch = TenantPatch(mcp_tools=state == "on")
    in_tenant(
        registry,
        slug,
        lambda session, found: tenants.update_tenant(session, found, patch, actor=tenants.OPERATOR),
    )
    click.echo(f"MCP tools of tenant {slug}: {state}", err=True)


# --- OAuth issuers ------------------------------------------------------------------------------


@main.group()
def issuer() -> None:
    """Which OAuth issuers a tenant trusts, and how their tokens' claims map to roles."""


def _rule(text: str) -> dict[str, str]:
    """CLAIM=VALUE:ROLE (the claim equals or holds VALUE) or CLAIM@DOMAIN:ROLE (an e-mail address
    in DOMAIN)."""
    test, _, role = text.rpartition(":")
    for mark, kind in (("=", "equals"), ("@", "email_domain")):
        claim, found, value = test.partition(mark)
        if found and claim and value:
            return {"claim": claim, kind: value, "role": role}
    raise CommandError(f"a rule is CLAIM=VALUE:ROLE or CLAIM@DOMAIN:ROLE, not {text!r}")


def _replace_issuer(
    registry: Registry, slug: str, issuer_url: str, entry: dict[str, Any] | None
) -> None:
    """The tenant's issuers with ``issuer_url`` replaced by ``entry`` (or removed), in one
    transaction through the same service as the REST API."""

    async def work(session: Any, found: Any) -> None:
        kept = [
            {
                "issuer": i.issuer,
                "rules": i.rules,
                "introspection_client_id": i.introspection_client_id,
                "introspection_secret": i.introspection_secret,
            }
            for i in await tenants.issuers(session, found.id)
            if i.issuer != issuer_url
        ]
        body = IssuersIn.model_validate({"issuers": kept + ([entry] if entry else [])})
        await tenants.set_issuers(session, found, tenants.OPERATOR, body)

    in_tenant(registry, slug, work)


@issuer.command("add")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.argument("issuer_url")
@click.option(
    "--rule",
    "rules",
    multiple=True,
    required=True,
    help="CLAIM=VALUE:ROLE or CLAIM@DOMAIN:ROLE (repeat).",
)
@click.option("--introspection-client-id", default=None, help="For opaque tokens (RFC 7662).")
@click.option(
    "--introspection-secret",
    envvar="REGISTRY_INTROSPECTION_SECRET",
    default=None,
    help="That client's secret [REGISTRY_INTROSPECTION_SECRET].",
)
@pass_registry
def issuer_add(
    registry: Registry,
    slug: str,
    issuer_url: str,
    rules: tuple[str, ...],
    introspection_client_id: str | None,
    introspection_secret: str | None,
) -> None:
    """Trust ISSUER_URL for the tenant (replacing its rules if it is trusted already)."""
    entry = {
        "issuer": issuer_url,
        "rules": [_rule(r) for r in rules],
        "introspection_client_id": introspection_client_id,
        "introspection_secret": introspection_secret,
    }
    _replace_issuer(registry, slug, issuer_url, entry)
    click.echo(f"tenant {slug} trusts {issuer_url}", err=True)


@issuer.command("remove")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.argument("issuer_url")
@pass_registry
def issuer_remove(registry: Registry, slug: str, issuer_url: str) -> None:
    """Stop trusting ISSUER_URL for the tenant."""
    _replace_issuer(registry, slug, issuer_url, None)
    click.echo(f"tenant {slug} no longer trusts {issuer_url}", err=True)


@issuer.command("list")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@pass_registry
def issuer_list(registry: Registry, slug: str) -> None:
    """The issuers a tenant trusts and their rules (never an introspection secret)."""
    rows = in_tenant(registry, slug, lambda session, found: tenants.list_issuers(session, found))
    table(
        ("ISSUER", "RULES", "INTROSPECTION"),
        [
            (i.issuer, "; ".join(_rule_text(r) for r in i.rules), i.introspection_client_id or "")
            for i in rows
        ],
    )


def _rule_text(rule: dict[str, Any]) -> str:
    if "equals" in rule:
        return f"{rule['claim']}={rule['equals']}:{rule['role']}"
    return f"{rule['claim']}@{rule['email_domain']}:{rule['role']}"


# --- keys -------------------------------------------------------------------------------------


@main.group()
def key() -> None:
    """Create, list and revoke API keys."""


@key.command("create")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@click.option(
    "--role", required=True, type=click.Choice(list(ROLE_RANK)), help="What the key may do."
)
@click.option("--name", default=None, help="A name to recognise the key by.")
@click.option(
    "--owner",
    default=None,
    help="The person who holds it, a name or an email (required where approvals are on).",
)
@click.option("--expires-in-days", type=click.IntRange(min=1), default=None, help="Expiry.")
@pass_registry
def key_create(
    registry: Registry,
    slug: str,
    role: str,
    name: str | None,
    owner: str | None,
    expires_in_days: int | None,
) -> None:
    """Create a key; its secret is printed once, alone on stdout."""
    tenants.check_slug(slug)
    expires_at = datetime.now(UTC) + timedelta(days=expires_in_days) if expires_in_days else None

    async def work(db: Database) -> tuple[str, str, str]:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            created, secret = await tenants.create_key(
                session,
                tenant=found,
                role=role,
                name=name,
                actor=tenants.OPERATOR,
                expires_at=expires_at,
                owner=owner,
            )
            return secret, str(created.id), created.name

    secret, key_id, key_name = registry.run(work)
    click.echo(f"created {role} key {key_name} ({key_id}) for tenant {slug}", err=True)
    click.echo(secret)


@key.command("list")
@click.option("--tenant", "slug", required=True, help="Tenant slug.")
@pass_registry
def key_list(registry: Registry, slug: str) -> None:
    """List a tenant's keys (never their secrets)."""
    tenants.check_slug(slug)

    async def work(db: Database) -> list[tuple[str, ...]]:
        async with db.app_tx() as session:
            found = await tenants.get_tenant(session, slug)
            await enter_tenant(session, found.id)
            return [
                (
                    str(k.id),
                    k.name,
                    k.role,
                    k.owner or "-",
                    when(k.created_at),
                    when(k.expires_at),
                    when(k.revoked_at),
                    when(k.last_used_at),
                )
                for k in await tenants.list_keys(session, found.id)
            ]

    table(
        ("ID", "NAME", "ROLE", "OWNER", "CREATED", "EXPIRES", "REVOKED", "LAST USED"),
        registry.run(work),
    )


@key.command("owner")
@click.argument("key_id")
@click.argument("owner")
@pass_registry
def key_owner(registry: Registry, key_id: str, owner: str) -> None:
    """Name OWNER (a person's name or email) as the holder of the key KEY_ID: approvals count
    owners, not keys."""
    parsed = _key_id(key_id)
    if not owner.strip() or len(owner) > 200:
        raise CommandError("the owner is a name or an email of 1 to 200 characters")

    async def work(db: Database) -> str:
        async with db.operator_tx() as session:
            tenant_id = await tenants.find_key_tenant(session, parsed)
        async with db.tenant_tx(tenant_id) as session:
            found = await tenants.set_key_owner(
                session, tenant_id=tenant_id, key_id=parsed, owner=owner, actor=tenants.OPERATOR
            )
            return found.name

    click.echo(f"key {registry.run(work)} ({parsed}) is held by {owner.strip()}")


def _key_id(key_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(key_id)
    except ValueError:
        shown = "" if key_id.startswith(API_KEY_PREFIX) else f" {key_id[:60]!r}"  # never a secret
        raise CommandError(
            f"invalid key id{shown}: expected a UUID as shown by `registry key list` (a key's "
            "secret is not its id)"
        ) from None


@key.command("revoke")
@click.argument("key_id")
@pass_registry
def key_revoke(registry: Registry, key_id: str) -> None:
    """Revoke the key KEY_ID at once."""
    parsed = _key_id(key_id)

    async def work(db: Database) -> str:
        async with db.operator_tx() as session:
            tenant_id = await tenants.find_key_tenant(session, parsed)
        async with db.tenant_tx(tenant_id) as session:
            revoked = await tenants.revoke_key(
                session, tenant_id=tenant_id, key_id=parsed, actor=tenants.OPERATOR
            )
            return revoked.name

    click.echo(f"revoked key {registry.run(work)} ({parsed})")
