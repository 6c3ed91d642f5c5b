"""Tenants, keys and authentication over REST."""

from __future__ import annotations

import uuid

import asyncpg

from tests.api.conftest import Api, auth

T = "/api/v1/tenants"


async def test_operator_manages_tenants(api: Api) -> None:
    c = api.client
    assert (await c.post(T, json={"slug": "acme"})).status_code == 401
    created = await c.post(T, json={"slug": "acme", "title": "Acme"}, headers=api.operator)
    assert created.status_code == 201
    assert created.json()["default_label"] == "production"
    assert created.json()["protected_labels"] == ["production"]

    duplicate = await c.post(T, json={"slug": "acme"}, headers=api.operator)
    assert duplicate.status_code == 409
    assert duplicate.headers["content-type"] == "application/problem+json"
    assert duplicate.json()["code"] == "conflict"
    assert "slug=acme" in duplicate.json()["detail"]

    bad = await c.post(T, json={"slug": "Not Valid"}, headers=api.operator)
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("slug:")

    await c.post(T, json={"slug": "beta"}, headers=api.operator)
    page = await c.get(T, params={"limit": 1}, headers=api.operator)
    assert [t["slug"] for t in page.json()["items"]] == ["acme"]
    rest = await c.get(T, params={"cursor": page.json()["next_cursor"]}, headers=api.operator)
    assert [t["slug"] for t in rest.json()["items"]] == ["beta"]
    assert rest.json()["next_cursor"] is None

    patched = await c.patch(
        f"{T}/acme",
        json={
            "title": "Acme Corp",
            "protected_labels": ["production", "prod-eu"],
            "page_size": 250,
        },
        headers=api.operator,
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["protected_labels"] == ["production", "prod-eu"]
    assert (
        await c.patch(f"{T}/acme", json={"page_size": 0}, headers=api.operator)
    ).status_code == 422
    assert (
        await c.patch(f"{T}/acme", json={"public_read": None}, headers=api.operator)
    ).status_code == 422
    assert (await c.get(f"{T}/nope", headers=api.operator)).status_code == 404


async def test_tenant_delete_only_when_empty_or_forced(
    api: Api, superuser: asyncpg.Connection
) -> None:
    keys = await api.tenant("acme")
    body = {
        "name": "p",
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    }
    assert (
        await api.client.post(f"{T}/acme/prompts", json=body, headers=auth(keys["editor"]))
    ).status_code == 201
    # Tenant admins cannot delete their tenant; operators can, once it is empty or with force.
    assert (await api.client.delete(f"{T}/acme", headers=auth(keys["admin"]))).status_code == 403
    refused = await api.client.delete(f"{T}/acme", headers=api.operator)
    assert refused.status_code == 409
    assert "force=true" in refused.json()["detail"]
    assert (
        await api.client.delete(f"{T}/acme", params={"force": "true"}, headers=api.operator)
    ).status_code == 204
    for table in ("tenants", "prompts", "prompt_versions", "api_keys", "audit_log", "change_log"):
        assert await superuser.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_keys_lifecycle_and_refusal(api: Api, superuser: asyncpg.Connection) -> None:
    keys = await api.tenant("acme")
    c = api.client
    created = await c.post(
        f"{T}/acme/keys", json={"role": "reader", "name": "ci"}, headers=auth(keys["admin"])
    )
    assert created.status_code == 201
    secret, key_id = created.json()["secret"], created.json()["id"]
    listed = await c.get(f"{T}/acme/keys", headers=auth(keys["admin"]))
    assert "secret" not in listed.text
    assert secret not in listed.text
    assert {k["name"] for k in listed.json()} == {"reader", "editor", "publisher", "admin", "ci"}

    reader = {"Authorization": f"Bearer {secret}"}
    assert (await c.get(f"{T}/acme/prompts", headers=reader)).status_code == 200
    assert (
        await c.delete(f"{T}/acme/keys/{key_id}", headers=auth(keys["admin"]))
    ).status_code == 204
    refused = await c.get(f"{T}/acme/prompts", headers=reader)
    # A refused key is 403 (an OAuth client would answer a 401 with a flow hiding the reason),
    # and the challenge carries the reason too.
    assert refused.status_code == 403
    assert refused.json()["code"] == "api_key_refused"
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert "revoked" in refused.headers["www-authenticate"]
    assert "revoked" in refused.json()["detail"]
    assert (
        await c.delete(f"{T}/acme/keys/{key_id}", headers=auth(keys["admin"]))
    ).status_code == 404

    expired = await c.post(
        f"{T}/acme/keys",
        json={"role": "admin", "expires_at": "2099-01-01T00:00:00Z"},
        headers=auth(keys["admin"]),
    )
    # A key cannot be created expired; it can pass its expiry.
    await superuser.execute(
        "UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1",
        uuid.UUID(expired.json()["id"]),
    )
    response = await c.get(
        f"{T}/acme/prompts", headers={"Authorization": f"Bearer {expired.json()['secret']}"}
    )
    assert response.status_code == 403
    assert "expired" in response.json()["detail"]

    # Only admins manage keys.
    for role in ("reader", "editor", "publisher"):
        denied = await c.post(f"{T}/acme/keys", json={"role": "admin"}, headers=auth(keys[role]))
        assert denied.status_code == 403
        assert "admin role" in denied.json()["detail"]
    assert (
        await c.post(f"{T}/acme/keys", json={"role": "root"}, headers=auth(keys["admin"]))
    ).status_code == 422


async def test_credentials_401_and_foreign_keys_403(api: Api) -> None:
    a = await api.tenant("alpha")
    b = await api.tenant("bravo")
    c = api.client
    assert (await c.get(f"{T}/alpha/prompts")).status_code == 401
    assert (
        await c.get(f"{T}/alpha/prompts", headers={"Authorization": "Basic abc"})
    ).status_code == 401
    # A credential that is no token is checked as an API key: refused with the reason, 403.
    nonsense = await c.get(f"{T}/alpha/prompts", headers={"Authorization": "Bearer nonsense"})
    assert nonsense.status_code == 403
    assert nonsense.json()["detail"] == "invalid API key"
    forged = a["admin"][:-4] + "AAAA"
    assert (await c.get(f"{T}/alpha/prompts", headers={"Authorization": forged})).status_code == 403
    # A valid key of bravo on alpha's paths: 403 whatever its role, and the same on a tenant that
    # does not exist (so a key cannot probe which tenants exist).
    for role in ("reader", "admin"):
        for path in (f"{T}/alpha/prompts", f"{T}/alpha", f"{T}/alpha/keys", f"{T}/ghost/prompts"):
            response = await c.get(path, headers=auth(b[role]))
            assert response.status_code == 403, (path, response.text)
            slug = path.split("/")[4]
            assert response.json()["detail"] == (
                f"no tenant {slug!r} is visible to this API key: it belongs to another tenant "
                "(check the tenant in the address)"
            )  # the same words for a tenant that exists and one that does not
    # Keys never reach operator routes.
    assert (await c.get(T, headers=auth(a["admin"]))).status_code == 403
    assert (await c.get(f"{T}/alpha", headers=auth(a["reader"]))).status_code == 200


async def test_audit_is_admin_only_and_paginated(api: Api) -> None:
    keys = await api.tenant("acme")
    c = api.client
    assert (await c.get(f"{T}/acme/audit", headers=auth(keys["publisher"]))).status_code == 403
    first = await c.get(f"{T}/acme/audit", params={"limit": 2}, headers=auth(keys["admin"]))
    assert first.status_code == 200
    items = first.json()["items"]
    assert [i["action"] for i in items] == ["key.create", "key.create"]
    rest = await c.get(
        f"{T}/acme/audit",
        params={"cursor": first.json()["next_cursor"]},
        headers=auth(keys["admin"]),
    )
    actions = [i["action"] for i in rest.json()["items"]]
    assert actions == ["key.create", "key.create", "tenant.create"]
    assert all(i["actor"] == "operator" for i in items)
    bad = await c.get(f"{T}/acme/audit", params={"cursor": "!!"}, headers=auth(keys["admin"]))
    assert bad.status_code == 422
    assert "cursor" in bad.json()["detail"]
