"""Running Alembic from the registry: upgrade, downgrade, and "is the schema at head?"."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncEngine

import registry
from registry.errors import SchemaNotAtHead


def _find_alembic_ini() -> Path:
    candidates = [
        Path(registry.__file__).resolve().parent.parent / "alembic.ini",
        Path.cwd() / "alembic.ini",
    ]
    for candidate in candidates:
        if candidate.is_file() and (candidate.parent / "migrations" / "env.py").is_file():
            return candidate
    raise FileNotFoundError(
        "alembic.ini and migrations/ not found beside the registry package or in the current "
        "directory; install the registry from its source tree (pip install -e .)"
    )


def alembic_config(url: str | None = None) -> Config:
    config = Config(str(_find_alembic_ini()))
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
        try:
            result = await conn.execute(text("SELECT version_num FROM alembic_version"))
        except ProgrammingError:  # no alembic_version table: never migrated
            return None
        return result.scalar_one_or_none()


async def check_at_head(engine: AsyncEngine) -> None:
    current = await current_revision(engine)
    head = head_revision()
    if current != head:
        raise SchemaNotAtHead(
            f"database schema is at {current or 'nothing (empty database)'}, the code needs {head}; "
            "run `registry migrate`",
            current=current,
            head=head,
        )
