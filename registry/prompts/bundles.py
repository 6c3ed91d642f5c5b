"""Bundles: a tenant's prompts, versions, labels and blobs as one JSON document (export), and that
document written back (import, idempotent)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from registry.content.kinds import kind_of
from registry.db.audit import record_audit
from registry.db.models import Prompt, Tenant
from registry.errors import InvalidInput
from registry.naming import LATEST
from registry.principal import Principal
from registry.prompts import label_repository as label_repo
from registry.prompts import partial_repository as partial_repo
from registry.prompts import repository as repo
from registry.prompts.blobs import upload_blob
from registry.prompts.lifecycle import patch_prompt
from registry.prompts.preparing import prepare_version
from registry.prompts.reading import versions_out
from registry.prompts.schemas import (
    Bundle,
    BundlePrompt,
    BundleVersion,
    ImportResult,
    PartialLock,
    VersionIn,
)
from registry.prompts.writing import (
    as_version_in,
    check_label_name,
    find_or_create_prompt,
    move_label,
    write_version,
)

EXPORT_PAGE = 500


async def _exported_prompts(
    session: AsyncSession, tenant: Tenant, *, only_labelled: bool, shas: set[bytes]
) -> AsyncIterator[BundlePrompt]:
    """The tenant's prompts one at a time, by name (pages of EXPORT_PAGE rows); the blobs their
    versions use are added to ``shas``. Labelled only: the labelled versions and every version a
    partial lock names, so that what is exported imports with its locks."""
    locked = await partial_repo.locked_versions(session, tenant.id) if only_labelled else {}
    after: str | None = None
    while True:
        rows = await repo.list_prompts(
            session,
            tenant.id,
            after=after,
            limit=EXPORT_PAGE,
            prefix=None,
            tag=None,
            label=None,
            text=None,
            archived=None,
        )
        if not rows:
            return
        labels = await label_repo.labels_of(session, [p for p, _ in rows])
        for prompt, _ in rows:
            wanted = (
                set(labels[prompt.id].values()) | locked.get(prompt.id, set())
                if only_labelled
                else None
            )
            versions = await versions_out(
                session,
                prompt,
                sorted(wanted) if wanted is not None else range(1, prompt.latest_version + 1),
            )
            for v in versions:
                for m in v.messages:
                    sha = kind_of(m.content).blob(m.content)
                    if sha is not None:
                        shas.add(bytes.fromhex(sha))
            yield BundlePrompt(
                name=prompt.name,
                tags=prompt.tags,
                as_tool=prompt.as_tool,
                tests=prompt.tests,
                archived=prompt.archived_at is not None,
                versions=[
                    BundleVersion(
                        version=v.version,
                        content_hash=v.content_hash,
                        **as_version_in(v).model_dump(by_alias=True, exclude_none=True),
                    )
                    for v in versions
                ],
                labels={k: n for k, n in labels[prompt.id].items() if k != LATEST},
            )
        after = rows[-1][0].name


async def export_stream(
    session: AsyncSession,
    tenant: Tenant,
    *,
    only_labelled: bool,
    more: Callable[[set[bytes]], AsyncIterator[bytes]] | None = None,
) -> AsyncIterator[bytes]:
    """The bundle as JSON, piece by piece: one prompt, then one blob, at a time in memory (a whole
    tenant never is). ``more``: other sections of the bundle (``,"skills":[...]``), written after the
    prompts; the blobs they name are added to the set it is given, and written with the others."""
    head = {"format": "prompt-registry/v1", "tenant": tenant.slug, "exported_at": datetime.now(UTC)}
    yield Bundle.model_validate(head).model_dump_json(include=set(head))[:-1].encode()
    yield b',"prompts":['
    shas: set[bytes] = set()
    first = True
    async for item in _exported_prompts(session, tenant, only_labelled=only_labelled, shas=shas):
        yield (b"" if first else b",") + item.model_dump_json(
            by_alias=True, exclude_none=True
        ).encode()
        first = False
        session.expunge_all()  # what was read for this prompt is written: let it go
    yield b"]"
    if more is not None:
        async for chunk in more(shas):
            yield chunk
    yield b',"blobs":{'
    first = True
    for sha in sorted(shas):
        found = await repo.blob_bytes(session, tenant.id, sha)
        if found is None:
            continue
        mime_type, data = found
        # A BundleBlob written directly: the bytes, their base64 and nothing more in memory.
        yield b"," if not first else b""
        yield json.dumps(sha.hex()).encode() + b':{"mime_type":' + json.dumps(mime_type).encode()
        del found
        yield b',"data":"'
        yield base64.b64encode(data)  # sent as it is: no copy of it joined to anything
        yield b'"}'
        first = False
    yield b"}}"


async def import_bundle(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    bundle: Bundle,
    *,
    max_blob_bytes: int,
    force: bool = False,
    spend: Callable[[], None] = lambda: None,
) -> ImportResult:
    """Idempotent: versions already present (same content hash) are reused, labels already in place
    stay, so importing the same bundle twice writes nothing the second time. ``spend`` is called
    before each unit of work (a blob, a prompt, a version): the caller's bound on one import,
    which raises to stop it (the transaction then writes nothing)."""
    result = ImportResult()
    for sha_hex, blob in bundle.blobs.items():
        spend()
        try:
            data = base64.b64decode(blob.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput(
                f"blobs[{sha_hex}].data is not valid base64", field="blobs"
            ) from None
        if len(data) > max_blob_bytes:
            raise InvalidInput(
                f"blobs[{sha_hex}] is larger than {max_blob_bytes} bytes", field="blobs"
            )
        sha, created = await upload_blob(session, tenant, caller, data, blob.mime_type)
        if sha != sha_hex:
            raise InvalidInput(f"blobs[{sha_hex}]: the data hashes to {sha}", field="blobs")
        result.blobs_stored += created
    prompts: list[Prompt] = []
    for item in bundle.prompts:
        for label in item.labels:
            check_label_name(label)
        spend()
        prompt, created = await find_or_create_prompt(session, tenant, caller, item.name, item.tags)
        prompts.append(prompt)
        result.prompts_created += created
    # Versions go in once the child versions their partials lock are in (children first), and in
    # order within a prompt; mappings take the bundle's version numbers to this tenant's.
    mappings: dict[str, dict[int, int]] = {item.name: {} for item in bundle.prompts}
    queues = [sorted(item.versions, key=lambda v: v.version) for item in bundle.prompts]
    while any(queues):
        progressed = False
        for index, item in enumerate(bundle.prompts):
            while queues[index] and _locked_are_in(queues[index][0], mappings):
                version = queues[index].pop(0)
                spend()
                mappings[item.name][version.version] = await _import_version(
                    session,
                    tenant,
                    caller,
                    prompts[index],
                    index,
                    item.name,
                    version,
                    mappings,
                    result,
                    max_blob_bytes=max_blob_bytes,
                )
                progressed = True
        if not progressed:
            index = next(i for i, queue in enumerate(queues) if queue)
            stuck = queues[index][0]
            wanted = ", ".join(f"{p.ref} = version {p.version}" for p in stuck.partials or [])
            raise InvalidInput(
                f"prompts[{index}] ({bundle.prompts[index].name}) version {stuck.version}: its "
                f"partials lock child versions the bundle does not hold ({wanted}); export with "
                "versions=all",
                field="prompts",
            )
    for index, item in enumerate(bundle.prompts):
        await _import_labels(
            session,
            tenant,
            caller,
            prompts[index],
            index,
            item,
            mappings[item.name],
            result,
            force=force,
        )
    if result.prompts_created or result.versions_created or result.labels_moved:
        await record_audit(
            session,
            tenant_id=tenant.id,
            actor=caller.actor,
            action="tenant.import",
            target=f"tenant:{tenant.slug}",
            after=result.model_dump(),
        )
    return result


async def _import_labels(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    prompt: Prompt,
    index: int,
    item: BundlePrompt,
    mapping: dict[int, int],
    result: ImportResult,
    *,
    force: bool,
) -> None:
    """An imported prompt's labels (by the bundle's version numbers) and its tool mark."""
    for label, source_version in sorted(item.labels.items()):
        if source_version not in mapping:
            raise InvalidInput(
                f"prompts[{index}] ({item.name}): label {label!r} points at version {source_version}, "
                "which is not in the bundle",
                field="labels",
            )
        moved = await move_label(
            session,
            tenant,
            prompt,
            label,
            mapping[source_version],
            caller,
            force=force,
        )
        result.labels_moved += moved is not None
    if item.as_tool != prompt.as_tool:
        await patch_prompt(session, tenant, caller, item.name, as_tool=item.as_tool)
    stored = [
        case.model_dump(mode="json", by_alias=True, exclude_defaults=True) for case in item.tests
    ]
    if stored != list(prompt.tests or []):
        await patch_prompt(session, tenant, caller, item.name, tests=item.tests)


def _child_name(ref: str) -> str:
    return ref.partition("@")[0]


def _locked_are_in(version: BundleVersion, mappings: dict[str, dict[int, int]]) -> bool:
    return all(p.version in mappings.get(_child_name(p.ref), {}) for p in version.partials or [])


async def _import_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    prompt: Prompt,
    index: int,
    name: str,
    version: BundleVersion,
    mappings: dict[str, dict[int, int]],
    result: ImportResult,
    *,
    max_blob_bytes: int,
) -> int:
    """One bundle version written (or found: same content), its locks taken to this tenant's
    version numbers; returns its number here."""
    body = VersionIn.model_validate(
        version.model_dump(by_alias=True, exclude={"version", "content_hash", "partials"})
    )
    body.partials = [
        PartialLock(ref=p.ref, version=mappings[_child_name(p.ref)][p.version])
        for p in version.partials or []
    ]
    try:
        prepared = await prepare_version(session, tenant, name, body, max_blob_bytes=max_blob_bytes)
    except InvalidInput as error:
        raise InvalidInput(
            f"prompts[{index}] ({name}) version {version.version}: {error.message}",
            **error.detail,
        ) from None
    existing = await repo.version_by_hash(session, prompt, prepared.content_hash)
    if existing is not None:
        result.unchanged_versions += 1
        return existing
    written = await write_version(session, tenant, caller, prompt, prepared, [], if_match=None)
    result.versions_created += 1
    return written.version.version
