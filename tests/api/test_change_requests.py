"""Change requests over REST, against a real database: approvals gate a label, three moves apply as
one release with one change-log entry, failing tests need an admin's recorded override, break-glass
moves make open requests stale, and every refusal names its reason."""

from __future__ import annotations

import asyncpg
import pytest

from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"
CR = f"{T}/change-requests"


async def _key(api: Api, role: str, name: str) -> dict[str, str]:
    made = await api.client.post(
        f"{T}/keys", json={"role": role, "name": name, "owner": name}, headers=api.operator
    )
    assert made.status_code == 201, made.text
    return api.as_key(made.json()["secret"])


@pytest.fixture
async def team(api: Api) -> dict[str, dict[str, str]]:
    """Tenant acme, production needing two approvals, prompts a, b and c each with production at
    version 1 and a version 2; keys: the author (editor), two publishers, an admin."""
    keys = await api.tenant("acme")
    people = {
        "author": auth(keys["editor"]),
        "alice": auth(keys["publisher"]),
        "bob": await _key(api, "publisher", "bob"),
        "admin": auth(keys["admin"]),
    }
    for name in ("a", "b", "c"):
        body = {**SIMPLE, "name": name, "labels": ["production"]}
        made = await api.client.post(f"{T}/prompts", json=body, headers=people["admin"])
        assert made.status_code == 201, made.text
        second = {**SIMPLE, "description": f"{name}, second"}
        del second["name"]
        written = await api.client.post(
            f"{T}/prompts/{name}/versions", json=second, headers=people["author"]
        )
        assert written.status_code == 201, written.text
    gated = await api.client.patch(
        T, json={"approvals": {"production": 2}}, headers=people["admin"]
    )
    assert gated.status_code == 200, gated.text
    assert gated.json()["approvals"] == {"production": 2}
    return people


def _moves(*names: str, version: int = 2) -> list[dict[str, object]]:
    return [{"prompt": name, "label": "production", "version": version} for name in names]


async def test_a_release_of_three_needs_two_other_people_then_moves_in_one_change(
    api: Api, team: dict[str, dict[str, str]], superuser: asyncpg.Connection
) -> None:
    direct = await api.client.put(
        f"{T}/prompts/a/labels/production", json={"version": 2}, headers=team["alice"]
    )
    assert direct.status_code == 409, direct.text
    assert direct.json()["change_requests"] == CR
    assert "change request" in direct.json()["detail"]

    hook = await api.client.post(
        f"{T}/webhooks",
        json={"url": "https://hooks.example/releases",
              "events": ["change_request.opened", "change_request.applied"]},
        headers=team["admin"],
    )  # fmt: skip
    assert hook.status_code == 201, hook.text
    opened = await api.client.post(
        CR, json={"description": "ship v2", "moves": _moves("a", "b", "c")}, headers=team["author"]
    )
    assert opened.status_code == 201, opened.text
    editor = await _key(api, "editor", "another editor")
    by_editor = await api.client.post(f"{CR}/1/approve", json={}, headers=editor)
    assert by_editor.status_code == 403 and "publisher" in by_editor.json()["detail"]
    request = opened.json()
    assert (request["id"], request["state"], request["approvals_needed"]) == (1, "open", 2)
    url = f"{CR}/{request['id']}"

    own = await api.client.post(f"{url}/approve", json={}, headers=team["author"])
    assert own.status_code == 403 and "author" in own.json()["detail"]
    first = await api.client.post(f"{url}/approve", json={"comment": "lgtm"}, headers=team["alice"])
    assert first.status_code == 200, first.text
    assert first.json()["state"] == "open" and len(first.json()["approved_by"]) == 1
    twice = await api.client.post(f"{url}/approve", json={}, headers=team["alice"])
    assert twice.status_code == 409 and "already" in twice.json()["detail"]
    seq_before = await superuser.fetchval("SELECT max(seq) FROM change_log")

    second = await api.client.post(f"{url}/approve", json={}, headers=team["bob"])
    assert second.status_code == 200, second.text
    assert second.json()["state"] == "applied"
    for name in ("a", "b", "c"):
        labels = (await api.client.get(f"{T}/prompts/{name}/labels", headers=team["alice"])).json()
        assert labels["production"] == 2
    kinds = await superuser.fetch(
        "SELECT kind, label, detail FROM change_log WHERE seq > $1 ORDER BY seq", seq_before
    )
    served = [row for row in kinds if not row["kind"].startswith("change_request.") or
              row["kind"] == "change_request.applied"]  # fmt: skip
    assert [row["kind"] for row in served] == ["change_request.applied"]  # one entry, three moves
    assert served[0]["label"] == "production"
    audit = await superuser.fetch(
        "SELECT action, after FROM audit_log WHERE target LIKE 'prompt:%@production' "
        "AND action = 'label.move' ORDER BY id DESC LIMIT 3"
    )
    assert all('"change_request": 1' in row["after"] for row in audit), audit

    shown = (await api.client.get(url, headers=team["author"])).json()
    assert [r["kind"] for r in shown["reviews"]] == ["approve", "approve", "apply"]
    sent = await superuser.fetch(
        "SELECT event_type, payload FROM webhook_deliveries ORDER BY created_at, id"
    )
    assert [row["event_type"] for row in sent] == [
        "change_request.opened", "change_request.applied"
    ]  # fmt: skip
    assert '"moves": [{"label": "production", "prompt": "a", "version": 2}' in sent[1]["payload"]
    listed = await api.client.get(CR, params={"state": "applied"}, headers=team["author"])
    assert [r["id"] for r in listed.json()] == [1]


async def test_failing_tests_need_an_admins_recorded_override(
    api: Api, team: dict[str, dict[str, str]], superuser: asyncpg.Connection
) -> None:
    tests = [{"name": "says-hi", "arguments": {"who": "Ann"},
              "expect": {"contains": ["Hi Ann"]}}]  # fmt: skip
    patched = await api.client.patch(
        f"{T}/prompts/a", json={"tests": tests}, headers=team["author"]
    )
    assert patched.status_code == 200, patched.text
    run = await api.client.post(f"{T}/prompts/a/test", json={"version": 2}, headers=team["author"])
    assert run.status_code == 200, run.text
    assert run.json()["failed"] == 1
    assert "does not contain 'Hi Ann'" in run.json()["cases"][0]["failures"][0]

    opened = await api.client.post(
        CR, json={"description": "a v2", "moves": _moves("a")}, headers=team["author"]
    )
    url = f"{CR}/{opened.json()['id']}"
    shown = (await api.client.get(url, headers=team["alice"])).json()
    assert shown["checks"]["tests_failed"] == 1
    assert shown["moves"][0]["tests"]["cases"][0]["passed"] is False
    blocked = await api.client.post(f"{url}/approve", json={}, headers=team["alice"])
    assert blocked.status_code == 409 and "override" in blocked.json()["detail"]
    not_admin = await api.client.post(
        f"{url}/approve", json={"override": "known"}, headers=team["alice"]
    )
    assert not_admin.status_code == 403
    overridden = await api.client.post(
        f"{url}/approve", json={"override": "the greeting changes on purpose"},
        headers=team["admin"],
    )  # fmt: skip
    assert overridden.status_code == 200, overridden.text
    assert overridden.json()["approved_by"] == [overridden.json()["approved_by"][0]]
    after = await api.client.post(f"{url}/approve", json={}, headers=team["alice"])
    assert after.json()["state"] == "applied"  # the override holds for this revision
    reason = await superuser.fetchval(
        "SELECT after->>'reason' FROM audit_log WHERE action = 'change_request.override'"
    )
    assert reason == "the greeting changes on purpose"


async def test_break_glass_is_audited_and_makes_a_request_stale(
    api: Api, team: dict[str, dict[str, str]], superuser: asyncpg.Connection
) -> None:
    opened = await api.client.post(
        CR, json={"description": "b v2", "moves": _moves("b")}, headers=team["author"]
    )
    url = f"{CR}/{opened.json()['id']}"
    refused = await api.client.put(
        f"{T}/prompts/b/labels/production", json={"version": 2, "reason": "outage"},
        headers=team["alice"],
    )  # fmt: skip
    assert refused.status_code == 403 and "admin" in refused.json()["detail"]
    glass = await api.client.put(
        f"{T}/prompts/b/labels/production", json={"version": 2, "reason": "outage fix"},
        headers=team["admin"],
    )  # fmt: skip
    assert glass.status_code == 200, glass.text
    row = await superuser.fetchrow(
        "SELECT action, after FROM audit_log WHERE action = 'label.break_glass'"
    )
    assert row is not None and "outage fix" in row["after"]
    assert (
        await superuser.fetchval("SELECT count(*) FROM change_log WHERE kind = 'label.break_glass'")
        == 1
    )

    shown = (await api.client.get(url, headers=team["author"])).json()
    assert shown["state"] == "stale"
    assert "was moved (from version 1 to version 2)" in shown["stale_reason"]
    approve = await api.client.post(f"{url}/approve", json={}, headers=team["alice"])
    assert approve.status_code == 409 and "stale" in approve.json()["detail"]


async def test_edits_reset_approvals_and_refusals_name_the_problem(
    api: Api, team: dict[str, dict[str, str]]
) -> None:
    opened = await api.client.post(
        CR, json={"description": "c v2", "moves": _moves("c")}, headers=team["author"]
    )
    url = f"{CR}/{opened.json()['id']}"
    await api.client.post(f"{url}/approve", json={}, headers=team["alice"])
    edited = await api.client.patch(url, json={"moves": _moves("c", "a")}, headers=team["author"])
    assert edited.status_code == 200, edited.text
    assert (edited.json()["revision"], edited.json()["approved_by"]) == (2, [])
    other = await api.client.patch(url, json={"description": "mine"}, headers=team["alice"])
    assert other.status_code == 403
    # Archiving a prompt production serves would change production without a request: admins only.
    archived = await api.client.post(f"{T}/prompts/c/archive", headers=team["alice"])
    assert archived.status_code == 409 and "admin" in archived.json()["detail"]
    withdrawn = await api.client.post(f"{url}/withdraw", headers=team["author"])
    assert withdrawn.json()["state"] == "withdrawn"
    late = await api.client.post(f"{url}/approve", json={}, headers=team["bob"])
    assert late.status_code == 409 and "withdrawn" in late.json()["detail"]

    for body, status, words in (
        ({"description": "x", "moves": _moves("ghost")}, 404, "prompt 'ghost' not found"),
        ({"description": "x", "moves": _moves("a", version=1)}, 422, "at version 1 already"),
        ({"description": "x", "moves": _moves("a", version=9)}, 404, "has no version 9"),
        ({"description": "x", "moves": [{"label": "production", "version": 2}]}, 422,
         "name a prompt or a skill"),
        ({"description": "x", "moves": _moves("a", "a")}, 422, "moved twice"),
        ({"description": "x", "moves": _moves("a"), "apply_at": "2001-01-01T00:00:00Z"}, 422,
         "future"),
    ):  # fmt: skip
        answer = await api.client.post(CR, json=body, headers=team["author"])
        assert answer.status_code == status, (body, answer.text)
        assert words in answer.text, answer.text
    reader_keys = await _key(api, "reader", "r")
    assert (await api.client.post(
        CR, json={"description": "x", "moves": _moves("a")}, headers=reader_keys
    )).status_code == 403  # fmt: skip
    missing = await api.client.get(f"{CR}/999", headers=team["author"])
    assert missing.status_code == 404
    unprotected = await api.client.patch(
        T, json={"approvals": {"staging": 1}}, headers=team["admin"]
    )
    assert unprotected.status_code == 422 and "not protected" in unprotected.text


async def test_a_skill_moves_with_its_tests_checked_and_its_label_gated(
    api: Api, team: dict[str, dict[str, str]]
) -> None:
    def folder(text: str) -> list[dict[str, str]]:
        return [{"path": "SKILL.md", "text": f"---\nname: review\ndescription: d\n---\n{text}\n"}]

    made = await api.client.post(
        f"{T}/skills",
        json={"name": "review", "files": folder("Check the tests."),
              "tests": [{"name": "asks-for-tests", "expect": {"contains": ["tests"]}}]},
        headers=team["admin"],
    )  # fmt: skip
    assert made.status_code == 201, made.text
    assert made.json()["tests"]["passed"] == 1  # run on the version written
    published = await api.client.put(
        f"{T}/skills/review/labels/production", json={"version": 1, "reason": "first release"},
        headers=team["admin"],
    )  # fmt: skip
    assert published.status_code == 200, published.text
    second = await api.client.post(
        f"{T}/skills/review/versions", json={"files": folder("Ship it.")}, headers=team["author"]
    )
    assert second.json()["tests"]["failed"] == 1  # shown, not blocking
    direct = await api.client.put(
        f"{T}/skills/review/labels/production", json={"version": 2}, headers=team["alice"]
    )
    assert direct.status_code == 409 and "change request" in direct.json()["detail"]
    on_demand = await api.client.post(
        f"{T}/skills/review/test", json={"label": "production"}, headers=team["author"]
    )
    assert (on_demand.json()["version"], on_demand.json()["passed"]) == (1, 1)
    with_arguments = await api.client.patch(
        f"{T}/skills/review",
        json={"tests": [{"name": "x", "arguments": {"a": "b"}, "expect": {"contains": ["b"]}}]},
        headers=team["author"],
    )  # fmt: skip
    assert with_arguments.status_code == 422 and "takes no arguments" in with_arguments.text

    opened = await api.client.post(
        CR, json={"description": "skill v2",
                  "moves": [{"skill": "review", "label": "production", "version": 2}]},
        headers=team["author"],
    )  # fmt: skip
    assert opened.status_code == 201, opened.text
    shown = (await api.client.get(f"{CR}/{opened.json()['id']}", headers=team["alice"])).json()
    move = shown["moves"][0]
    assert (move["skill"], move["current"], move["tests"]["failed"]) == ("review", 1, 1)
    assert any(f["path"] == "SKILL.md" and f["diff"] for f in move["diff"]["files"])
    assert shown["checks"]["tests_failed"] == 1


async def test_a_move_that_breaks_callers_needs_an_override(
    api: Api, team: dict[str, dict[str, str]]
) -> None:
    breaking = {"arguments": [{"name": "who", "required": True}, {"name": "tone", "required": True}],
                "messages": [{"role": "user", "content": {"type": "text",
                              "text": "Hello {{who}}, {{tone}}!"}}]}  # fmt: skip
    written = await api.client.post(
        f"{T}/prompts/c/versions", json=breaking, headers=team["author"]
    )
    assert written.json()["version"] == 3
    opened = await api.client.post(
        CR, json={"description": "c v3", "moves": _moves("c", version=3)}, headers=team["author"]
    )
    url = f"{CR}/{opened.json()['id']}"
    shown = (await api.client.get(url, headers=team["alice"])).json()
    assert shown["checks"]["breaking"] == 1
    assert "tone" in shown["moves"][0]["breaking"][0]["detail"]
    refused = await api.client.post(f"{url}/approve", json={}, headers=team["alice"])
    assert refused.status_code == 409 and "breaking contract" in refused.json()["detail"]
