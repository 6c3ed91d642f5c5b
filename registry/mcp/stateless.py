"""Revision 2026-07-28 on the same endpoint: stateless requests carrying their own `_meta`.

A request whose params carry ``_meta["io.modelcontextprotocol/protocolVersion"]`` (or that names the
2026-07-28 revision in MCP-Protocol-Version without a session) is served here: no initialize, no
session. Its envelope is checked before anything else, with the HTTP statuses the transport specifies:
missing or malformed `_meta` -32602/400, an unsupported version -32022/400 with the supported list,
headers that disagree with the body -32020/400, a method this revision does not have -32601/404.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Protocol

import registry
from registry.db.models import Tenant
from registry.mcp import handlers, shaping
from registry.mcp.errors import HeaderMismatch, InvalidParams, MethodNotFound, UnsupportedVersion
from registry.mcp.protocol import META_CAPABILITIES, META_SERVER, META_VERSION, Message
from registry.revisions import ALL_REVISIONS, STATELESS_REVISIONS, Revision, revision_of

# Methods whose params name a target that the Mcp-Name header must mirror.
NAMED = {"prompts/get": "name", "tools/call": "name", "resources/read": "uri"}


def is_stateless(message: Message, version_header: str | None, session_id: str | None) -> bool:
    meta = message.params.get("_meta")
    if isinstance(meta, dict) and META_VERSION in meta:
        return True
    if message.method == "initialize":
        return False
    return session_id is None and version_header in STATELESS_REVISIONS


def _decode_header(value: str) -> str:
    """Header values may carry the sentinel form `=?base64?...?=` (UTF-8 inside)."""
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise HeaderMismatch("Header mismatch: malformed base64 header value") from None
    return value


def check_meta(message: Message) -> str:
    """The revision a stateless request declares in `_meta`, once that `_meta` holds up."""
    meta = message.params.get("_meta")
    if not isinstance(meta, dict):
        raise InvalidParams("invalid params: _meta is required in this protocol revision")
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise InvalidParams(f"invalid params: _meta[{META_VERSION!r}] is required")
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise InvalidParams(f"invalid params: _meta[{META_CAPABILITIES!r}] must be an object")
    return version


def check_version_and_method(message: Message, version: str) -> None:
    if version not in STATELESS_REVISIONS:
        raise UnsupportedVersion(
            "Unsupported protocol version",
            data={"requested": version, "supported": list(ALL_REVISIONS)},
        )
    if not handlers.answers(revision_of(version), message.method):
        raise MethodNotFound(f"method not found: {message.method}")


class Headers(Protocol):
    """A request's headers, looked up by lower-case name."""

    def get(self, key: str, /) -> str | None: ...


def check_envelope(message: Message, headers: Headers) -> str:
    """The revision of a stateless HTTP request, once its `_meta` and headers hold up (a header that
    disagrees with the body is judged before whether the version is one this server speaks)."""
    version = check_meta(message)
    header_version = headers.get("mcp-protocol-version")
    if header_version != version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version {header_version!r} does not "
            f"match _meta protocolVersion {version!r}"
        )
    method_header = headers.get("mcp-method")
    if method_header != message.method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method {method_header!r} does not match "
            f"method {message.method!r}"
        )
    field = NAMED.get(message.method or "")
    if field is not None and field in message.params:
        name_header = headers.get("mcp-name")
        # Whitespace around a field value is no part of it (RFC 9110, section 5.5).
        if name_header is None or _decode_header(name_header.strip()) != message.params[field]:
            raise HeaderMismatch(
                f"Header mismatch: Mcp-Name {name_header!r} does not match params.{field}"
            )
    check_version_and_method(message, version)
    return version


def client_capabilities(message: Message) -> dict[str, Any]:
    meta = message.params.get("_meta") or {}
    capabilities = meta.get(META_CAPABILITIES)
    return capabilities if isinstance(capabilities, dict) else {}


def server_meta(
    revision: Revision, tenant: Tenant, label: str, website_url: str | None
) -> dict[str, Any]:
    return {META_SERVER: shaping.server_info(revision, tenant, label, website_url)}


IDENTITY = {"name": "prompt-registry", "version": registry.__version__}


def complete(
    result: dict[str, Any],
    revision: Revision,
    tenant: Tenant,
    label: str,
    website_url: str | None,
    *,
    discover: bool = False,
) -> dict[str, Any]:
    """A result as this revision wants it: resultType, and who answered. Every answer names the
    server by the two fields the revision requires of it (name, version); the whole serverInfo
    (title, description, icons, website) is server/discover's, where a client looks for it, not
    repeated in every answer (it tripled a cached prompts/get's bytes)."""
    meta = dict(result.get("_meta") or {})
    if discover:
        meta.update(server_meta(revision, tenant, label, website_url))
    else:
        meta[META_SERVER] = IDENTITY
    return {"resultType": "complete", **result, "_meta": meta}
