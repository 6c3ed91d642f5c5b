"""SQL of a version write: the statement that writes a new version with its child rows, moves
``latest`` and appends the journal, run in the caller's transaction (``insert_version``) or as the
whole write in one call (``write_version_at_once``). Both run it as the SQL function the migration
keeps a copy of (``version_rows_statement``); the rest of the domain's SQL is in ``repository.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from registry.db.models import Prompt, PromptVersion
from registry.db.repository import driver as _driver
from registry.db.repository import journal_ctes, journal_json
from registry.prompts import label_repository as label_repo
from registry.prompts.repository import ARGUMENT_OBJECT, StoredArgument

# The arguments of the versions that the labels $19 serve (before the statement), as one JSON object
# of version -> arguments in position order: what a move of those labels onto the new version
# compares contracts with (registry.prompts.writing.contract_changes), read with the write.
_CONTRACTED = f"""LATERAL (
    SELECT jsonb_object_agg(served.version, served.arguments) AS contracts
      FROM (SELECT l.version,
                   coalesce(jsonb_agg(jsonb_build_object({ARGUMENT_OBJECT}) ORDER BY a.position)
                     FILTER (WHERE a.name IS NOT NULL), '[]') AS arguments
              FROM labels l
              LEFT JOIN prompt_arguments a
                ON a.tenant_id = $1 AND a.prompt_id = $2 AND a.version = l.version
             WHERE l.tenant_id = $1 AND l.prompt_id = $2 AND l.label = ANY($19::text[])
             GROUP BY l.version) AS served) AS contracted"""


# What a version write leaves in the journal besides the rows its transaction queued before it ($17,
# $18): the audit row of the version (named by the number only the locked prompt knows) and the
# change row of ``latest``, which moves with every version (a direct move: no release, no break).
_VERSION_AUDIT = """(CAST($17::text AS jsonb) || jsonb_build_array(jsonb_build_object(
    'tenant_id', $1, 'actor', $10, 'action', 'version.create',
    'target', 'prompt:' || $15 || '@' || inserted.version,
    'before', CASE WHEN $3 > 0 THEN jsonb_build_object('version', $3) END,
    'after', jsonb_build_object('version', inserted.version, 'content_hash', encode($4, 'hex'),
                                'commit_message', $9))))"""
_LATEST_CHANGE = """(CAST($18::text AS jsonb) || jsonb_build_array(jsonb_build_object(
    'tenant_id', $1, 'kind', 'label.move', 'prompt_id', $2, 'label', $16)))"""


def version_rows_statement() -> str:
    """The body of ``registry_version_rows_v1`` (migrations/sql/0026_write_version_v1.sql), built
    here from the texts it shares with the other statements (``label_repo.move_ctes``,
    ``journal_ctes``); tests/db/test_sql_functions.py holds the migration's copy equal to it, so a
    change of a shared text fails there until a new version of the function carries it.

    A new version in one statement: the prompt's latest version is bumped, the version row inserted
    and its child rows with it (arguments, messages, partial locks: each a JSON array of rows, read as
    the table's row type), unless the latest version already has this content (then nothing is
    written and no row comes back). The child rows' foreign keys are checked at the end of the
    statement, when the version row is there. The label ``latest`` ($16) follows the new version in
    the same statement (with its history row and the prompt's labels), and the journal rows are
    appended. The prompt must be locked FOR UPDATE by the caller."""
    return f"""
WITH same AS (
    SELECT 1 FROM prompt_versions
     WHERE tenant_id = $1 AND prompt_id = $2 AND version = $3 AND content_hash = $4
), bumped AS (
    UPDATE prompts SET latest_version = latest_version + 1, updated_at = now()
     WHERE tenant_id = $1 AND id = $2 AND NOT EXISTS (SELECT 1 FROM same)
    RETURNING latest_version, updated_at
), inserted AS (
    INSERT INTO prompt_versions
           (tenant_id, prompt_id, version, title, description, icons, config, commit_message,
            author, content_hash, list_entry)
    SELECT $1, $2, bumped.latest_version, $5, $6, CAST($7::text AS jsonb),
           CAST($8::text AS jsonb), $9, $10, $4, $11
      FROM bumped
    RETURNING version, created_at
), arguments AS (
    INSERT INTO prompt_arguments
           (tenant_id, prompt_id, version, position, name, title, description, required, "default",
            enum, pattern, max_length, suggestions)
    SELECT $1, $2, inserted.version, a.position, a.name, a.title, a.description,
           coalesce(a.required, false), a."default", a.enum, a.pattern, a.max_length, a.suggestions
      FROM inserted, jsonb_populate_recordset(NULL::prompt_arguments, CAST($12::text AS jsonb)) a
), messages AS (
    INSERT INTO prompt_messages (tenant_id, prompt_id, version, position, role, content, blob_sha256)
    SELECT $1, $2, inserted.version, m.position, m.role, m.content, m.blob_sha256
      FROM inserted, jsonb_populate_recordset(NULL::prompt_messages, CAST($13::text AS jsonb)) m
), partials AS (
    INSERT INTO prompt_partials
           (tenant_id, prompt_id, version, ref, child_name, child_prompt_id, child_version)
    SELECT $1, $2, inserted.version, l.ref, l.child_name, l.child_prompt_id, l.child_version
      FROM inserted, jsonb_populate_recordset(NULL::prompt_partials, CAST($14::text AS jsonb)) l
), {label_repo.move_ctes("$16", "SELECT $1, $2, $16, $15, inserted.version, $10 FROM inserted", "$10")},
{journal_ctes(_VERSION_AUDIT, _LATEST_CHANGE, when="inserted")}
SELECT inserted.version AS written, inserted.created_at, bumped.updated_at AS prompt_updated_at,
       {label_repo.MOVED_COLUMNS}, contracted.contracts
  FROM inserted CROSS JOIN bumped LEFT JOIN moved ON true CROSS JOIN {label_repo.HELD_LABELS}
       CROSS JOIN {_CONTRACTED}
"""


# The version write, in the caller's transaction: registry_version_rows_v1 (version_rows_statement).
_WRITE_VERSION = (
    "SELECT * FROM registry_version_rows_v1(" + ", ".join(f"${i}" for i in range(1, 20)) + ")"
)


class WrittenVersion(NamedTuple):
    """What ``insert_version`` wrote: the version, ``latest`` as it moved (None: it was there),
    and the arguments of the versions its ``contracted`` labels served before, by version."""

    row: PromptVersion
    latest_moved: label_repo.MovedLabel | None
    contracts: dict[int, list[StoredArgument]]


# The version row's columns that come from the write's metadata (PreparedVersion.meta).
_VERSION_META = ("title", "description", "icons", "config", "commit_message")


def _jsonb(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _row_array(rows: Iterable[dict[str, Any]]) -> str:
    """Rows as one JSON array for jsonb_populate_recordset: bytes as bytea's hex input, the rest
    as JSON gives it."""
    return orjson.dumps(
        [
            {k: "\\x" + v.hex() if isinstance(v, bytes) else v for k, v in row.items()}
            for row in rows
        ],
        default=str,  # ids read from the driver are asyncpg's own UUID type, which orjson does not know
    ).decode()


@dataclass(frozen=True)
class VersionContent:
    """What a version write stores of the version itself, whichever way it is written: its
    metadata (PreparedVersion.meta), author, content hash, prompts/list entry
    (registry.prompts.listing), arguments and messages as prepared."""

    meta: dict[str, Any]
    author: str
    content_hash: bytes
    list_entry: str
    arguments: list[dict[str, Any]]
    messages: list[dict[str, Any]]

    def values(self) -> tuple[Any, ...]:
        """The statement's parameters of the version, in its order ($4 to $13)."""
        meta = self.meta
        return (
            self.content_hash,
            meta.get("title"),
            meta.get("description"),
            _jsonb(meta.get("icons")),
            _jsonb(meta.get("config")),
            meta.get("commit_message"),
            self.author,
            self.list_entry,
            _row_array({**a, "position": i} for i, a in enumerate(self.arguments)),
            _row_array({**m, "position": i} for i, m in enumerate(self.messages)),
        )

    def row(self, prompt: Prompt, found: Any) -> PromptVersion:
        """The version as written (a transient row), from what the statement gave back."""
        return PromptVersion(
            tenant_id=prompt.tenant_id,
            prompt_id=prompt.id,
            version=found["written"],
            **{name: self.meta.get(name) for name in _VERSION_META},
            author=self.author,
            content_hash=self.content_hash,
            created_at=found["created_at"],
        )


async def insert_version(
    session: AsyncSession,
    *,
    prompt: Prompt,
    content: VersionContent,
    partials: Sequence[dict[str, Any]] = (),
    latest: str,
    audit: Sequence[Any],
    changes: Sequence[Any],
    contracted: Sequence[str] = (),
) -> WrittenVersion | None:
    """The prompt's next version with its child rows, the label ``latest`` moved onto it (as
    moved; None if it pointed there) and the journal rows appended (``audit`` and ``changes``,
    ``registry.db.audit``'s rows queued before it, then the version's own), or None (nothing
    written) when its latest version has the same content hash. ``prompt`` (the same ORM object,
    locked FOR UPDATE) is kept current without a re-read; the version comes back as a transient
    row. The arguments of the versions that the labels ``contracted`` serve come with it (by
    version)."""
    found = await (await _driver(session)).fetchrow(
        _WRITE_VERSION,
        prompt.tenant_id,
        prompt.id,
        prompt.latest_version,
        *content.values(),
        _row_array(partials),
        prompt.name,
        latest,
        journal_json(audit),
        journal_json(changes),
        list(contracted),
    )
    if found is None:
        return None
    set_committed_value(prompt, "latest_version", found["written"])
    set_committed_value(prompt, "updated_at", found["prompt_updated_at"])
    served = found["contracts"] or {}  # the session's connection decodes jsonb
    return WrittenVersion(
        content.row(prompt, found),
        label_repo.moved_label(session, prompt, found),
        {int(v): [StoredArgument(**a) for a in args] for v, args in served.items()},
    )


class WrittenAtOnce(NamedTuple):
    """What ``write_version_at_once`` wrote: the prompt as it is now (a transient row), the new
    version (a transient row) and the prompt's labels after ``latest`` moved onto it."""

    prompt: Prompt
    row: PromptVersion
    labels: dict[str, int]


_WRITE_AT_ONCE = (
    "SELECT * FROM registry_write_version_v1(" + ", ".join(f"${i}" for i in range(1, 19)) + ")"
)


async def write_version_at_once(
    connection: Any,
    *,
    tenant_id: uuid.UUID,
    key: tuple[uuid.UUID, bytes] | None,
    roles: Sequence[str],
    name: str,
    if_match: int | None,
    content: VersionContent,
    latest: str,
) -> WrittenAtOnce | None:
    """A new version of prompt ``name`` in one call, its own transaction, on ``connection`` (of the
    plain pool): registry_write_version_v1, which checks the caller's API key again (``key``: its id
    and the SHA-256 of its secret, one of ``roles``; None: the operator), locks the prompt and
    writes as ``insert_version`` does. None, with nothing written, when the write is not that
    ordinary case (the function says which)."""
    found = await connection.fetchrow(
        _WRITE_AT_ONCE,
        tenant_id,
        key is None,
        None if key is None else key[0],
        None if key is None else key[1],
        list(roles),
        name,
        if_match,
        *content.values(),
        latest,
    )
    if found is None:
        return None
    prompt = Prompt(
        tenant_id=tenant_id,
        id=found["prompt_id"],
        name=name,
        tags=found["tags"],
        as_tool=found["as_tool"],
        tests=[],
        latest_version=found["written"],
        archived_at=found["archived_at"],
        created_at=found["prompt_created_at"],
        updated_at=found["prompt_updated_at"],
    )
    return WrittenAtOnce(prompt, content.row(prompt, found), label_repo.labels_after(found))
