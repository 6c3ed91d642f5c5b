"""Turning a submitted version into what is stored: templates parsed and checked, inline bytes moved
into blobs, blob references checked, and a content hash over everything that defines the version."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.content.kinds import kind_of
from registry.content.media import check_media
from registry.db.models import Tenant
from registry.errors import InvalidInput, PayloadTooLarge
from registry.naming import ABSOLUTE_URI_RE
from registry.prompts import listing, partials
from registry.prompts import repository as repo
from registry.prompts.partials import Lock
from registry.prompts.rendering import MAX_RENDERED_CHARS
from registry.prompts.schemas import ArgumentIn, MessageIn, VersionIn
from registry.prompts.version_repository import VersionContent
from registry.templates.arguments import ArgumentSpec, check_value, compile_pattern
from registry.templates.mustache import Template, TemplateError, compiled, is_uri_template


@dataclass
class PreparedVersion:
    meta: dict[str, Any]
    arguments: list[dict[str, Any]]
    messages: list[dict[str, Any]]  # {"role", "content", "blob_sha256"} as stored
    content_hash: bytes
    locks: list[Lock] = field(default_factory=list)  # what its partial tags were resolved to

    def content(self, name: str, author: str) -> VersionContent:
        """What the write stores of this version of prompt ``name`` by ``author``."""
        return VersionContent(
            meta=self.meta,
            author=author,
            content_hash=self.content_hash,
            list_entry=listing.entry_of_version(name, self.meta, self.arguments),
            arguments=self.arguments,
            messages=self.messages,
        )

    def lock_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "ref": lock.ref,
                "child_name": lock.child_name,
                "child_prompt_id": lock.child_prompt_id,
                "child_version": lock.child_version,
            }
            for lock in self.locks
        ]


def canonical_hash(
    meta: dict[str, Any],
    arguments: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    locks: list[Lock] | None = None,
) -> bytes:
    """sha256 over the version's defining content (not its commit message), in a canonical JSON."""
    body = {
        "title": meta.get("title"),
        "description": meta.get("description"),
        "icons": meta.get("icons"),
        "arguments": [{k: v for k, v in a.items() if v is not None} for a in arguments],
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
    }
    if meta.get("config") is not None:  # absent before versions had one: their hashes stay
        body["config"] = meta["config"]
    if locks:  # the same template locked to other child versions is other content
        body["partials"] = sorted([lock.ref, lock.child_version] for lock in locks)
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).digest()


def _decode_base64(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{where} is not valid base64", field=where) from None


def _parse_template(source: str, where: str) -> Template:
    try:
        return compiled(source)  # kept: the version is rendered next
    except TemplateError as error:
        raise TemplateError(
            f"{where}: {error.message.rsplit(' at line ', 1)[0]}",
            line=error.line,
            column=error.column,
            field=where,
        ) from None


def _check_argument(index: int, argument: ArgumentIn) -> dict[str, Any]:
    where = f"arguments[{index}]"
    if argument.pattern is not None:
        try:
            compile_pattern(argument.pattern)
        except InvalidInput as error:
            raise InvalidInput(
                f"{where}.pattern: {error.message}", field=f"{where}.pattern"
            ) from None
    spec = ArgumentSpec(
        name=argument.name,
        enum=tuple(argument.enum) if argument.enum else None,
        pattern=argument.pattern,
        max_length=argument.max_length,
    )
    candidates = [("default", argument.default)] if argument.default is not None else []
    candidates += [("enum", value) for value in argument.enum or []]
    for source, value in candidates:
        try:
            check_value(
                spec
                if source == "default"
                else ArgumentSpec(name=spec.name, pattern=spec.pattern, max_length=spec.max_length),
                value,
            )
        except InvalidInput as error:
            raise InvalidInput(
                f"{where}.{source}: {error.message}", field=f"{where}.{source}"
            ) from None
    return argument.model_dump(exclude={"position"})


class _BlobStore:
    """Collects inline bytes and references of one version; checks and stores them once."""

    def __init__(self, tenant_id: uuid.UUID, max_bytes: int) -> None:
        self.tenant_id = tenant_id
        self.max_bytes = max_bytes
        self.referenced: dict[bytes, str] = {}  # sha -> where, for a clear error
        self.inline: dict[bytes, tuple[str, bytes]] = {}

    def add_inline(self, encoded: str, mime_type: str, where: str) -> str:
        data = _decode_base64(encoded, where)
        if len(data) > self.max_bytes:
            raise PayloadTooLarge(
                f"{where} is {len(data)} bytes; the most a blob may be is {self.max_bytes}",
                field=where,
            )
        check_media(data, mime_type, where)
        sha = hashlib.sha256(data).digest()
        self.inline[sha] = (mime_type, data)
        return sha.hex()

    def add_reference(self, sha_hex: str, where: str) -> str:
        self.referenced.setdefault(bytes.fromhex(sha_hex), where)
        return sha_hex

    async def flush(self, session: AsyncSession) -> None:
        for sha, (mime_type, data) in self.inline.items():
            await repo.store_blob(session, self.tenant_id, sha, mime_type, data)
        missing = set(self.referenced) - set(self.inline)
        missing -= await repo.existing_blobs(session, self.tenant_id, missing)
        if missing:
            sha = sorted(missing)[0]
            where = self.referenced[sha]
            raise InvalidInput(
                f"{where}: blob {sha.hex()} has not been uploaded to this tenant", field=where
            )


def _message(
    index: int,
    message: MessageIn,
    blobs: _BlobStore,
    templates: list[tuple[int, Template]],
    wheres: list[str],
) -> dict[str, Any]:
    where = f"messages[{index}].content"
    content = message.content.model_dump(mode="json", by_alias=True, exclude_none=True)
    kind = kind_of(content)
    blob_hex = kind.store(content, where, blobs)
    source = kind.template(content)
    if source is not None:
        templates.append((index, _parse_template(source[1], f"{where}.{source[0]}")))
        wheres.append(f"{where}.{source[0]}")
    uri = kind.uri(content)
    if uri is not None:
        if is_uri_template(uri[1]):  # checked again, rendered, for every request
            templates.append((index, _parse_template(uri[1], f"{where}.{uri[0]}")))
            wheres.append(f"{where}.{uri[0]}")
        elif not ABSOLUTE_URI_RE.fullmatch(uri[1]):
            raise InvalidInput(
                f"{where}.{uri[0]}: {uri[1]!r} is not a valid absolute URI (RFC 3986: a scheme, "
                "then no spaces or other characters a URI cannot hold, '%' followed by two hex "
                "digits)",
                field=f"{where}.{uri[0]}",
            )
    return {
        "role": message.role,
        "content": content,
        "blob_sha256": bytes.fromhex(blob_hex) if blob_hex else None,
    }


@dataclass
class _Checked:
    """A version's parts checked, before anything that needs the database (partials, blobs)."""

    arguments: list[dict[str, Any]]
    declared: set[str]
    messages: list[dict[str, Any]]
    templates: list[tuple[int, Template]]
    blobs: _BlobStore

    def prepared(self, body: VersionIn, locks: list[Lock]) -> PreparedVersion:
        meta = {
            "title": body.title,
            "description": body.description,
            "icons": [i.model_dump(mode="json", exclude_none=True) for i in body.icons]
            if body.icons
            else None,
            "commit_message": body.commit_message,
            "config": body.config.model_dump(mode="json", exclude_none=True)
            if body.config
            else None,
        }
        return PreparedVersion(
            meta=meta,
            arguments=self.arguments,
            messages=self.messages,
            content_hash=canonical_hash(meta, self.arguments, self.messages, locks),
            locks=locks,
        )


def _check(tenant_id: uuid.UUID, body: VersionIn, max_blob_bytes: int) -> _Checked:
    arguments = [_check_argument(i, a) for i, a in enumerate(body.arguments)]
    declared = {a["name"] for a in arguments}
    blobs = _BlobStore(tenant_id, max_blob_bytes)
    templates: list[tuple[int, Template]] = []
    wheres: list[str] = []  # where each template is, in the same order
    messages = []
    for i, message in enumerate(body.messages):
        before = len(templates)
        messages.append(_message(i, message, blobs, templates, wheres))
        for (_, template), where in zip(templates[before:], wheres[before:], strict=True):
            for tag in template.variables():
                if tag.name not in declared:
                    raise TemplateError(
                        f"messages[{i}]: unknown variable {tag.name!r} (declare it as an argument)",
                        line=tag.line,
                        column=tag.column,
                        field=where,
                    )
    return _Checked(arguments, declared, messages, templates, blobs)


async def prepare_version(
    session: AsyncSession, tenant: Tenant, name: str, body: VersionIn, *, max_blob_bytes: int
) -> PreparedVersion:
    """Validate and normalise ``body`` (a version of prompt ``name``); raise InvalidInput (422)
    naming the field and position."""
    checked = _check(tenant.id, body, max_blob_bytes)
    locks, expanded = await _resolve_partials(
        session, tenant, name, body, checked.templates, checked.declared
    )
    _check_longest_output(expanded, checked.arguments)
    await checked.blobs.flush(session)
    return checked.prepared(body, locks)


def prepare_alone(
    tenant_id: uuid.UUID, body: VersionIn, *, max_blob_bytes: int
) -> PreparedVersion | None:
    """``prepare_version`` for a version that needs nothing of the database: None when it has
    partial tags or pins, or blobs (inline bytes to store, references to check)."""
    checked = _check(tenant_id, body, max_blob_bytes)
    if body.partials or checked.blobs.inline or checked.blobs.referenced:
        return None
    if partials.refs(t for _, t in checked.templates):
        return None
    _check_longest_output([t for _, t in checked.templates], checked.arguments)
    return checked.prepared(body, [])


async def _resolve_partials(
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    body: VersionIn,
    templates: list[tuple[int, Template]],
    declared: set[str],
) -> tuple[list[Lock], list[Template]]:
    """The locks of the version's partial tags, once the children can be included (one text
    message each, no cycle, not too deep, their variables the parent's arguments); and the
    templates with their partials in place."""
    tags = partials.refs(t for _, t in templates)
    if not tags and not body.partials:
        return [], [t for _, t in templates]
    pinned = {p.ref: p.version for p in body.partials} if body.partials is not None else None
    locks = await partials.resolve(session, tenant, tags, pinned=pinned, where="messages")
    nodes = await partials.load(session, tenant.id, [lock.key for lock in locks])
    children = partials.Expander(nodes, check=True).children(name, locks)
    expanded = [
        partials.check_expanded(template, children, declared, f"messages[{index}]")
        for index, template in templates
    ]
    return locks, expanded


def _check_longest_output(templates: list[Template], arguments: list[dict[str, Any]]) -> None:
    """Refuse a version whose output is known, when written, to pass the bound of one render:
    each value as long as its argument allows (its max_length, its longest enum value), inserted
    everywhere the templates (with their partials) insert it. Arguments without such a bound
    count for nothing here; the renderer checks them with the values it is given."""
    longest = {}
    for argument in arguments:
        bounds = [argument["max_length"]] if argument.get("max_length") else []
        if argument.get("enum"):
            bounds.append(max(len(value) for value in argument["enum"]))
        if bounds:
            longest[argument["name"]] = min(bounds)
    most = sum(template.most_rendered(longest, otherwise=0) for template in templates)
    if most > MAX_RENDERED_CHARS:
        raise InvalidInput(
            f"messages: with values as long as their arguments allow, one render would produce "
            f"{most:,} characters; the most one render may produce is {MAX_RENDERED_CHARS:,} "
            "(include the arguments fewer times, or lower their max_length)",
            field="messages",
        )
