"""The page a REST caller asks for (``cursor`` and ``limit`` query parameters)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Query, Request

from registry.db.engine import Database
from registry.db.pagination import PageRequest


def pages(default: int) -> Callable[..., Awaitable[PageRequest]]:
    """A dependency giving the requested page, ``default`` items unless the caller says."""

    async def page_request(
        request: Request,
        cursor: Annotated[str | None, Query(max_length=4096)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = default,
    ) -> PageRequest:
        db: Database = request.app.state.db
        return PageRequest(limit=limit, cursor=cursor, tokens=await db.tokens())

    return page_request
