"""Running Alembic from the registry: upgrade, downgrade, and "is the schema at head?"."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from registry.db import repository as repo
from registry.errors import SchemaNotAtHead


def alembic_config(url: str | None = None) -> Config:
    """Alembic's configuration, from the migrations inside the installed package (no alembic.ini
    needed: a wheel installed anywhere migrates; a checkout's alembic.ini serves the `alembic` CLI)."""
    config = Config()
    config.set_main_option("script_location", str(files("registry.migrations")))
    config.set_main_option("path_separator", "os")
    config.attributes["configure_logging"] = False
    if url is not None:
        config.attributes["url"] = url
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def upgrade(url: str, revision: str = "head") -> None:
    """Blocking: runs its own event loop, so call it from a thread when one is running."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await repo.migration_revision(conn)


async def ping(engine: AsyncEngine) -> None:
    """One round trip (raises the driver's error when the database cannot be reached)."""
    async with engine.connect() as conn:
        await repo.ping(conn)


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    """Every revision this release's migrations know (head and all before it)."""
    script = ScriptDirectory.from_config(alembic_config())
    return frozenset(revision.revision for revision in script.walk_revisions())


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
