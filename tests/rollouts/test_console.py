"""Rollouts in the console: started from a prompt's page, shown with their step and sides, paused,
resumed and promoted by the page's forms; an editor may not start one on a protected label."""

from __future__ import annotations

from tests.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"
ORIGIN = {"Origin": "http://test"}


async def test_a_rollout_from_the_prompt_page(api: Api) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    made = await api.client.post(
        f"{T}/prompts", json={**SIMPLE, "labels": ["production"]}, headers=admin
    )
    assert made.status_code == 201, made.text
    second = {
        "arguments": SIMPLE["arguments"],
        "messages": [{"role": "user", "text": "Hi {{who}}"}],
    }
    assert (
        await api.client.post(f"{T}/prompts/greet/versions", json=second, headers=admin)
    ).status_code == 201
    page = await api.client.get("/ui/acme/prompts/greet")
    csrf = await api.console_sign_in(keys["editor"].removeprefix("Bearer "))
    form = {
        "csrf": csrf,
        "label": "production",
        "version": "2",
        "steps": "10,100",
        "min_seconds": "60",
    }
    refused = await api.client.post("/ui/acme/prompts/greet/rollout", data=form, headers=ORIGIN)
    assert refused.status_code == 403 and "publisher" in refused.text
    csrf = await api.console_sign_in(keys["publisher"].removeprefix("Bearer "))
    started = await api.client.post("/ui/acme/prompts/greet/rollout", data={**form, "csrf": csrf},
                                    headers=ORIGIN)  # fmt: skip
    assert started.status_code == 303, started.text
    page = await api.client.get(started.headers["location"])
    assert "rollout 1 started: 10 % of callers get v2" in page.text
    assert "v1 → v2" in page.text and "step 1 of 2" in page.text and "Pause" in page.text
    for action, state in (("pause", "paused"), ("resume", "running"), ("promote", "promoted")):
        done = await api.client.post(f"/ui/acme/prompts/greet/rollout/{action}",
                                     data={"csrf": csrf, "label": "production"}, headers=ORIGIN)  # fmt: skip
        assert done.status_code == 303, done.text
        assert state in (await api.client.get(done.headers["location"])).text
    served = await api.client.get(f"{T}/prompts/greet", headers=admin)
    assert served.json()["labels"]["production"] == 2
    bad = await api.client.post("/ui/acme/prompts/greet/rollout", headers=ORIGIN,
                                data={**form, "csrf": csrf, "steps": "10,x"})  # fmt: skip
    assert bad.status_code == 422 and "steps" in bad.text


async def test_under_approvals_the_skill_page_opens_a_change_request(api: Api) -> None:
    """A skill's page, a label that needs approvals: the start form opens a change request whose
    page shows the plan; approving it starts the rollout, which the skill's page then shows with
    its sides (and their chart)."""
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])

    def files(text: str) -> list[dict[str, str]]:
        return [{"path": "SKILL.md", "text": f"---\nname: review\ndescription: d\n---\n{text}\n"}]

    made = await api.client.post(f"{T}/skills", json={"name": "review", "files": files("one"),
                                 "labels": ["production"]}, headers=admin)  # fmt: skip
    assert made.status_code == 201, made.text
    added = await api.client.post(
        f"{T}/skills/review/versions", json={"files": files("two")}, headers=admin
    )
    assert added.status_code == 201, added.text
    gated = await api.client.patch(T, json={"approvals": {"production": 1}}, headers=admin)
    assert gated.status_code == 200, gated.text
    csrf = await api.console_sign_in(keys["publisher"].removeprefix("Bearer "))
    form = {"csrf": csrf, "label": "production", "version": "2", "steps": "25,100",
            "min_seconds": "0"}  # fmt: skip
    opened = await api.client.post("/ui/acme/skills/review/rollout", data=form, headers=ORIGIN)
    assert opened.status_code == 303, opened.text
    assert "/ui/acme/change-requests/" in opened.headers["location"]
    review = await api.client.get(opened.headers["location"])
    assert review.status_code == 200, review.text
    assert "A rollout, not a move" in review.text and "25 %, 100 %" in review.text
    request_id = opened.headers["location"].split("/")[-1].split("?")[0]
    approved = await api.client.post(
        f"{T}/change-requests/{request_id}/approve", json={}, headers=admin
    )
    assert approved.status_code == 200 and approved.json()["state"] == "applied", approved.text
    page = await api.client.get("/ui/acme/skills/review")
    assert "v1 → v2" in page.text and "step 1 of 2" in page.text
    assert f"change request {request_id}</a>" in page.text
    assert 'class="rollout-chart"' in page.text and "<title>v2: 0</title>" in page.text
