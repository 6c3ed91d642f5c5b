"""Approvals count people, not credentials (Hardening IV, finding 10): every key names its owner
(required where approvals are on), two keys of one owner approve once, and an author's second key
never approves the author's request."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import SIMPLE, Api, auth
from tests.conftest import registry_command

T = "/api/v1/tenants/acme"
CR = f"{T}/change-requests"


async def _key(api: Api, role: str, owner: str | None) -> tuple[str, dict[str, str]]:
    body: dict[str, Any] = {"role": role}
    if owner is not None:
        body["owner"] = owner
    made = await api.client.post(f"{T}/keys", json=body, headers=api.operator)
    assert made.status_code == 201, made.text
    assert made.json()["owner"] == (owner.strip() if owner else None)
    return made.json()["id"], api.as_key(made.json()["secret"])


async def test_two_keys_of_one_person_approve_once_and_never_their_own_request(api: Api) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    made = await api.client.post(
        f"{T}/prompts", json={**SIMPLE, "labels": ["production"]}, headers=admin
    )
    assert made.status_code == 201, made.text
    second = {k: v for k, v in SIMPLE.items() if k != "name"} | {"description": "second"}
    again = await api.client.post(f"{T}/prompts/greet/versions", json=second, headers=admin)
    assert again.status_code == 201, again.text
    _, author = await _key(api, "editor", "ann@example.com")
    _, ann_publishing = await _key(api, "publisher", "Ann@Example.com ")
    gated = await api.client.patch(
        T, json={"protected_labels": ["production"], "approvals": {"production": 2}}, headers=admin
    )
    assert gated.status_code == 200, gated.text

    # Approvals on: a key without an owner is refused, saying why; one with an owner is made.
    refused = await api.client.post(f"{T}/keys", json={"role": "publisher"}, headers=api.operator)
    assert refused.status_code == 422, refused.text
    assert "count people" in refused.json()["detail"] and refused.json()["field"] == "owner"
    _, bob = await _key(api, "publisher", "bob@example.com")
    _, bob_again = await _key(api, "admin", "BOB@example.com")
    _, carol = await _key(api, "publisher", "carol@example.com")

    body = {
        "description": "v2",
        "moves": [{"prompt": "greet", "label": "production", "version": 2}],
    }
    opened = await api.client.post(CR, json=body, headers=author)
    assert opened.status_code == 201, opened.text
    url = f"{CR}/{opened.json()['id']}"

    own = await api.client.post(f"{url}/approve", json={}, headers=ann_publishing)
    assert own.status_code == 403, own.text
    assert "ann@example.com" in own.json()["detail"].casefold()
    first = await api.client.post(f"{url}/approve", json={}, headers=bob)
    assert first.status_code == 200 and first.json()["state"] == "open", first.text
    second_key = await api.client.post(f"{url}/approve", json={}, headers=bob_again)
    assert second_key.status_code == 409, second_key.text
    assert "already" in second_key.json()["detail"]
    shown = (await api.client.get(url, headers=author)).json()
    assert shown["state"] == "open" and len(shown["approved_by"]) == 1
    last = await api.client.post(f"{url}/approve", json={}, headers=carol)
    assert last.status_code == 200 and last.json()["state"] == "applied", last.text


async def test_an_owner_is_named_later_listed_and_audited(api: Api) -> None:
    keys = await api.tenant("acme")
    listed = (await api.client.get(f"{T}/keys", headers=api.operator)).json()
    reader = next(k for k in listed if k["role"] == "reader")
    assert reader["owner"] is None
    named = await api.client.patch(
        f"{T}/keys/{reader['id']}", json={"owner": "dana@example.com"}, headers=auth(keys["admin"])
    )
    assert named.status_code == 200 and named.json()["owner"] == "dana@example.com", named.text
    blank = await api.client.patch(
        f"{T}/keys/{reader['id']}", json={"owner": "  "}, headers=auth(keys["admin"])
    )
    assert blank.status_code == 422, blank.text
    not_admin = await api.client.patch(
        f"{T}/keys/{reader['id']}", json={"owner": "x"}, headers=auth(keys["publisher"])
    )
    assert not_admin.status_code == 403, not_admin.text
    audit = (await api.client.get(f"{T}/audit", params={"action": "key.update"},
                                  headers=auth(keys["admin"]))).json()  # fmt: skip
    assert audit["items"][0]["after"]["owner"] == "dana@example.com"


def test_a_secret_given_as_a_key_id_is_never_echoed() -> None:
    secret = "prk_" + "s3cr3t" * 8
    for args in (("key", "revoke", secret), ("key", "owner", secret, "ann@example.com")):
        done = registry_command(*args, env={})
        assert done.returncode == 1
        assert "s3cr3t" not in done.stderr + done.stdout
        assert "a key's secret is not its id" in done.stderr
