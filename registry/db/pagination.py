"""Opaque keyset cursors for the REST API: base64url of the last row's key."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from registry.errors import InvalidInput

T = TypeVar("T")
R = TypeVar("R")


class Page(BaseModel, Generic[T]):
    """One page of a keyset-paginated listing; pass ``next_cursor`` back for the next one."""

    items: list[T]
    next_cursor: str | None = None


def encode_cursor(*key: Any) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str | None, *types: type) -> tuple[Any, ...] | None:
    """The key in ``token`` checked against ``types``, or None for no cursor; bad → 422 on cursor."""
    if token is None or token == "":
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidInput(
            "cursor is not valid: pass next_cursor back unchanged", field="cursor"
        ) from None
    if not isinstance(key, list) or len(key) != len(types):
        raise InvalidInput("cursor is not valid: pass next_cursor back unchanged", field="cursor")
    for value, expected in zip(key, types, strict=True):
        if not isinstance(value, expected) or isinstance(value, bool):
            raise InvalidInput(
                "cursor is not valid: pass next_cursor back unchanged", field="cursor"
            )
    return tuple(key)


def cut(rows: Sequence[R], limit: int, key: Callable[[R], Any]) -> tuple[Sequence[R], str | None]:
    """Rows fetched with ``limit + 1``: the page, and the cursor to the next one if there is more."""
    page = rows[:limit]
    return page, encode_cursor(key(page[-1])) if len(rows) > limit else None
