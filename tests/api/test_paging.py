"""REST page cursors are signed and bound to the listing they continue."""

from __future__ import annotations

from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants"


async def test_cursors_are_signed_and_bound_to_their_listing(api: Api) -> None:
    keys = await api.tenant("acme")
    other = await api.tenant("other")
    for i in range(3):
        body = {**SIMPLE, "name": f"p{i}"}
        for slug, tenant_keys in (("acme", keys), ("other", other)):
            created = await api.client.post(
                f"{T}/{slug}/prompts", json=body, headers=auth(tenant_keys["editor"])
            )
            assert created.status_code == 201, created.text
    first = await api.client.get(
        f"{T}/acme/prompts", params={"limit": 1}, headers=auth(keys["reader"])
    )
    cursor = first.json()["next_cursor"]
    nxt = await api.client.get(
        f"{T}/acme/prompts", params={"limit": 1, "cursor": cursor}, headers=auth(keys["reader"])
    )
    assert [p["name"] for p in nxt.json()["items"]] == ["p1"]

    body, _, rest = cursor.partition(".")
    forged = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + rest
    refused = [
        ("acme", "prompts", forged, keys),  # altered
        ("other", "prompts", cursor, other),  # another tenant's listing
        ("acme", "audit", cursor, keys),  # another listing of the same tenant
        ("acme", "prompts/p0/versions", cursor, keys),
    ]
    for slug, listing, token, tenant_keys in refused:
        role = "admin" if listing == "audit" else "reader"
        answer = await api.client.get(
            f"{T}/{slug}/{listing}", params={"cursor": token}, headers=auth(tenant_keys[role])
        )
        assert answer.status_code == 422, (listing, answer.text)
        assert answer.json()["detail"].startswith("cursor"), answer.text
