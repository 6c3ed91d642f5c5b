"""The number of prompts a label serves is kept with the writes (issue 75): after every kind of
write that changes it, the kept count equals a count of the label's rows (the function before it),
and the writes that do not change it (a label move) touch no counter."""

from __future__ import annotations

import asyncpg

from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"


async def _agree(superuser: asyncpg.Connection, tenant_id: object) -> dict[str, int]:
    labels = await superuser.fetch(
        "SELECT DISTINCT label FROM labels WHERE tenant_id = $1 UNION SELECT label FROM"
        " label_counts WHERE tenant_id = $1", tenant_id,
    )  # fmt: skip
    kept = {}
    for row in labels:
        label = row["label"]
        exact = await superuser.fetchval(
            "SELECT registry_served_count_v2($1, $2)", tenant_id, label
        )
        counted = await superuser.fetchval(
            "SELECT registry_served_count_v3($1, $2)", tenant_id, label
        )
        assert counted == exact, (label, counted, exact)
        kept[label] = counted
    return kept


async def test_the_kept_count_follows_every_write(api: Api, superuser: asyncpg.Connection) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    tenant_id = await superuser.fetchval("SELECT id FROM tenants WHERE slug = 'acme'")
    for name in ("a", "b", "c"):
        made = await api.client.post(f"{T}/prompts", json={**SIMPLE, "name": name,
                                     "labels": ["production"]}, headers=admin)  # fmt: skip
        assert made.status_code == 201, made.text
    assert await _agree(superuser, tenant_id) == {"latest": 3, "production": 3}

    second = {k: v for k, v in SIMPLE.items() if k != "name"} | {"description": "two"}
    wrote = await api.client.post(f"{T}/prompts/a/versions", json=second, headers=admin)
    assert wrote.status_code == 201, wrote.text
    moved = await api.client.put(f"{T}/prompts/a/labels/production", json={"version": 2},
                                 headers=admin)  # fmt: skip
    assert moved.status_code == 200, moved.text
    assert await _agree(superuser, tenant_id) == {"latest": 3, "production": 3}

    staged = await api.client.put(f"{T}/prompts/b/labels/staging", json={"version": 1},
                                  headers=admin)  # fmt: skip
    assert staged.status_code == 200, staged.text
    dropped = await api.client.delete(f"{T}/prompts/c/labels/production", headers=admin)
    assert dropped.status_code == 204, dropped.text
    assert await _agree(superuser, tenant_id) == {"latest": 3, "production": 2, "staging": 1}

    archived = await api.client.post(f"{T}/prompts/b/archive", headers=admin)
    assert archived.status_code == 200, archived.text
    assert await _agree(superuser, tenant_id) == {"latest": 2, "production": 1, "staging": 0}
    back = await api.client.post(f"{T}/prompts/b/unarchive", headers=admin)
    assert back.status_code == 200, back.text
    assert await _agree(superuser, tenant_id) == {"latest": 3, "production": 2, "staging": 1}

    for step in ("archive", None):
        done = (await api.client.post(f"{T}/prompts/c/archive", headers=admin)) if step else (
            await api.client.delete(f"{T}/prompts/c", headers=admin))  # fmt: skip
        assert done.status_code in (200, 204), done.text
    assert await _agree(superuser, tenant_id) == {"latest": 2, "production": 2, "staging": 1}

    gone = await api.client.delete(T, params={"force": "true"}, headers=api.operator)
    assert gone.status_code == 204, gone.text  # the counters go with the tenant
    assert (
        await superuser.fetchval(
            "SELECT count(*) FROM label_counts WHERE tenant_id = $1", tenant_id
        )
        == 0
    )
