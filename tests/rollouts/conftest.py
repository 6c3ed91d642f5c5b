"""Rollouts' steps move only when a test tells the advancer to (``advance_due``), never by the
worker's own timer racing the test."""

from __future__ import annotations

import pytest

from tests.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {"rollout_poll_seconds": 3600}


@pytest.fixture
async def acme(api: Api) -> dict[str, str]:
    """Tenant acme (public reads) with prompt greet: v1 on production, and v2."""
    keys = await api.tenant("acme", public_read=True)
    made = await api.client.post(
        f"{T}/prompts", json={**SIMPLE, "labels": ["production"]}, headers=auth(keys["admin"])
    )
    assert made.status_code == 201, made.text
    text = {"type": "text", "text": "Hi {{who}}"}
    second = {"arguments": SIMPLE["arguments"], "messages": [{"role": "user", "content": text}]}
    added = await api.client.post(
        f"{T}/prompts/greet/versions", json=second, headers=auth(keys["admin"])
    )
    assert added.status_code == 201, added.text
    return keys
