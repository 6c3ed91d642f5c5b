"""The console publishes under approvals (issue 67, item 2): a move of a label that needs approvals
leads to a page that opens a change request for it (a description, an optional time), the request's
page says what it needs and lets its author withdraw it, and an admin may move it anyway with a
reason (break-glass). For prompts and skills alike."""

from __future__ import annotations

import pytest

from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"
SKILL_MD = "---\nname: review\ndescription: How we review\n---\n# Review {n}\n"
ORIGIN = {"Origin": "http://test"}


@pytest.mark.parametrize("kind", ["prompt", "skill"])
async def test_a_gated_move_opens_a_change_request_from_the_page(api: Api, kind: str) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    if kind == "prompt":
        made = await api.client.post(f"{T}/prompts", json={**SIMPLE, "labels": ["production"]},
                                     headers=admin)  # fmt: skip
        second = {k: v for k, v in SIMPLE.items() if k != "name"} | {"description": "two"}
        again = await api.client.post(f"{T}/prompts/greet/versions", json=second, headers=admin)
        name, move = "greet", "/ui/acme/prompts/greet/label"
    else:
        body = {"name": "review", "labels": ["production"],
                "files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=1)}]}  # fmt: skip
        made = await api.client.post(f"{T}/skills", json=body, headers=admin)
        again = await api.client.post(
            f"{T}/skills/review/versions",
            json={"files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=2)}]}, headers=admin,
        )  # fmt: skip
        name, move = "review", "/ui/acme/skills/review/label"
    assert made.status_code == 201 and again.status_code == 201, (made.text, again.text)
    gated = await api.client.patch(T, json={"approvals": {"production": 1}}, headers=admin)
    assert gated.status_code == 200, gated.text

    csrf = await api.console_sign_in(keys["editor"].removeprefix("Bearer "))
    form = {"csrf": csrf, "label": "production", "version": "2", "confirm": "yes"}
    proposed = await api.client.post(move, data=form, headers=ORIGIN)
    assert proposed.status_code == 409, proposed.text[:2000]
    assert "Open a change request" in proposed.text and "1 approval(s)" in proposed.text
    assert "Break glass" not in proposed.text  # an editor's page: no break-glass

    opened = await api.client.post("/ui/acme/change-requests", headers=ORIGIN, data={
        "csrf": csrf, "kind": kind, "name": name, "label": "production", "version": "2",
        "description": "<b>two</b> for production", "apply_at": ""})  # fmt: skip
    assert opened.status_code == 303, opened.text[:2000]
    page = await api.client.get(opened.headers["location"])
    assert "Approvals: 0 of 1" in page.text and "&lt;b&gt;two&lt;/b&gt;" in page.text
    assert 'id="withdraw"' in page.text
    request_id = opened.headers["location"].split("/")[-1].split("?")[0]
    withdrawn = await api.client.post(
        f"/ui/acme/change-requests/{request_id}/withdraw", data={"csrf": csrf}, headers=ORIGIN
    )
    assert withdrawn.status_code == 303, withdrawn.text[:2000]
    shown = await api.client.get(f"{T}/change-requests/{request_id}", headers=admin)
    assert shown.json()["state"] == "withdrawn"

    bad_time = await api.client.post("/ui/acme/change-requests", headers=ORIGIN, data={
        "csrf": csrf, "kind": kind, "name": name, "label": "production", "version": "2",
        "apply_at": "next tuesday"})  # fmt: skip
    assert bad_time.status_code == 422 and "apply at" in bad_time.text

    csrf = await api.console_sign_in(keys["admin"].removeprefix("Bearer "))
    proposed = await api.client.post(move, data={**form, "csrf": csrf}, headers=ORIGIN)
    assert proposed.status_code == 409 and "Break glass" in proposed.text
    broken = await api.client.post(
        move, data={**form, "csrf": csrf, "reason": "incident 42"}, headers=ORIGIN
    )
    assert broken.status_code == 303, broken.text[:2000]
    served = (await api.client.get(f"{T}/{kind}s/{name}", headers=admin)).json()
    assert served["labels"]["production"] == 2
