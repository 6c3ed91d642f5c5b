"""The rules of change requests stated one by one, off the main path (issue 68): an admin who
wrote a request never approves it; every move's label is checked for the reviewer's role; a label
that needs approvals is neither moved nor deleted directly, for a prompt and a skill alike."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.conftest import SIMPLE, Api, auth

T = "/api/v1/tenants/acme"
CR = f"{T}/change-requests"
SKILL_MD = "---\nname: review\ndescription: How we review\n---\n# Review {n}\n"


async def _tenant(api: Api) -> dict[str, dict[str, str]]:
    """A prompt and a skill, each at version 1 on production and staging with a version 2;
    production needs one approval, staging none; staging is protected too."""
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    labels = ["production", "staging"]
    made = await api.client.post(f"{T}/prompts", json={**SIMPLE, "labels": labels}, headers=admin)
    assert made.status_code == 201, made.text
    second = {k: v for k, v in SIMPLE.items() if k != "name"} | {"description": "two"}
    assert (await api.client.post(f"{T}/prompts/greet/versions", json=second,
                                  headers=admin)).status_code == 201  # fmt: skip
    skill: dict[str, Any] = {"name": "review", "labels": labels,
                             "files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=1)}]}  # fmt: skip
    assert (await api.client.post(f"{T}/skills", json=skill, headers=admin)).status_code == 201
    again = {"files": [{"path": "SKILL.md", "text": SKILL_MD.format(n=2)}]}
    assert (await api.client.post(f"{T}/skills/review/versions", json=again,
                                  headers=admin)).status_code == 201  # fmt: skip
    gated = await api.client.patch(
        T, json={"protected_labels": labels, "approvals": {"production": 1}}, headers=admin
    )
    assert gated.status_code == 200, gated.text
    return {role: auth(secret) for role, secret in keys.items()}


async def test_an_admin_who_wrote_a_request_never_approves_it(api: Api) -> None:
    keys = await _tenant(api)
    moves = [{"prompt": "greet", "label": "production", "version": 2}]
    opened = await api.client.post(CR, json={"description": "d", "moves": moves},
                                   headers=keys["admin"])  # fmt: skip
    assert opened.status_code == 201, opened.text
    own = await api.client.post(f"{CR}/1/approve", json={}, headers=keys["admin"])
    assert own.status_code == 403 and "author" in own.json()["detail"], own.text
    overridden = await api.client.post(
        f"{CR}/1/approve", json={"override": "mine"}, headers=keys["admin"]
    )
    assert overridden.status_code == 403, overridden.text


async def test_every_moves_label_is_checked_for_the_reviewers_role(api: Api) -> None:
    """A request moving an unprotected label first and a protected one second: an editor's
    approval is refused for the second move's label."""
    keys = await _tenant(api)
    free = await api.client.patch(T, json={"protected_labels": ["production"]},
                                  headers=keys["admin"])  # fmt: skip
    assert free.status_code == 200, free.text
    moves = [{"prompt": "greet", "label": "staging", "version": 2},
             {"skill": "review", "label": "production", "version": 2}]  # fmt: skip
    opened = await api.client.post(CR, json={"description": "d", "moves": moves},
                                   headers=keys["publisher"])  # fmt: skip
    assert opened.status_code == 201, opened.text
    made = await api.client.post(f"{T}/keys", json={"role": "editor", "owner": "eve"},
                                 headers=api.operator)  # fmt: skip
    editor = api.as_key(made.json()["secret"])
    refused = await api.client.post(f"{CR}/1/approve", json={}, headers=editor)
    assert refused.status_code == 403 and "production" in refused.json()["detail"], refused.text


@pytest.mark.parametrize("kind", ["prompt", "skill"])
async def test_a_gated_label_is_neither_moved_nor_deleted_directly(api: Api, kind: str) -> None:
    keys = await _tenant(api)
    name = "greet" if kind == "prompt" else "review"
    url = f"{T}/{kind}s/{name}/labels/production"
    moved = await api.client.put(url, json={"version": 2}, headers=keys["publisher"])
    assert moved.status_code == 409 and "change request" in moved.json()["detail"], moved.text
    deleted = await api.client.delete(url, headers=keys["publisher"])
    assert deleted.status_code in (403, 409), deleted.text
    shown = (await api.client.get(f"{T}/{kind}s/{name}", headers=keys["reader"])).json()
    assert shown["labels"]["production"] == 1
    broken = await api.client.put(
        url, json={"version": 2, "reason": "incident"}, headers=keys["admin"]
    )
    assert broken.status_code == 200, broken.text


async def test_a_tools_enum_is_matched_exactly(api: Api) -> None:
    """An argument's enum is compared as written: a value differing only in case, or in a space,
    is refused by the tool (the model reads why), by prompts/get and by the REST render alike."""
    from tests.mcp.test_stateless import Stateless, meta
    from tests.mcp.test_tools import tenant

    keys = await tenant(api, tools=True)
    client = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    for value in ("Billing", "BILLING", "billing ", "billinG"):
        called = await client.post(
            "tools/call", {"_meta": meta(), "name": "support_reply",
                           "arguments": {"topic": value}}, **{"Mcp-Name": "support_reply"},
        )  # fmt: skip
        result = called.json()["result"]
        assert result.get("isError") is True and "must be one of" in result["content"][0]["text"]
        got = await client.post(
            "prompts/get", {"_meta": meta(), "name": "support.reply",
                            "arguments": {"topic": value}}, **{"Mcp-Name": "support.reply"},
        )  # fmt: skip
        assert got.json()["error"]["code"] == -32602, got.text
        rendered = await api.client.post(
            f"{T}/prompts/support.reply/render", json={"arguments": {"topic": value}},
            headers=auth(keys["reader"]),
        )  # fmt: skip
        assert rendered.status_code == 422, rendered.text
    fine = await client.post(
        "tools/call", {"_meta": meta(), "name": "support_reply", "arguments": {"topic": "billing"}},
        **{"Mcp-Name": "support_reply"},
    )  # fmt: skip
    assert "isError" not in fine.json()["result"]
