"""Shaping results to the negotiated revision: only fields the revision defines, and content it
cannot carry converted (never dropped): audio before 2025-03-26 becomes an embedded resource with a
blob, a resource link before 2025-06-18 becomes text naming the URI."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import registry
from registry.db.models import Tenant
from registry.mcp.protocol import since
from registry.prompts.service import ServedPrompt

_ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect width="64" height="64" rx="12" '
    'fill="#1f4e79"/><path d="M18 16h28v6H18zm0 13h28v6H18zm0 13h18v6H18z" fill="#fff"/></svg>'
)
SERVER_ICON = {
    "src": "data:image/svg+xml;base64," + base64.b64encode(_ICON.encode()).decode(),
    "mimeType": "image/svg+xml",
    "sizes": ["any"],
}


def capabilities(revision: str) -> dict[str, Any]:
    caps: dict[str, Any] = {"prompts": {"listChanged": True}}
    if not since(revision, "2026-07-28"):  # logging/setLevel is gone from 2026-07-28
        caps["logging"] = {}
    if since(revision, "2025-03-26"):
        caps["completions"] = {}
    return caps


def server_info(
    revision: str, tenant: Tenant, label: str, website_url: str | None
) -> dict[str, Any]:
    info: dict[str, Any] = {"name": "prompt-registry", "version": registry.__version__}
    if since(revision, "2025-06-18"):
        info["title"] = f"Prompt Registry: {tenant.title or tenant.slug}"
    if since(revision, "2025-11-25"):
        info["description"] = f"Prompt templates of {tenant.slug}, as labelled {label!r}"
        info["icons"] = [SERVER_ICON]
        if website_url:
            info["websiteUrl"] = website_url
    return info


def prompt_entry(revision: str, prompt: ServedPrompt) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": prompt.name}
    if prompt.title and since(revision, "2025-06-18"):
        entry["title"] = prompt.title
    if prompt.description:
        entry["description"] = prompt.description
    if prompt.arguments:
        entry["arguments"] = [_argument(revision, a) for a in prompt.arguments]
    if prompt.icons and since(revision, "2025-11-25"):
        entry["icons"] = prompt.icons
    return entry


def _argument(revision: str, argument: Any) -> dict[str, Any]:
    shaped: dict[str, Any] = {"name": argument.name, "required": argument.required}
    if argument.title and since(revision, "2025-06-18"):
        shaped["title"] = argument.title
    if argument.description:
        shaped["description"] = argument.description
    return shaped


def _annotations(revision: str, annotations: dict[str, Any] | None) -> dict[str, Any] | None:
    if not annotations:
        return None
    shaped = {k: v for k, v in annotations.items() if k in ("audience", "priority")}
    if "lastModified" in annotations and since(revision, "2025-06-18"):
        shaped["lastModified"] = annotations["lastModified"]
    return shaped or None


def _common(revision: str, block: dict[str, Any], shaped: dict[str, Any]) -> dict[str, Any]:
    annotations = _annotations(revision, block.get("annotations"))
    if annotations:
        shaped["annotations"] = annotations
    if "_meta" in block and since(revision, "2025-06-18"):
        shaped["_meta"] = block["_meta"]
    return shaped


def _resource_contents(revision: str, resource: dict[str, Any]) -> dict[str, Any]:
    shaped: dict[str, Any] = {
        k: resource[k] for k in ("uri", "mimeType", "text", "blob") if k in resource
    }
    if "_meta" in resource and since(revision, "2025-06-18"):
        shaped["_meta"] = resource["_meta"]
    return shaped


def content(revision: str, block: dict[str, Any], tenant_slug: str) -> dict[str, Any]:
    """One rendered content block (2025-11-25 shape, bytes inline) shaped for ``revision``."""
    kind = block["type"]
    if kind == "text":
        return _common(revision, block, {"type": "text", "text": block["text"]})
    if kind == "image" or (kind == "audio" and since(revision, "2025-03-26")):
        return _common(
            revision, block, {"type": kind, "data": block["data"], "mimeType": block["mimeType"]}
        )
    if kind == "audio":
        sha = hashlib.sha256(base64.b64decode(block["data"])).hexdigest()
        resource = {"uri": f"registry://{tenant_slug}/blobs/{sha}", "mimeType": block["mimeType"],
                    "blob": block["data"]}  # fmt: skip
        return _common(revision, block, {"type": "resource", "resource": resource})
    if kind == "resource":
        return _common(
            revision,
            block,
            {"type": "resource", "resource": _resource_contents(revision, block["resource"])},
        )
    # resource_link
    if since(revision, "2025-06-18"):
        keys = ["uri", "name", "title", "description", "mimeType", "size"]
        if since(revision, "2025-11-25"):
            keys.append("icons")
        return _common(
            revision, block, {"type": "resource_link", **{k: block[k] for k in keys if k in block}}
        )
    label = block.get("title") or block["name"]
    text = f"{label}: {block['uri']}" + (
        f"\n{block['description']}" if block.get("description") else ""
    )
    return _common(revision, block, {"type": "text", "text": text})


def messages(
    revision: str, rendered: list[dict[str, Any]], tenant_slug: str
) -> list[dict[str, Any]]:
    return [
        {"role": m["role"], "content": content(revision, m["content"], tenant_slug)}
        for m in rendered
    ]
