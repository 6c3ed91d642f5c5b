"""Keyset pages for the REST API: one page of items, and an opaque cursor to the next.

A cursor is a signed token (registry.tokens) of the last row's key, bound to the tenant and the
listing it continues, and valid for a day: a cursor that was altered, or that belongs to another
listing, is refused (422 on ``cursor``) instead of being read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from registry.errors import InvalidInput
from registry.tokens import ExpiredToken, InvalidToken, TokenCodec

T = TypeVar("T")
R = TypeVar("R")
MAX_AGE_SECONDS = 24 * 3600


class Page(BaseModel, Generic[T]):
    """One page of a keyset-paginated listing; pass ``next_cursor`` back for the next one."""

    items: list[T]
    next_cursor: str | None = None


@dataclass(frozen=True)
class PageRequest:
    """Which page a caller asked for: ``limit`` items after the key in ``cursor`` (None: the first)."""

    limit: int
    cursor: str | None
    tokens: TokenCodec

    def after(self, listing: Sequence[Any], *types: type) -> tuple[Any, ...] | None:
        """The key to continue after, checked against ``types``; ``listing`` names what is listed
        (the tenant and the collection) and must be the one the cursor was issued for."""
        if not self.cursor:
            return None
        try:
            key = self.tokens.open("rest-cursor", listing, self.cursor, max_age=MAX_AGE_SECONDS)
        except ExpiredToken:
            raise InvalidInput(
                "cursor has expired: list again from the first page", field="cursor"
            ) from None
        except InvalidToken:
            key = None
        if (
            key is None
            or len(key) != len(types)
            or not all(
                isinstance(v, t) and not isinstance(v, bool)
                for v, t in zip(key, types, strict=True)
            )
        ):
            raise InvalidInput(
                "cursor is not valid: pass next_cursor back unchanged", field="cursor"
            )
        return tuple(key)

    def cut(
        self, listing: Sequence[Any], rows: Sequence[R], key: Callable[[R], Any]
    ) -> tuple[Sequence[R], str | None]:
        """Rows fetched with ``limit + 1``: the page, and the cursor to the next one if there is more."""
        page = rows[: self.limit]
        if len(rows) <= self.limit:
            return page, None
        last = key(page[-1])  # a tuple: a key of several columns, checked column by column
        payload = list(last) if isinstance(last, tuple) else [last]
        return page, self.tokens.issue("rest-cursor", listing, payload)
