"""The declarative base every model of the schema of record shares (registry.db.models,
registry.db.skill_models): one metadata, with the constraint names Alembic writes."""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, text
from sqlalchemy.orm import DeclarativeBase

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def now() -> Any:
    """The server's time, as a column default."""
    return text("now()")
