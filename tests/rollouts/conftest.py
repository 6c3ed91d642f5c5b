"""Rollouts' steps move only when a test tells the advancer to (``advance_due``), never by the
worker's own timer racing the test."""

from __future__ import annotations

import pytest


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {"rollout_poll_seconds": 3600}
