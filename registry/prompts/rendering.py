"""Rendering: a name resolved and compiled in one database round trip, then rendered with the
caller's arguments by the one renderer that MCP prompts/get, the REST preview and the CLI share."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from registry.content.kinds import Block, Kind, kind_of
from registry.db.models import Tenant
from registry.errors import InvalidInput
from registry.naming import ABSOLUTE_URI_RE, LABEL_RE, PROMPT_NAME_RE, ascii_number
from registry.prompts import hot_reads, partials
from registry.prompts import repository as repo
from registry.prompts.reading import not_served
from registry.prompts.schemas import RenderedPrompt
from registry.templates import mustache
from registry.templates.arguments import ArgumentSpec, InvalidArgument, resolve_arguments
from registry.templates.mustache import Template, Variable

# The default bound of one render's text (REGISTRY_MAX_RENDERED_CHARS), far below what clients take
# in one answer; a template whose longest output is known to pass it is refused when written.
MAX_RENDERED_CHARS = 2_000_000


def parse_prompt_ref(ref: str) -> tuple[str, int | None, str | None]:
    """``name``, ``name@3`` (version 3) or ``name@staging`` (a label)."""
    name, _, selector = ref.partition("@")
    if not PROMPT_NAME_RE.fullmatch(name):
        raise InvalidInput(f"invalid prompt name {name!r}", field="name")
    if not selector:
        return name, None, None
    number = ascii_number(selector)
    if number is not None:
        return name, number, None
    if LABEL_RE.fullmatch(selector) and not selector.isdigit():
        return name, None, selector
    raise InvalidInput(f"invalid version or label {selector!r} after '@' in {ref!r}", field="name")


@dataclass(frozen=True)
class CompiledMessage:
    role: str
    content: Block  # as stored: blob references by sha256
    kind: Kind
    template: Template | None  # the block's template, parsed
    uri: Template | None = None  # its URI, when that is a template over the arguments


@dataclass(frozen=True)
class CompiledVersion:
    """Everything needed to render a version; versions are immutable, so this may be kept forever."""

    description: str | None
    config: dict[str, Any] | None  # the model config, as stored
    specs: tuple[ArgumentSpec, ...]
    messages: tuple[CompiledMessage, ...]
    blobs: tuple[bytes, ...]
    version: int = 0
    partials: tuple[str, ...] = ()  # every partial version locked into it, as "name@version"


def _compile_message(
    role: str, content: Block, children: Mapping[str, Template]
) -> CompiledMessage:
    kind = kind_of(content)
    source = kind.template(content)
    template = mustache.compiled(source[1]).expand(children) if source is not None else None
    uri = kind.uri(content)
    uri_template = (
        mustache.compiled(uri[1]).expand(children)
        if uri is not None and mustache.is_uri_template(uri[1])
        else None
    )
    return CompiledMessage(role, content, kind, template, uri_template)


def _partials(found: dict[str, Any]) -> dict[str, Template]:
    """ref -> expanded child template, for the locks of the served version (checked when it was
    written; here only put together)."""
    if not found.get("locks"):
        return {}
    sources = {(s["prompt"], s["version"]): s["text"] for s in found.get("sources") or []}
    locks: dict[tuple[str, int], list[partials.Lock]] = {}
    for lock in found["locks"]:
        locks.setdefault((lock["prompt"], lock["version"]), []).append(
            partials.Lock(
                lock["ref"],
                lock["ref"].partition("@")[0],
                uuid.UUID(lock["child_prompt"]),
                lock["child_version"],
            )
        )
    nodes = {
        (uuid.UUID(prompt), version): partials.Node(
            "", text, None, tuple(locks.get((prompt, version), ()))
        )
        for (prompt, version), text in sources.items()
    }
    expander = partials.Expander(nodes, check=False)
    return expander.children("", locks.get((found["prompt"], found["version"]), []))


async def served_version(
    reads: asyncpg.Pool | AsyncSession,
    tenant: Tenant,
    name: str,
    *,
    version: int | None,
    label: str | None,
) -> tuple[uuid.UUID, int, CompiledVersion]:
    """Resolve (never to an archived prompt) and compile in one database round trip.

    Returns the prompt id, the version number and the compiled version.
    """
    label = label or tenant.default_label
    found = await hot_reads.served_version(reads, tenant.id, name, label, version)
    if "missing" in found:
        raise not_served(name, label, version, found["missing"])
    return compile_found(found)


def compile_found(found: dict[str, Any]) -> tuple[uuid.UUID, int, CompiledVersion]:
    """A served-version record (as the database returns it, and as snapshots and the client carry
    it) compiled: the prompt id, the version number and what renders it."""
    children = _partials(found)
    messages = tuple(_compile_message(m["role"], m["content"], children) for m in found["messages"])
    blobs = tuple(bytes.fromhex(m["blob"]) for m in found["messages"] if m["blob"] is not None)
    specs = tuple(
        ArgumentSpec(
            name=a["name"],
            required=a["required"],
            default=a["default"],
            enum=tuple(a["enum"]) if a["enum"] else None,
            pattern=a["pattern"],
            max_length=a["max_length"],
        )
        for a in found["arguments"]
    )
    locked = tuple(
        sorted(
            {
                f"{lock['ref'].partition('@')[0]}@{lock['child_version']}"
                for lock in found.get("locks") or []
            }
        )
    )
    compiled = CompiledVersion(
        found["description"], found.get("config"), specs, messages, blobs, found["version"], locked
    )
    return uuid.UUID(found["prompt"]), found["version"], compiled


async def load_blobs(
    session: AsyncSession, tenant_id: uuid.UUID, shas: Sequence[bytes]
) -> dict[bytes, str]:
    """Blob bytes as base64, as content blocks carry them."""
    found = await repo.blob_data(session, tenant_id, shas)
    return {sha: base64.b64encode(blob.data).decode() for sha, blob in found.items()}


def render_compiled(
    compiled: CompiledVersion,
    arguments: dict[str, Any] | None,
    blobs: dict[bytes, str],
    *,
    max_value_length: int,
    max_rendered_chars: int = MAX_RENDERED_CHARS,
) -> RenderedPrompt:
    """The one renderer: MCP prompts/get, the REST preview and the CLI all end here."""
    values = resolve_arguments(compiled.specs, arguments, max_value_length=max_value_length)
    _check_output(compiled, values, max_rendered_chars)
    messages = []
    for position, m in enumerate(compiled.messages):
        content = m.kind.render(m.content, m.template, values, blobs)
        if m.uri is not None:
            content = m.kind.with_uri(content, _rendered_uri(m.uri, values, position))
        messages.append({"role": m.role, "content": content})
    return RenderedPrompt(
        description=compiled.description,
        config=compiled.config,
        messages=messages,
        version=compiled.version,
        partials=compiled.partials,
    )


def _check_output(compiled: CompiledVersion, values: dict[str, str], limit: int) -> None:
    """Refuse, before anything is built, a render whose text would pass ``limit`` characters (a
    value inserted many times over, through partials, can multiply a small request)."""
    templates = [m.template for m in compiled.messages if m.template is not None]
    if sum(t.most_inserted(values) for t in templates) <= limit:
        return  # the usual case: no walk
    total = 0
    for template in templates:
        total += template.rendered_length(values, limit - total)
        if total > limit:
            used = sorted({v.name for v in template.variables() if isinstance(v, Variable)})
            named = {"argument": used[0]} if used else {}
            raise InvalidArgument(
                f"the rendered prompt would be longer than {limit:,} characters, the most one "
                f"render may produce (REGISTRY_MAX_RENDERED_CHARS); its text inserts "
                + (", ".join(repr(u) for u in used) or "no argument")
                + ": send shorter values",
                limit=limit,
                **named,
            )


def _rendered_uri(template: Template, values: dict[str, str], position: int) -> str:
    """A templated URI with the caller's values in it: an absolute URI, or the request fails
    naming the arguments that made it."""
    uri = template.render(values)
    if ABSOLUTE_URI_RE.fullmatch(uri):
        return uri
    names = sorted({tag.name for tag in template.variables()})
    shown = ", ".join(repr(n) for n in names) or "none"
    raise InvalidArgument(
        f"messages[{position}]: the resource URI made from argument {shown} is not a valid "
        f"absolute URI: {uri[:200]!r}",
        argument=names[0] if names else None,
    )


async def render(
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    version: int | None = None,
    label: str | None = None,
    max_value_length: int,
    max_rendered_chars: int = MAX_RENDERED_CHARS,
) -> RenderedPrompt:
    """Resolve, compile and render in one go (the REST preview; MCP does the same steps with caches)."""
    _, _, compiled = await served_version(session, tenant, name, version=version, label=label)
    blobs = await load_blobs(session, tenant.id, compiled.blobs)
    return render_compiled(
        compiled,
        arguments,
        blobs,
        max_value_length=max_value_length,
        max_rendered_chars=max_rendered_chars,
    )
