"""What a subscriber serves of its libraries, beside its own prompts: a library's prompts as the
label it accepted serves them (following) or the versions it pinned, under their names or under
the prefix it chose. Its own prompt wins a name both serve; two libraries serving one name: the
first by the library's name wins.

Every read is one statement of schema 0035 that asks for the grant (both consents) before it reads
the library, so nothing here decides who may read what: it merges what the database gave. Lists
merge the subscriber's own keyset page with each library's, in name order (the code-point order
the embedded server and the documented deployments sort text in: ``C.UTF-8``)."""

from __future__ import annotations

import base64
import heapq
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.libraries import repository as repo
from registry.prompts import hot_reads, snapshots
from registry.prompts.listing import served_prompt, stored_entry
from registry.skills import folder
from registry.skills.service import ServedFile, ServedSkill


@dataclass(frozen=True)
class LibraryRead:
    """One library a tenant reads now, and on which terms."""

    library_id: uuid.UUID
    library: str  # its tenant's name
    label: str
    follow: bool
    prefix: str

    def local(self, name: str) -> str | None:
        """The library's own name of ``name`` as the subscriber serves it (None: not one of its
        names, for the prefix it is served under)."""
        if not name.startswith(self.prefix):
            return None
        return name[len(self.prefix) :] or None

    def start(self, after: str | None) -> tuple[bool, str | None]:
        """Whether any of the library's names come after ``after`` (a served name), and where its
        own keyset page starts then."""
        if after is None or after < self.prefix:
            return True, None
        if after.startswith(self.prefix):
            return True, after[len(self.prefix) :]
        return False, None  # every prefixed name sorts before ``after``


async def reads(pool: repo.Reads, tenant: Tenant) -> tuple[LibraryRead, ...]:
    """The libraries ``tenant`` reads now (none without a subscription: no round trip)."""
    if not tenant.library_reads:
        return ()
    return tuple(
        LibraryRead(row[0], row[1], row[2], row[3], row[5] or "")
        for row in await repo.reads_of(pool, tenant.id)
    )


async def merged_entries(
    pool: repo.Reads,
    tenant: Tenant,
    label: str,
    libraries: tuple[LibraryRead, ...],
    *,
    after: str | None,
    limit: int,
) -> list[tuple[str, str]]:
    """Up to ``limit`` served names after ``after`` with their stored list entries (encoded), the
    tenant's own and its libraries' merged by name, each name once (its own first)."""
    own = await hot_reads.served_entries(pool, tenant.id, label, after=after, limit=limit)
    sources: list[list[tuple[str, str]]] = [
        [
            (name, entry if entry is not None else stored_entry(served_prompt(name, *served or ())))
            for name, entry, served in own
        ]
    ]
    for library in libraries:
        any_after, start = library.start(after)
        if not any_after:
            sources.append([])
            continue
        rows = await repo.entries(pool, tenant.id, library.library_id, start, limit)
        sources.append([_renamed(library.prefix, n, v, e) for n, v, e in rows])
    return list(_first_of_each(sources, limit))


def _renamed(prefix: str, name: str, version: int, entry: str | None) -> tuple[str, str]:
    served = prefix + name
    if entry is None:  # written before entries were stored: shaped from its name alone
        return served, stored_entry(served_prompt(served, version, None, None, None, None))
    if not prefix:
        return served, entry
    decoded = orjson.loads(entry)
    decoded["name"] = served
    return served, orjson.dumps(decoded).decode()


def _first_of_each(sources: list[list[tuple[str, str]]], limit: int) -> Iterator[tuple[str, str]]:
    """The sorted sources merged by name, each name from the first source that has it."""
    last: str | None = None
    taken = 0
    merged = heapq.merge(
        *([(name, rank, entry) for name, entry in source] for rank, source in enumerate(sources))
    )
    for name, _, entry in merged:
        if name == last:
            continue
        last = name
        yield name, entry
        taken += 1
        if taken == limit:
            return


async def count(pool: repo.Reads, tenant: Tenant, libraries: tuple[LibraryRead, ...]) -> int:
    """How many prompts the libraries serve the tenant (names its own also serve counted too: what
    a first page's size is chosen by, not a total shown)."""
    return sum([await repo.count(pool, tenant.id, library.library_id) for library in libraries])


async def served_version(
    pool: repo.Reads, tenant: Tenant, libraries: tuple[LibraryRead, ...], name: str
) -> tuple[LibraryRead, dict[str, object]] | None:
    """The library that serves ``name`` to the tenant and the version record it serves (as
    ``registry_served_version_v3`` gives it); None when none serves it."""
    for library in libraries:
        local = library.local(name)
        if local is None:
            continue
        found = await repo.served_version(pool, tenant.id, library.library_id, local)
        if "missing" not in found:
            return library, found
    return None


async def blobs(
    pool: repo.Reads, tenant: Tenant, library: LibraryRead, shas: list[bytes]
) -> dict[bytes, str]:
    """The bytes (base64, as content blocks carry them) of blobs a library's version uses."""
    found = await repo.blobs(pool, tenant.id, library.library_id, shas)
    return {sha: base64.b64encode(data).decode() for sha, (_, data) in found.items()}


# --- REST: the records applications render locally (registry.client, /served) ------------------


async def served_record(
    pool: repo.Reads, tenant: Tenant, label: str, libraries: tuple[LibraryRead, ...], name: str
) -> dict[str, Any] | None:
    """The record of ``name`` as the tenant serves it under ``label``: its own, else a library's
    (marked with the library's name); None when neither serves it."""
    found = await hot_reads.served_version(pool, tenant.id, name, label, None)
    if "missing" not in found:
        return {"name": name, **found}
    served = await served_version(pool, tenant, libraries, name)
    if served is None:
        return None
    library, record = served
    return {"name": name, **record, "library": library.library}


async def served_records(
    pool: repo.Reads,
    tenant: Tenant,
    label: str,
    libraries: tuple[LibraryRead, ...],
    *,
    after: str | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """A page of records, the tenant's own and its libraries' merged by name; whether more."""
    rows = await merged_entries(pool, tenant, label, libraries, after=after, limit=limit + 1)
    records = []
    for name, _ in rows[:limit]:
        record = await served_record(pool, tenant, label, libraries, name)
        if record is not None:
            records.append(record)
    return records, len(rows) > limit


async def library_blobs(
    pool: repo.Reads,
    tenant: Tenant,
    libraries: tuple[LibraryRead, ...],
    records: list[dict[str, Any]],
) -> dict[str, dict[str, str]]:
    """sha256 (hex) -> {"mime_type", "data"} of the blobs the library records use."""
    found: dict[str, dict[str, str]] = {}
    for library in libraries:
        shas = sorted(
            {
                bytes.fromhex(m["blob"])
                for r in records
                if r.get("library") == library.library
                for m in r["messages"]
                if m.get("blob") is not None
            }
        )
        if not shas:
            continue
        for sha, (mime, data) in (
            await repo.blobs(pool, tenant.id, library.library_id, shas)
        ).items():
            found[sha.hex()] = {"mime_type": mime, "data": base64.b64encode(data).decode()}
    return found


# --- skills: a library's skills under their own names (a prefix is for prompts: a skill's name is
# also its folder's and its front matter's) -----------------------------------------------------


async def skills(
    pool: repo.Reads,
    tenant: Tenant,
    libraries: tuple[LibraryRead, ...],
    *,
    after: str | None,
    name: str | None,
    limit: int,
) -> list[ServedSkill]:
    """The skills the libraries serve the tenant after ``after`` (or the one named ``name``), by
    name, each once (the first library by name wins)."""
    found: dict[str, ServedSkill] = {}
    for library in libraries:
        rows = await repo.skills(
            pool, tenant.id, library.library_id, after=after, name=name, limit=limit
        )
        for skill_name, version, description, frontmatter, files in rows:
            found.setdefault(
                skill_name,
                ServedSkill(
                    name=skill_name,
                    skill_id=None,
                    version=version,
                    description=description,
                    frontmatter=folder.served_front_matter(frontmatter, description),
                    files=tuple(
                        ServedFile(f["path"], f["sha256"], f["size"], f["mime_type"]) for f in files
                    ),
                    library=library.library,
                ),
            )
    return [found[n] for n in sorted(found)][:limit]


async def skill_file(
    pool: repo.Reads,
    tenant: Tenant,
    libraries: tuple[LibraryRead, ...],
    file: ServedFile,
    library: str,
) -> bytes | None:
    """The bytes of a file of a library's skill (by its digest, through the library's grant)."""
    for read in libraries:
        if read.library == library:
            found = await repo.blobs(pool, tenant.id, read.library_id, [bytes.fromhex(file.sha256)])
            if found:
                return next(iter(found.values()))[1]
    return None


# --- the served view whole: its own records and its libraries', for /served and snapshots ---------


async def view_page(
    session: AsyncSession,
    tenant: Tenant,
    label: str,
    libraries: tuple[LibraryRead, ...],
    *,
    after: str | None,
    limit: int,
) -> tuple[list[dict[str, Any]], bool]:
    """A page of what ``label`` serves the tenant: its own records, and its libraries' (each
    marked with its library) merged by name when it reads any; whether more follow."""
    if libraries:
        return await served_records(session, tenant, label, libraries, after=after, limit=limit)
    return await snapshots.served_page(session, tenant, label, after=after, limit=limit)


async def view_blobs(
    session: AsyncSession,
    tenant: Tenant,
    libraries: tuple[LibraryRead, ...],
    records: list[dict[str, Any]],
) -> dict[str, dict[str, str]]:
    """The blobs the records use: the tenant's own, and its libraries' through their grants."""
    own = [r for r in records if "library" not in r]
    found = await snapshots.blobs_of(session, tenant, own)
    if libraries:
        found |= await library_blobs(session, tenant, libraries, records)
    return found


async def snapshot(session: AsyncSession, tenant: Tenant, label: str) -> dict[str, Any]:
    """The snapshot document of what ``label`` serves the tenant, its libraries' prompts with its
    own (``registry snapshot``: what a PromptClient starts from when the registry is away)."""
    libraries = await reads(session, tenant)
    records: list[dict[str, Any]] = []
    after = None
    while True:
        page, more = await view_page(
            session, tenant, label, libraries, after=after, limit=snapshots.PAGE
        )
        records.extend(page)
        if not more or not page:
            break
        after = page[-1]["name"]
    blobs = await view_blobs(session, tenant, libraries, records)
    return snapshots.document(tenant, label, records, blobs)
