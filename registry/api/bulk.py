"""One bulk request at a time per worker: what holds a large body in memory or a transaction for
many statements (a bundle import, a push plan, a skill version of up to 16 MiB) waits for the one
this worker is running, then is told to come back (429) instead of piling up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Request

from registry.errors import Busy

IMPORT_WAIT_SECONDS = 30.0  # how long a bulk request waits for the one this worker is running


@asynccontextmanager
async def bulk_slot(request: Request) -> AsyncIterator[None]:
    """One bulk request (a bundle import, a push plan) at a time per worker: each holds its
    transaction (and a pooled connection) for many seconds, and the pool serves every tenant.
    Others wait in line, holding no connection, for a while; then they are told to come back."""
    running: asyncio.Lock = request.app.state.importing
    try:
        async with asyncio.timeout(IMPORT_WAIT_SECONDS):
            await running.acquire()
    except TimeoutError:
        raise Busy(
            "this worker is running another bulk request (an import, a push plan, a skill upload): "
            "try again "
            "in a few seconds"
        ) from None
    try:
        yield
    finally:
        running.release()
