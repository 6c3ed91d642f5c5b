"""Exports and imports as a worker bears them: an export is streamed (what one request holds does not
grow with the tenant: prompts and blobs are read, written and let go one at a time), and a worker
runs one import at a time."""

from __future__ import annotations

import base64
import os
import tracemalloc

import pytest

from registry.api import bulk
from registry.prompts.bundles import export_stream
from registry.tenants.service import find_tenant
from tests.conftest import Api, auth

T = "/api/v1/tenants/acme"
BLOBS, BLOB_BYTES = 8, 1_500_000
PNG = b"\x89PNG\r\n\x1a\n"  # what an image/png starts with


@pytest.mark.parametrize("settings_overrides", [{"max_request_bytes": 4 * BLOB_BYTES}])
async def test_an_export_holds_one_blob_at_a_time(api: Api) -> None:
    keys = await api.tenant("acme")
    for index in range(BLOBS):
        data = base64.b64encode(PNG + os.urandom(BLOB_BYTES)).decode()
        made = await api.client.post(
            f"{T}/prompts", headers=auth(keys["editor"]),
            json={"name": f"picture-{index}", "messages": [{"role": "user", "content": {
                "type": "image", "data": data, "mimeType": "image/png"}}]},
        )  # fmt: skip
        assert made.status_code == 201, made.text[:300]
    # The route's body, read as uvicorn reads it (the in-process client would buffer it all).
    db = api.app.state.db
    async with db.app_tx() as session:
        tenant = await find_tenant(session, "acme")
    assert tenant is not None
    total = 0
    tracemalloc.start()
    try:
        async with db.tenant_read_tx(tenant.id) as session:
            async for chunk in export_stream(session, tenant, only_labelled=False):
                total += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > BLOBS * BLOB_BYTES  # every blob went out (as base64)
    print(f"export of {total:,} bytes: peak {peak:,} bytes traced")
    assert peak < BLOBS * BLOB_BYTES * 0.75, f"the export held {peak:,} bytes at once"


async def test_a_worker_imports_one_bundle_at_a_time(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle import holds a pooled connection for as long as it runs: others on the same worker
    wait in line (before they open a transaction), and past the wait are told to come back (429,
    Retry-After)."""
    monkeypatch.setattr(bulk, "IMPORT_WAIT_SECONDS", 0.2)
    keys = await api.tenant("acme")
    bundle = {"format": "prompt-registry/v1", "prompts": [], "blobs": {}}
    async with api.app.state.importing:  # an import is running on this worker
        busy = await api.client.post(
            f"{T}/import?dry_run=true", json=bundle, headers=auth(keys["editor"])
        )
    assert busy.status_code == 429, busy.text
    assert busy.headers["retry-after"] == "5" and "bulk request" in busy.json()["detail"]
    done = await api.client.post(
        f"{T}/import?dry_run=true", json=bundle, headers=auth(keys["editor"])
    )
    assert done.status_code == 200, done.text
