"""The benchmark data generator writes data the registry serves like its own."""

from __future__ import annotations

import json

import asyncpg
import pytest

from bench import pages
from bench.seed import BIG_TENANT, seed
from registry.mcp import shaping
from registry.prompts.listing import served_prompt
from registry.revisions import revision_of
from tests.conftest import Api, PgServer, auth
from tests.mcp.conftest import RawMcp


async def test_seeded_data_is_served_and_hashes_like_the_registry(
    api: Api,
    pg_server: PgServer,
    db_name: str,
    superuser: asyncpg.Connection,
    capsys: pytest.CaptureFixture[str],
) -> None:
    total = await seed(pg_server.url(db_name), tenants=3, prompts=40, big=300, seed=7)
    assert total > 3 * 40 * 4
    counts = {
        t: await superuser.fetchval(f"SELECT count(*) FROM {t}")
        for t in ("tenants", "prompts", "labels")
    }
    assert counts["tenants"] == 5  # three, the big one, and the peers' one
    assert counts["prompts"] == 3 * 40 + 300 + 10_000
    assert (
        await superuser.fetchval(
            "SELECT count(*) FROM prompts p WHERE latest_version <> (SELECT count(*) FROM prompt_versions v "
            "WHERE v.prompt_id = p.id)"
        )
        == 0
    )

    key = await api.client.post(
        "/api/v1/tenants/bench-0001/keys", json={"role": "editor"}, headers=api.operator
    )
    headers = auth(f"Bearer {key.json()['secret']}")
    listed = await api.client.get(
        "/api/v1/tenants/bench-0001/prompts", params={"limit": 500}, headers=headers
    )
    assert len(listed.json()["items"]) == 40
    for item in listed.json()["items"][:15]:
        name = item["name"]
        latest = (
            await api.client.get(f"/api/v1/tenants/bench-0001/prompts/{name}", headers=headers)
        ).json()["latest"]
        arguments = {
            a["name"]: ("AB-1" if a["name"] == "ticket" else a["enum"][0] if a["enum"] else "x")
            for a in latest["arguments"]
            if a["required"]
        }
        rendered = await api.client.post(
            f"/api/v1/tenants/bench-0001/prompts/{name}/render",
            json={"arguments": arguments, "label": "latest"},
            headers=headers,
        )
        assert rendered.status_code == 200, rendered.text
        body = {
            k: latest[k]
            for k in ("title", "description", "commit_message", "arguments", "messages")
        }
        body["arguments"] = [
            {k: v for k, v in a.items() if v is not None} for a in body["arguments"]
        ]
        again = await api.client.post(
            f"/api/v1/tenants/bench-0001/prompts/{name}/versions", json=body, headers=headers
        )
        assert again.status_code == 200, (
            again.text
        )  # identical content: the seeded hash is the real one
        assert again.json()["created"] is False

    await api.client.patch(
        f"/api/v1/tenants/{BIG_TENANT}", json={"public_read": True}, headers=api.operator
    )
    mcp = RawMcp(api.client, f"/mcp/{BIG_TENANT}")
    await mcp.initialize()
    first = await mcp.result("prompts/list")
    assert len(first["prompts"]) == 300  # the whole list, up to the cap, in one page
    assert "nextCursor" not in first

    # Every seeded version carries the list entry the registry would have stored, and bench/pages
    # measures both ways of building a page on it.
    assert (
        await superuser.fetchval("SELECT count(*) FROM prompt_versions WHERE list_entry IS NULL")
        == 0
    )
    # ... and every label row carries its version's entry (copied by a trigger as it is written).
    assert await superuser.fetchval("SELECT count(*) FROM labels WHERE list_entry IS NULL") == 0
    tenant_id = await superuser.fetchval("SELECT id FROM tenants WHERE slug = $1", BIG_TENANT)
    rows = json.loads(
        await superuser.fetchval(
            "SELECT registry_served_page_v1($1, 'production', NULL, 1000)::text", tenant_id
        )
    )
    served = [served_prompt(*r) for r in rows]
    assert first["prompts"] == shaping.prompt_entries(revision_of(mcp.revision), served)
    await pages.measure(pg_server.plain_url(db_name), size=100, pages=2, rounds=1)
    printed = capsys.readouterr().out
    for way in (
        "| stored entries, label rows |",
        "version rows (0015) |",
        "| shaped in the worker |",
    ):
        assert way in printed, way
