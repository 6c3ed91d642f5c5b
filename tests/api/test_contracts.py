"""Argument contracts: a protected label is not moved onto a version that breaks what its callers
send, unless the publisher forces it (and the audit log says so); the diff lists every change."""

from __future__ import annotations

from typing import Any

import pytest

from registry.prompts import contracts
from registry.prompts.schemas import ArgumentOut
from tests.conftest import Api, auth

BASE = "/api/v1/tenants/acme/prompts/ask"
V1_ARGUMENTS: list[dict[str, Any]] = [
    {"name": "topic", "required": True, "enum": ["billing", "shipping"], "max_length": 20},
    {"name": "tone", "default": "warm", "pattern": "[a-z]+"},
]


def version(arguments: list[dict[str, Any]]) -> dict[str, Any]:
    text = " ".join("{{" + a["name"] + "}}" for a in arguments) or "no arguments"
    return {"arguments": arguments, "messages": [{"role": "user", "text": text}]}


@pytest.fixture
async def acme(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme")
    created = await api.client.post(
        "/api/v1/tenants/acme/prompts",
        json={"name": "ask", **version(V1_ARGUMENTS), "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )
    assert created.status_code == 201, created.text
    return keys


def with_change(**changes: Any) -> list[dict[str, Any]]:
    """V1's arguments with one argument's fields replaced (None removes a field)."""
    arguments = [dict(a) for a in V1_ARGUMENTS]
    name = changes.pop("argument")
    for argument in arguments:
        if argument["name"] == name:
            for key, value in changes.items():
                if value is None:
                    argument.pop(key, None)
                else:
                    argument[key] = value
    return arguments


BREAKING = {
    "removed": [V1_ARGUMENTS[0]],
    "renamed": [V1_ARGUMENTS[0], {**V1_ARGUMENTS[1], "name": "voice"}],
    "new required": [*V1_ARGUMENTS, {"name": "locale", "required": True}],
    "made required": with_change(argument="tone", required=True, default=None),
    "enum narrowed": with_change(argument="topic", enum=["billing"]),
    "enum added": with_change(argument="tone", enum=["warm", "dry"]),
    "pattern tightened": with_change(argument="tone", pattern="[a-z]{1,5}"),
    "max_length lowered": with_change(argument="topic", max_length=10),
    "max_length added": with_change(argument="tone", max_length=10),
    "default removed": with_change(argument="tone", default=None),
}
COMPATIBLE = {
    "new optional": [*V1_ARGUMENTS, {"name": "locale"}],
    "enum widened": with_change(argument="topic", enum=["billing", "shipping", "returns"]),
    "enum removed": with_change(argument="topic", enum=None),
    "pattern removed": with_change(argument="tone", pattern=None),
    "max_length raised": with_change(argument="topic", max_length=40),
    "default changed": with_change(argument="tone", default="dry"),
    "made optional": with_change(argument="topic", required=False),
}


@pytest.mark.parametrize("case", sorted(BREAKING))
async def test_a_breaking_move_is_refused_then_forced(
    api: Api, acme: dict[str, str], case: str
) -> None:
    written = await api.client.post(
        f"{BASE}/versions", json=version(BREAKING[case]), headers=auth(acme["editor"])
    )
    assert written.status_code == 201, written.text
    refused = await api.client.put(
        f"{BASE}/labels/production", json={"version": 2}, headers=auth(acme["publisher"])
    )
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert "breaks the arguments" in problem["detail"]
    assert problem["detail"].endswith("Send force=true to do it anyway (the audit log records it)")
    assert problem["overridable_by"] == "force" and "force" not in problem["reason"]
    assert problem["breaking"] and all(b["breaking"] for b in problem["breaking"])
    labels = await api.client.get(f"{BASE}/labels", headers=auth(acme["reader"]))
    assert labels.json()["production"] == 1  # nothing moved
    forced = await api.client.put(
        f"{BASE}/labels/production?force=true", json={"version": 2}, headers=auth(acme["publisher"])
    )
    assert forced.status_code == 200, forced.text
    audit = await api.client.get(
        "/api/v1/tenants/acme/audit?action=label.move", headers=auth(acme["admin"])
    )
    entry = audit.json()["items"][0]
    assert entry["after"]["force"] is True and entry["after"]["breaking"]


@pytest.mark.parametrize("case", sorted(COMPATIBLE))
async def test_a_compatible_move_needs_no_force(api: Api, acme: dict[str, str], case: str) -> None:
    written = await api.client.post(
        f"{BASE}/versions",
        json={**version(COMPATIBLE[case]), "labels": ["production"]},
        headers=auth(acme["publisher"]),
    )
    assert written.status_code == 201, written.text
    assert written.json()["labels_moved"] == ["production"]


async def test_writes_that_move_a_protected_label_are_checked_too(
    api: Api, acme: dict[str, str]
) -> None:
    """A write reads what the label serves with its own statement: the same changes are found as
    by a move of the label alone (compare's own answer on the two argument lists), for every kind
    of break (a refused write leaves nothing, so each is tried on the same prompt)."""
    for case in sorted(BREAKING):
        body = {**version(BREAKING[case]), "labels": ["production"]}
        refused = await api.client.post(
            f"{BASE}/versions", json=body, headers=auth(acme["publisher"])
        )
        assert refused.status_code == 409, (case, refused.text)
        expected = contracts.compare(
            [ArgumentOut(**a) for a in V1_ARGUMENTS], [ArgumentOut(**a) for a in BREAKING[case]]
        )
        assert refused.json()["breaking"] == [c.model_dump() for c in expected if c.breaking], case
    versions = await api.client.get(f"{BASE}/versions", headers=auth(acme["reader"]))
    assert [v["version"] for v in versions.json()["items"]] == [1]  # no half-written version
    body = {**version(BREAKING["removed"]), "labels": ["production"]}
    forced = await api.client.post(
        f"{BASE}/versions?force=true", json=body, headers=auth(acme["publisher"])
    )
    assert forced.status_code == 201 and forced.json()["labels_moved"] == ["production"]


async def test_unprotected_labels_move_freely(api: Api, acme: dict[str, str]) -> None:
    body = {**version(BREAKING["removed"]), "labels": ["staging"]}
    moved = await api.client.post(f"{BASE}/versions", json=body, headers=auth(acme["editor"]))
    assert moved.status_code == 201 and moved.json()["labels_moved"] == ["staging"]


async def test_the_diff_lists_contract_changes(api: Api, acme: dict[str, str]) -> None:
    arguments: list[dict[str, Any]] = [
        {"name": "topic", "required": True, "enum": ["billing"], "max_length": 20},
        {"name": "locale"},
    ]
    await api.client.post(f"{BASE}/versions", json=version(arguments), headers=auth(acme["editor"]))
    diff = await api.client.get(f"{BASE}/diff?from=1&to=2", headers=auth(acme["reader"]))
    assert diff.status_code == 200, diff.text
    changes = [(c["argument"], c["change"], c["breaking"]) for c in diff.json()["contract"]]
    assert changes == [
        ("tone", "removed", True),
        ("topic", "enum", True),
        ("locale", "added", False),
    ]


def test_compare_is_what_the_moves_use() -> None:
    old = [ArgumentOut(name="a", required=False, default="x")]
    new = [ArgumentOut(name="a", required=True)]
    changes = contracts.compare(old, new)
    assert [(c.change, c.breaking) for c in changes] == [("required", True), ("default", False)]
