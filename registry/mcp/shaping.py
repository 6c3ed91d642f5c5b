"""Shaping results to the negotiated revision: only fields the revision defines. Content blocks are
shaped by their kind (registry.content.kinds), which converts what a revision cannot carry."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import registry
from registry.content.kinds import kind_of
from registry.db.models import Tenant
from registry.mcp.notifications import served_kinds
from registry.mcp.protocol import EVENTS_EXTENSION, SKILLS_EXTENSION
from registry.prompts import listing
from registry.prompts.listing import ServedPrompt
from registry.revisions import Revision

_ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" '
    'fill="#1f4e79"/><path d="M18 16h28v6H18zm0 13h28v6H18zm0 13h18v6H18z" fill="#fff"/></svg>'
)
SERVER_ICON = {
    "src": "data:image/svg+xml;base64," + base64.b64encode(_ICON.encode()).decode(),
    "mimeType": "image/svg+xml",
    "sizes": ["any"],
}


def capabilities(revision: Revision, tenant: Tenant) -> dict[str, Any]:
    caps: dict[str, Any] = {kind: {"listChanged": True} for kind in served_kinds(tenant)}
    if revision.extensions:
        caps["extensions"] = {SKILLS_EXTENSION: {"directoryRead": True}}
        if revision.stateless:  # the Events extension (a draft) is defined from 2026-07-28
            caps["extensions"][EVENTS_EXTENSION] = {}
    if revision.logging:
        caps["logging"] = {}
    if revision.completions:
        caps["completions"] = {}
    return caps


def server_info(
    revision: Revision, tenant: Tenant, label: str, website_url: str | None
) -> dict[str, Any]:
    info: dict[str, Any] = {"name": "prompt-registry", "version": registry.__version__}
    if revision.titles:
        info["title"] = f"Prompt Registry: {tenant.title or tenant.slug}"
    if revision.icons:
        info["description"] = f"Prompt templates of {tenant.slug}, as labelled {label!r}"
        info["icons"] = [SERVER_ICON]
        if website_url:
            info["websiteUrl"] = website_url
    return info


def entry_options(revision: Revision) -> dict[str, bool]:
    """What a prompts/list entry of ``revision`` carries (registry.prompts.listing.list_entry)."""
    return {"titles": revision.titles, "icons": revision.icons}


def serves_stored_entries(revision: Revision) -> bool:
    """Whether ``revision`` lists each version's stored entry as it is (listing.stored_entry)."""
    return entry_options(revision) == listing.STORED_OPTIONS


def prompt_entries(revision: Revision, prompts: Iterable[ServedPrompt]) -> list[dict[str, Any]]:
    """prompts/list entries as ``revision`` carries them (what the revision defines is decided once
    per page, not once per entry: an uncached page shapes up to a few thousand)."""
    options = entry_options(revision)
    return [listing.list_entry(prompt, **options) for prompt in prompts]


def messages(
    revision: Revision, rendered: list[dict[str, Any]], tenant_slug: str
) -> list[dict[str, Any]]:
    """Rendered messages (2025-11-25 shape, bytes inline) as ``revision`` carries them: each content
    block by its kind (registry.content.kinds)."""
    return [
        {
            "role": m["role"],
            "content": kind_of(m["content"]).wire(revision, m["content"], tenant_slug),
        }
        for m in rendered
    ]
