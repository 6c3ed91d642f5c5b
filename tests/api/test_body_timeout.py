"""A request body that does not arrive in time is refused (408), holding nothing meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.api.conftest import Api, auth


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {"body_timeout_seconds": 0.5}


async def test_a_stalled_body_times_out(api: Api) -> None:
    keys = await api.tenant("acme")
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield b"\x89PNG"
        await never.wait()  # the client sends no more, and never ends the body
        yield b""

    answer = await api.client.post(
        "/api/v1/tenants/acme/blobs",
        content=stalled(),
        headers={**auth(keys["editor"]), "Content-Type": "image/png"},
    )
    assert answer.status_code == 408, answer.text
    assert answer.json()["code"] == "request_timeout"
