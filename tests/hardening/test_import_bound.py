"""One import is bounded in time (Hardening IV, finding 12: a dry run of 10,000 prompts held a
request and its transaction for minutes): past REGISTRY_IMPORT_MAX_SECONDS, a 413 that says how far
it got, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import Api, auth

T = "/api/v1/tenants/acme"


def _bundle(count: int) -> dict[str, Any]:
    return {"format": "prompt-registry/v1", "blobs": {}, "prompts": [
        {"name": f"p{i}", "labels": {"staging": 1}, "versions": [{"version": 1, "messages": [
            {"role": "user", "content": {"type": "text", "text": f"prompt {i}"}}]}]}
        for i in range(count)]}  # fmt: skip


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {"import_max_seconds": 0.05}


async def test_an_import_past_its_time_is_a_413_and_writes_nothing(api: Api) -> None:
    keys = await api.tenant("acme")
    editor = auth(keys["editor"])
    for dry_run in ("true", "false"):
        refused = await api.client.post(
            f"{T}/import", params={"dry_run": dry_run}, json=_bundle(400), headers=editor
        )
        assert refused.status_code == 413, refused.text
        detail = refused.json()["detail"]
        assert "within 0.05 s" in detail and "nothing was written" in detail
    listed = await api.client.get(f"{T}/prompts", headers=editor)
    assert (
        listed.json()["items"] == []
    )  # (an import within its time: tests/api/test_bundle_load.py)
