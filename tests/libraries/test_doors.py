"""The doors of libraries over REST: a library's admin offers a label to a tenant (or to every
tenant) and withdraws it; the subscriber's admin accepts only what was offered to it, follows or
pins, and ends it; each side sees the other's consent addressed to it, and only an admin of the
acting tenant passes (the isolation matrix holds the other tenants' callers)."""

from __future__ import annotations

from tests.conftest import Api, auth

V1 = "/api/v1/tenants"


async def test_offer_accept_pin_withdraw_and_end(api: Api) -> None:
    platform = await api.tenant("platform")
    acme = await api.tenant("acme")
    beta = await api.tenant("beta")
    offered = await api.client.post(f"{V1}/platform/subscribers", headers=auth(platform["admin"]),
                                    json={"tenant": "acme", "label": "production"})  # fmt: skip
    assert offered.status_code == 201, offered.text
    assert (offered.json()["tenant"], offered.json()["accepted"]) == ("acme", [])
    # Only what was offered, to whom it was offered, by an admin.
    wrong = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                  json={"library": "platform", "label": "staging"})  # fmt: skip
    assert wrong.status_code == 409 and "offers its label 'production'" in wrong.text
    unoffered = await api.client.post(f"{V1}/beta/libraries", headers=auth(beta["admin"]),
                                      json={"library": "platform", "label": "production"})  # fmt: skip
    assert unoffered.status_code == 409 and "offers nothing to this tenant" in unoffered.text
    publisher = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["publisher"]),
                                      json={"library": "platform", "label": "production"})  # fmt: skip
    assert publisher.status_code == 403, publisher.text
    accepted = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                     json={"library": "platform", "label": "production"})  # fmt: skip
    assert accepted.status_code == 201, accepted.text
    assert (accepted.json()["state"], accepted.json()["follow"]) == ("active", True)
    again = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                  json={"library": "platform", "label": "production"})  # fmt: skip
    assert again.status_code == 409 and "already" in again.text
    seen = await api.client.get(f"{V1}/platform/subscribers", headers=auth(platform["admin"]))
    (acme_offer,) = seen.json()
    assert [a["tenant"] for a in acme_offer["accepted"]] == ["acme"]
    # Pinning, then following again.
    pinned = await api.client.patch(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]),
                                    json={"pins": {"greet": 2}})  # fmt: skip
    assert pinned.status_code == 200, pinned.text
    assert (pinned.json()["follow"], pinned.json()["pins"]) == (False, {"greet": 2})
    neither = await api.client.patch(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]),
                                     json={"follow": True, "pins": {"greet": 3}})  # fmt: skip
    assert neither.status_code == 422 and "not both" in neither.text
    following = await api.client.patch(f"{V1}/acme/libraries/platform",
                                       headers=auth(acme["admin"]), json={"follow": True})  # fmt: skip
    assert (following.json()["follow"], following.json()["pins"]) == (True, {})
    # The offer to every tenant reaches beta; withdrawing acme's leaves acme on the other label.
    everyone = await api.client.post(f"{V1}/platform/subscribers", headers=auth(platform["admin"]),
                                     json={"tenant": "*", "label": "public"})  # fmt: skip
    assert everyone.status_code == 201, everyone.text
    joined = await api.client.post(f"{V1}/beta/libraries", headers=auth(beta["admin"]),
                                   json={"library": "platform", "label": "public"})  # fmt: skip
    assert joined.status_code == 201 and joined.json()["state"] == "active", joined.text
    gone = await api.client.delete(
        f"{V1}/platform/subscribers/acme", headers=auth(platform["admin"])
    )
    assert gone.status_code == 204, gone.text
    mine = await api.client.get(f"{V1}/acme/libraries", headers=auth(acme["admin"]))
    assert [(s["library"], s["state"]) for s in mine.json()] == [("platform", "not offered")]
    ended = await api.client.delete(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]))
    assert ended.status_code == 204, ended.text
    assert (await api.client.get(f"{V1}/acme/libraries", headers=auth(acme["admin"]))).json() == []
    audit = await api.client.get(f"{V1}/platform/audit", headers=auth(platform["admin"]))
    actions = [e["action"] for e in audit.json()["items"]]
    assert actions.count("library.offer") == 2 and "library.withdraw" in actions
    audit = await api.client.get(f"{V1}/acme/audit", headers=auth(acme["admin"]))
    actions = [e["action"] for e in audit.json()["items"]]
    assert {"library.subscribe", "library.change", "library.unsubscribe"} <= set(actions)


async def test_bad_offers_and_subscriptions_say_what_is_wrong(api: Api) -> None:
    platform = await api.tenant("platform")
    admin = auth(platform["admin"])
    cases = [
        ("/platform/subscribers", {"tenant": "nobody", "label": "production"}, 404, "no tenant"),
        (
            "/platform/subscribers",
            {"tenant": "platform", "label": "production"},
            422,
            "this tenant",
        ),
        ("/platform/subscribers", {"tenant": "Bad Name", "label": "production"}, 422, "tenant"),
        ("/platform/subscribers", {"tenant": "acme", "label": "no spaces"}, 422, "label"),
        ("/platform/libraries", {"library": "platform", "label": "x"}, 422, "this tenant"),
        ("/platform/libraries", {"library": "x", "label": "x", "pins": {"a": 0}}, 422, "version"),
        ("/platform/libraries", {"library": "x", "label": "x", "follow": False}, 422, "pin"),
    ]
    for path, body, status, says in cases:
        answer = await api.client.post(f"{V1}{path}", json=body, headers=admin)
        assert answer.status_code == status, (body, answer.text)
        assert says in answer.text, (body, answer.text)
    missing = await api.client.delete(f"{V1}/platform/subscribers/*", headers=admin)
    assert missing.status_code == 404 and "no offer" in missing.text
