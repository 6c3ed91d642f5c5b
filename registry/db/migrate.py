"""Running Alembic from the registry: upgrade, downgrade, and "is the schema at head?".

Which revisions this release knows, and its head, are read from the migration files' headers
(their ``revision`` and ``down_revision`` assignments) without Alembic: every ``registry`` command
and every worker asks, and importing Alembic (with Mako and Pygments) and running every migration
module to learn it cost each of them a third of a second and each worker their memory. Alembic
itself is imported by the functions that migrate; ``tests/db/test_migrations.py`` checks that both
readings agree."""

from __future__ import annotations

import ast
from functools import lru_cache
from importlib.resources import files
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncEngine

from registry.db import repository as repo
from registry.errors import SchemaNotAtHead

if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config(url: str | None = None) -> Config:
    """Alembic's configuration, from the migrations inside the installed package (no alembic.ini
    needed: a wheel installed anywhere migrates; a checkout's alembic.ini serves the `alembic` CLI)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("registry.migrations")))
    config.set_main_option("path_separator", "os")
    config.attributes["configure_logging"] = False
    if url is not None:
        config.attributes["url"] = url
    return config


def _header(source: str, name: str) -> str | None:
    """The string a migration's module-level ``name = ...`` assigns (None: None, or absent)."""
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.AnnAssign | ast.Assign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                value = ast.literal_eval(statement.value) if statement.value else None
                if value is not None and not isinstance(value, str):
                    raise RuntimeError(f"migration {name} {value!r}: one revision expected")
                return value
    return None


@lru_cache(maxsize=1)
def _revisions() -> dict[str, str | None]:
    """Each migration's revision and the one it follows (None: the first)."""
    found: dict[str, str | None] = {}
    for path in files("registry.migrations").joinpath("versions").iterdir():
        if path.name.endswith(".py") and path.name[:1].isdigit():
            source = path.read_text(encoding="utf-8")
            revision = _header(source, "revision")
            if revision is None:
                raise RuntimeError(f"migration {path.name} names no revision")
            found[revision] = _header(source, "down_revision")
    return found


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision: the one no migration follows (the migrations are one line)."""
    revisions = _revisions()
    heads = set(revisions) - set(revisions.values())
    if len(heads) != 1:
        raise RuntimeError(f"the migrations have {len(heads)} heads, one expected: {sorted(heads)}")
    return heads.pop()


def upgrade(url: str, revision: str = "head") -> None:
    """Blocking: runs its own event loop, so call it from a thread when one is running."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await repo.migration_revision(conn)


async def ping(engine: AsyncEngine) -> None:
    """One round trip (raises the driver's error when the database cannot be reached)."""
    async with engine.connect() as conn:
        await repo.ping(conn)


def known_revisions() -> frozenset[str]:
    """Every revision this release's migrations know (head and all before it)."""
    return frozenset(_revisions())


async def check_at_head(engine: AsyncEngine) -> str:
    """The schema's revision, when this code can serve it: its own head, or a later release's
    (one this code does not know: migrations only expand, so the previous release keeps serving
    while an upgrade rolls, see docs/architecture.md). An older schema, or none, is refused."""
    current = await current_revision(engine)
    head = head_revision()
    if current == head or (current is not None and current not in known_revisions()):
        return current
    raise SchemaNotAtHead(
        f"database schema is at {current or 'nothing (empty database)'}, the code needs {head}; "
        "run `registry migrate`",
        current=current,
        head=head,
    )
