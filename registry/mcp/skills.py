"""Skills over MCP (the Skills extension, ``io.modelcontextprotocol/skills``) and the resources they
are read through, on the prompts' endpoint and label.

``skills/list`` and ``skills/get`` answer each served skill's entry: its ``SKILL.md`` URI, its front
matter, and the complete manifest of its files (``{uri, digest, size}``), with the registry's
provenance in ``_meta`` (``dev.prompt-registry/skill``: the version, the label, and an Ed25519
signature over the manifest when the server has a signing key, ``REGISTRY_SNAPSHOT_KEY_FILE``).
``resources/list`` lists the served ``SKILL.md`` files, ``resources/read`` reads any file of a served
skill (text, or base64 by type), and ``resources/directory/read`` lists a folder's direct children.
URIs are ``skill://<name>/<path>``. Revisions without the extension read the same resources.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncSession

from registry.libraries import serving as library_serving
from registry.mcp import paging
from registry.mcp.call import Call, Params
from registry.mcp.errors import InvalidParams
from registry.mcp.library_reads import library_reads
from registry.mcp.protocol import SKILLS_EXTENSION as SKILLS_EXTENSION
from registry.receipts import META_KEY as RECEIPT
from registry.skills import provenance as provenance_rules
from registry.skills import service as skills
from registry.skills import serving
from registry.skills.folder import SKILL_MD, is_text
from registry.skills.service import ServedSkill
from registry.usage.schemas import Served

SCHEME = "skill://"
DIRECTORY = "inode/directory"
META_SKILL = provenance_rules.META_KEY
PAGE = 100  # skills per skills/list or resources/list page (an entry is never split)


class ListParams(Params):
    cursor: str | None = None


class UriParams(Params):
    uri: str = Field(min_length=1, max_length=2048)


class DirectoryParams(UriParams):
    cursor: str | None = None


# --- URIs -------------------------------------------------------------------------------------


def skill_uri(name: str, path: str = SKILL_MD) -> str:
    return f"{SCHEME}{name}/{path}"


def _split(uri: str) -> tuple[str, str]:
    """(skill name, path inside the folder, "" for the root) of a ``skill://`` URI."""
    if not uri.startswith(SCHEME):
        raise _not_found(uri)
    name, _, path = uri[len(SCHEME) :].partition("/")
    if not name:
        raise _not_found(uri)
    return name, path.rstrip("/")


def _not_found(uri: str, what: str = "Resource not found") -> InvalidParams:
    return InvalidParams(f"{what}: {uri[:300]}", data={"uri": uri[:2048]})


# --- entries ----------------------------------------------------------------------------------


def entry(call: Call, skill: ServedSkill) -> dict[str, Any]:
    """A skill entry as skills/list and skills/get answer it."""
    return {
        "uri": skill_uri(skill.name),
        "frontmatter": skill.frontmatter,
        "resources": [
            {"uri": skill_uri(skill.name, f.path), "digest": f"sha256:{f.sha256}", "size": f.size}
            for f in skill.files
        ],
        "_meta": {META_SKILL: provenance(call, skill)},
    }


def provenance(call: Call, skill: ServedSkill) -> dict[str, Any]:
    """Where a served skill comes from: the tenant, the version, the label that served it, and the
    signature over the manifest (``registry verify-skill`` checks it) when the server has a key."""
    owner = skill.library or call.tenant.slug  # a library's skill is signed as the library's
    found: dict[str, Any] = {"tenant": owner, "version": skill.version, "label": call.label}
    if skill.library is not None:
        found["library"] = skill.library
    files = ((f.path, f.sha256, f.size) for f in skill.files)
    found.update(
        provenance_rules.signed(
            call.settings.snapshot_key_file, owner, skill.name, skill.version, files
        )
    )
    return found


# --- the methods ------------------------------------------------------------------------------


async def _page(
    call: Call,
    kind: str,
    cursor: str | None,
    entries: Callable[[Sequence[ServedSkill]], list[dict[str, Any]]],
    options: tuple[Any, ...] = (),
) -> dict[str, Any]:
    """A page of the served skills as ``kind`` lists them (``entries``, whose fields depend on
    ``options`` besides the skills)."""

    async def fetch(session: AsyncSession, after: str | None, limit: int) -> list[ServedSkill]:
        own = await skills.served_skills(session, call.tenant, call.label, after=after, limit=limit)
        libraries = await library_reads(call.caches, call.db, call.tenant)
        if not libraries:
            return own
        theirs = await library_serving.skills(  # the primary: a replica lags the libraries
            await call.db.reads(), call.tenant, libraries, after=after, name=None, limit=limit
        )
        merged = {s.name: s for s in theirs} | {s.name: s for s in own}  # its own wins a name
        return [merged[n] for n in sorted(merged)][:limit]

    return await paging.kept_list(
        call,
        kind,
        cursor,
        size=PAGE,
        fetch=fetch,
        entries=lambda page, _: entries(page),
        position=lambda skill: skill.name,
        options=options,
    )


async def skills_list(call: Call, params: ListParams) -> dict[str, Any]:
    return await _page(call, "skills", params.cursor, lambda page: [entry(call, s) for s in page])


async def _served(call: Call, name: str, uri: str) -> ServedSkill:
    session = await call.tx.session()
    found = await skills.served_skills(session, call.tenant, call.label, name=name, limit=1)
    if not found:
        libraries = await library_reads(call.caches, call.db, call.tenant)
        theirs = (
            await library_serving.skills(
                await call.db.reads(), call.tenant, libraries, after=None, name=name, limit=1
            )
            if libraries
            else []
        )
        if not theirs:
            raise _not_found(uri, "Skill not found")
        return theirs[0]
    routed = call.route("skill", name, call.label)  # a live rollout may send the new version
    if routed is not None and routed.version is not None:
        at = await serving.served_at(session, call.tenant, name, routed.version)
        if at is not None:
            return at
    return found[0]


async def skills_get(call: Call, params: UriParams) -> dict[str, Any]:
    name, path = _split(params.uri)
    if path != SKILL_MD:
        raise _not_found(params.uri, "Skill not found (a skill is named by its SKILL.md URI)")
    skill = await _served(call, name, params.uri)
    call.served = Served("skill", skill.name, skill.version, call.label)
    return call.cacheable({"skill": entry(call, skill)})


async def resources_list(call: Call, params: ListParams) -> dict[str, Any]:
    links = call.revision.links  # _meta on a Resource from 2025-06-18

    def resources(page: Sequence[ServedSkill]) -> list[dict[str, Any]]:
        listed = []
        for skill in page:
            size = next(f.size for f in skill.files if f.path == SKILL_MD)
            resource: dict[str, Any] = {
                "uri": skill_uri(skill.name),
                "name": skill.name,
                "description": skill.description,
                "mimeType": "text/markdown",
                "size": size,
            }
            if links:
                resource["_meta"] = {META_SKILL: {"version": skill.version, "label": call.label}}
            listed.append(resource)
        return listed

    return await _page(call, "resources", params.cursor, resources, (links,))


async def resources_templates_list(call: Call, params: ListParams) -> dict[str, Any]:
    del params
    return call.cacheable({"resourceTemplates": []})


async def resources_read(call: Call, params: UriParams) -> dict[str, Any]:
    name, path = _split(params.uri)
    skill = await _served(call, name, params.uri)
    served = next((f for f in skill.files if f.path == path), None)
    if served is None:
        raise _not_found(params.uri)
    if skill.library is None:
        found = await skills.served_file(await call.tx.session(), call.tenant, skill, path)
    else:  # a library's file, read through its grant
        libraries = await library_reads(call.caches, call.db, call.tenant)
        data = await library_serving.skill_file(
            await call.db.reads(), call.tenant, libraries, served, skill.library
        )
        found = None if data is None else (served.mime_type, data)
    if found is None:
        raise _not_found(params.uri)
    mime, data = found
    contents: dict[str, Any] = {"uri": params.uri, "mimeType": mime}
    if is_text(mime, data):
        contents["text"] = data.decode("utf-8")
    else:
        contents["blob"] = base64.b64encode(data).decode()
    served_file = {"skill": skill.name, "version": skill.version, "file": path}
    receipt = call.receipt(served_file, {})
    call.served = Served("skill", skill.name, skill.version, call.label)
    if call.revision.links:
        contents["_meta"] = {
            META_SKILL: {
                "version": skill.version,
                "label": call.label,
                "digest": f"sha256:{served.sha256}",
            }
        }
    return call.cacheable({"contents": [contents], "_meta": {RECEIPT: receipt}})


async def directory_read(call: Call, params: DirectoryParams) -> dict[str, Any]:
    """The direct children of a folder of a served skill; a file's URI is -32602."""
    name, path = _split(params.uri)
    skill = await _served(call, name, params.uri)
    prefix = f"{path}/" if path else ""
    if any(f.path == path for f in skill.files) or (
        path and not any(f.path.startswith(prefix) for f in skill.files)
    ):
        raise _not_found(params.uri, "Not a directory of this skill")
    children: dict[str, dict[str, Any]] = {}
    for f in skill.files:
        if not f.path.startswith(prefix):
            continue
        rest = f.path[len(prefix) :]
        head, slash, _ = rest.partition("/")
        if slash:
            children.setdefault(
                head, {"uri": skill_uri(name, prefix + head), "name": head, "mimeType": DIRECTORY}
            )
        else:
            children[head] = {
                "uri": skill_uri(name, f.path),
                "name": head,
                "mimeType": f.mime_type,
                "size": f.size,
            }
    call.served = Served("skill", skill.name, skill.version, call.label)
    return call.cacheable({"resources": [children[k] for k in sorted(children)]})
