"""Prompts, versions, labels, render, blobs, diff over REST, against the real database."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

import asyncpg
import pytest

from tests.api.conftest import SIMPLE, Api, auth

P = "/api/v1/tenants/acme/prompts"


@pytest.fixture
async def keys(api: Api) -> dict[str, str]:
    return await api.tenant("acme")


def version_body(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "arguments": [{"name": "who", "required": True}],
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        **extra,
    }


async def test_create_get_and_list(api: Api, keys: dict[str, str]) -> None:
    c = api.client
    created = await c.post(P, json={**SIMPLE, "tags": ["greeting"]}, headers=auth(keys["editor"]))
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["created"] is True
    assert body["version"] == 1
    assert body["prompt"]["labels"] == {"latest": 1}
    assert created.headers["etag"] == '"1"'
    assert (await c.post(P, json=SIMPLE, headers=auth(keys["editor"]))).status_code == 409
    assert (await c.post(P, json=SIMPLE, headers=auth(keys["reader"]))).status_code == 403

    got = await c.get(f"{P}/greet", headers=auth(keys["reader"]))
    assert got.json()["latest"]["arguments"][0]["name"] == "who"
    assert got.json()["latest"]["messages"][0]["content"] == {
        "type": "text",
        "text": "Hello {{who}}!",
    }
    assert (await c.get(f"{P}/nope", headers=auth(keys["reader"]))).status_code == 404

    for i in range(5):
        await c.post(
            P,
            json={**SIMPLE, "name": f"other-{i}", "title": f"Other {i}"},
            headers=auth(keys["editor"]),
        )
    names: list[str] = []
    cursor = None
    while True:
        page = await c.get(
            P,
            params={"limit": 2, **({"cursor": cursor} if cursor else {})},
            headers=auth(keys["reader"]),
        )
        names += [p["name"] for p in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert names == ["greet", "other-0", "other-1", "other-2", "other-3", "other-4"]
    search = await c.get(P, params={"q": "other 3"}, headers=auth(keys["reader"]))
    assert [p["name"] for p in search.json()["items"]] == ["other-3"]
    by_prefix = await c.get(P, params={"prefix": "oth", "limit": 100}, headers=auth(keys["reader"]))
    assert len(by_prefix.json()["items"]) == 5
    by_tag = await c.get(P, params={"tag": "greeting"}, headers=auth(keys["reader"]))
    assert [p["name"] for p in by_tag.json()["items"]] == ["greet"]


async def test_versions_no_op_if_match_and_restore(api: Api, keys: dict[str, str]) -> None:
    c = api.client
    editor = auth(keys["editor"])
    await c.post(P, json=SIMPLE, headers=editor)
    second = await c.post(f"{P}/greet/versions", json=version_body("Hi {{who}}"), headers=editor)
    assert second.status_code == 201
    assert second.json()["version"] == 2
    same = await c.post(
        f"{P}/greet/versions",
        json=version_body("Hi {{who}}", commit_message="again"),
        headers=editor,
    )
    assert same.status_code == 200
    assert same.json()["created"] is False
    assert "identical to version 2" in same.json()["detail"]

    stale = await c.post(
        f"{P}/greet/versions",
        json=version_body("Yo {{who}}"),
        headers={**editor, "If-Match": '"1"'},
    )
    assert stale.status_code == 412
    assert "at version 2, not 1" in stale.json()["detail"]
    ok = await c.post(
        f"{P}/greet/versions",
        json=version_body("Yo {{who}}"),
        headers={**editor, "If-Match": '"2"'},
    )
    assert ok.status_code == 201
    bad = await c.post(
        f"{P}/greet/versions", json=version_body("x"), headers={**editor, "If-Match": "abc"}
    )
    assert bad.status_code == 422

    restored = await c.post(f"{P}/greet/versions/1/restore", headers=editor)
    assert restored.status_code == 201
    assert restored.json()["version"] == 4
    v4 = (await c.get(f"{P}/greet/versions/4", headers=editor)).json()
    v1 = (await c.get(f"{P}/greet/versions/1", headers=editor)).json()
    assert v4["content_hash"] == v1["content_hash"]
    assert v4["commit_message"] == "restore version 1"

    listing = await c.get(f"{P}/greet/versions", params={"limit": 3}, headers=editor)
    assert [v["version"] for v in listing.json()["items"]] == [4, 3, 2]
    tail = await c.get(
        f"{P}/greet/versions", params={"cursor": listing.json()["next_cursor"]}, headers=editor
    )
    assert [v["version"] for v in tail.json()["items"]] == [1]
    assert (await c.get(f"{P}/greet/versions/9", headers=editor)).status_code == 404


async def test_concurrent_writers_get_distinct_numbers_and_no_lost_update(
    api: Api, keys: dict[str, str]
) -> None:
    c = api.client
    editor = auth(keys["editor"])
    await c.post(P, json=SIMPLE, headers=editor)
    writes = await asyncio.gather(
        *(
            c.post(f"{P}/greet/versions", json=version_body(f"v{i} {{{{who}}}}"), headers=editor)
            for i in range(8)
        )
    )
    assert all(w.status_code == 201 for w in writes)
    assert sorted(w.json()["version"] for w in writes) == list(range(2, 10))

    based_on_9 = {**editor, "If-Match": '"9"'}
    racing = await asyncio.gather(
        *(
            c.post(
                f"{P}/greet/versions", json=version_body(f"r{i} {{{{who}}}}"), headers=based_on_9
            )
            for i in range(6)
        )
    )
    statuses = sorted(r.status_code for r in racing)
    assert statuses == [201, 412, 412, 412, 412, 412]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (version_body("Hello {{who}"), 422, "unclosed tag"),
        (version_body("Hi\n  {{#who}}x"), 422, "section 'who' is never closed at line 2, column 3"),
        (version_body("Hi {{whom}}"), 422, "messages[0]: unknown variable 'whom'"),
        (
            {**version_body("x"), "arguments": [{"name": "a", "pattern": "(x)\\1"}]},
            422,
            "arguments[0].pattern",
        ),
        (
            {**version_body("x"), "arguments": [{"name": "a", "enum": ["x"], "default": "y"}]},
            422,
            "arguments[0].default",
        ),
        (
            {**version_body("x"), "arguments": [{"name": "a", "required": True, "default": "y"}]},
            422,
            "cannot have a default",
        ),
        (
            {**version_body("x"), "arguments": [{"name": "who"}, {"name": "who"}]},
            422,
            "declared twice",
        ),
        ({"messages": []}, 422, "messages"),
        ({"messages": [{"role": "system", "content": {"type": "text", "text": "x"}}]}, 422, "role"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "image", "mimeType": "image/png", "data": "%%%"},
                    }
                ]
            },
            422,
            "not valid base64",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "image", "mimeType": "image/png", "blob": "a" * 64},
                    }
                ]
            },
            422,
            "has not been uploaded",
        ),
    ],
)
async def test_bad_versions_are_refused_with_the_reason(
    api: Api,
    keys: dict[str, str],
    superuser: asyncpg.Connection,
    body: dict[str, Any],
    status: int,
    fragment: str,
) -> None:
    await api.client.post(P, json=SIMPLE, headers=auth(keys["editor"]))
    response = await api.client.post(f"{P}/greet/versions", json=body, headers=auth(keys["editor"]))
    assert response.status_code == status, response.text
    assert fragment in response.text
    assert await superuser.fetchval("SELECT count(*) FROM prompt_versions") == 1


async def test_template_error_reports_line_and_column(api: Api, keys: dict[str, str]) -> None:
    response = await api.client.post(P, json={**SIMPLE, "messages": [
        {"role": "user", "content": {"type": "text", "text": "ok"}},
        {"role": "assistant", "content": {"type": "text", "text": "line one\n  {{/who}}"}},
    ]}, headers=auth(keys["editor"]))  # fmt: skip
    assert response.status_code == 422
    problem = response.json()
    assert problem["code"] == "template_error"
    assert (problem["line"], problem["column"]) == (2, 3)
    assert problem["detail"].startswith("messages[1].content.text:")


async def test_labels_protection_history_and_latest(api: Api, keys: dict[str, str]) -> None:
    c = api.client
    await c.post(P, json=SIMPLE, headers=auth(keys["editor"]))
    await c.post(
        f"{P}/greet/versions", json=version_body("v2 {{who}}"), headers=auth(keys["editor"])
    )

    denied = await c.put(
        f"{P}/greet/labels/production", json={"version": 1}, headers=auth(keys["editor"])
    )
    assert denied.status_code == 403
    assert "publisher role" in denied.json()["detail"]
    staging = await c.put(
        f"{P}/greet/labels/staging", json={"version": 2}, headers=auth(keys["editor"])
    )
    assert staging.status_code == 200
    assert staging.json()["version"] == 2
    prod = await c.put(
        f"{P}/greet/labels/production", json={"version": 2}, headers=auth(keys["publisher"])
    )
    assert prod.status_code == 200
    rollback = await c.put(
        f"{P}/greet/labels/production", json={"version": 1}, headers=auth(keys["publisher"])
    )
    assert rollback.json()["version"] == 1
    assert (
        await c.put(f"{P}/greet/labels/latest", json={"version": 1}, headers=auth(keys["admin"]))
    ).status_code == 422
    assert (
        await c.put(f"{P}/greet/labels/Bad Label", json={"version": 1}, headers=auth(keys["admin"]))
    ).status_code == 422
    assert (
        await c.put(f"{P}/greet/labels/qa", json={"version": 7}, headers=auth(keys["admin"]))
    ).status_code == 404

    labels = await c.get(f"{P}/greet/labels", headers=auth(keys["reader"]))
    assert labels.json() == {"latest": 2, "production": 1, "staging": 2}
    history = await c.get(f"{P}/greet/labels/production/history", headers=auth(keys["reader"]))
    assert [(h["from_version"], h["to_version"]) for h in history.json()["items"]] == [
        (2, 1),
        (None, 2),
    ]

    assert (
        await c.delete(f"{P}/greet/labels/staging", headers=auth(keys["editor"]))
    ).status_code == 204
    assert (
        await c.delete(f"{P}/greet/labels/staging", headers=auth(keys["editor"]))
    ).status_code == 404
    everything = await c.get(f"{P}/greet/history", headers=auth(keys["reader"]))
    moves = [(h["label"], h["from_version"], h["to_version"]) for h in everything.json()["items"]]
    assert moves[0] == ("staging", 2, None)
    assert ("latest", 1, 2) in moves


async def test_render_rules_match_the_design(api: Api, keys: dict[str, str]) -> None:
    c = api.client
    body = {
        "name": "ticket",
        "description": "Summarise a ticket",
        "labels": ["production"],
        "arguments": [
            {"name": "id", "required": True, "pattern": "[A-Z]+-[0-9]+"},
            {"name": "tone", "enum": ["formal", "casual"], "default": "formal"},
            {"name": "extra", "max_length": 5},
        ],
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Ticket {{id}} ({{tone}}){{#extra}} +{{extra}}{{/extra}}"}},
            {"role": "assistant", "content": {"type": "resource", "resource": {"uri": "ticket://{{id}}", "mimeType": "text/plain", "text": "Body of {{id}}"}}},
        ],
    }  # fmt: skip
    assert (await c.post(P, json=body, headers=auth(keys["publisher"]))).status_code == 201
    render = f"{P}/ticket/render"
    ok = await c.post(render, json={"arguments": {"id": "AB-1"}}, headers=auth(keys["reader"]))
    assert ok.status_code == 200
    answer = ok.json()
    receipt = answer.pop("_meta")["dev.prompt-registry/receipt"]  # (tests/test_receipts.py)
    assert (receipt["prompt"], receipt["version"], receipt["label"]) == ("ticket", 1, "production")
    assert answer == {
        "description": "Summarise a ticket",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Ticket AB-1 (formal)"}},
            {"role": "assistant", "content": {"type": "resource", "resource": {
                "uri": "ticket://AB-1", "mimeType": "text/plain", "text": "Body of AB-1"}}},
        ],
    }  # fmt: skip
    cases = [
        ({}, "missing required argument 'id'"),
        ({"id": "x"}, "argument 'id' does not match"),
        ({"id": "AB-1", "tone": "rude"}, "argument 'tone' must be one of"),
        ({"id": "AB-1", "extra": "toolong"}, "argument 'extra' is 7 characters long"),
        ({"id": "AB-1", "nope": "1"}, "unknown argument 'nope'"),
        ({"id": 5}, "argument 'id' must be a string"),
    ]
    for arguments, message in cases:
        response = await c.post(render, json={"arguments": arguments}, headers=auth(keys["reader"]))
        assert response.status_code == 422, arguments
        assert response.json()["code"] == "invalid_argument"
        assert message in response.json()["detail"]

    v2 = {k: v for k, v in body.items() if k != "name"} | {"description": "v2", "labels": []}
    assert (
        await c.post(f"{P}/ticket/versions", json=v2, headers=auth(keys["editor"]))
    ).status_code == 201
    by_label = await c.post(
        render, json={"arguments": {"id": "AB-1"}, "label": "latest"}, headers=auth(keys["reader"])
    )
    assert by_label.json()["description"] == "v2"
    default = await c.post(render, json={"arguments": {"id": "AB-1"}}, headers=auth(keys["reader"]))
    assert default.json()["description"] == "Summarise a ticket"  # production still at 1
    pinned = await c.post(
        render, json={"arguments": {"id": "AB-1"}, "version": 2}, headers=auth(keys["reader"])
    )
    assert pinned.json()["description"] == "v2"
    missing_label = await c.post(
        render, json={"arguments": {"id": "AB-1"}, "label": "qa"}, headers=auth(keys["reader"])
    )
    assert missing_label.status_code == 404


async def test_archive_hides_from_render_and_delete_needs_archive(
    api: Api, keys: dict[str, str], superuser: asyncpg.Connection
) -> None:
    c = api.client
    await c.post(P, json={**SIMPLE, "labels": ["production"]}, headers=auth(keys["publisher"]))
    await c.post(P, json={**SIMPLE, "name": "draft"}, headers=auth(keys["editor"]))
    # Archiving a prompt that production serves is a publisher's call.
    assert (await c.post(f"{P}/greet/archive", headers=auth(keys["editor"]))).status_code == 403
    assert (await c.delete(f"{P}/draft", headers=auth(keys["admin"]))).status_code == 409
    archived = await c.post(f"{P}/greet/archive", headers=auth(keys["publisher"]))
    assert archived.json()["archived_at"] is not None
    render = await c.post(
        f"{P}/greet/render", json={"arguments": {"who": "x"}}, headers=auth(keys["reader"])
    )
    assert render.status_code == 404
    assert [p["name"] for p in (await c.get(P, headers=auth(keys["reader"]))).json()["items"]] == [
        "draft"
    ]
    listed = await c.get(P, params={"archived": "true"}, headers=auth(keys["reader"]))
    assert [p["name"] for p in listed.json()["items"]] == ["greet"]
    await c.post(f"{P}/greet/unarchive", headers=auth(keys["publisher"]))
    render = await c.post(
        f"{P}/greet/render", json={"arguments": {"who": "x"}}, headers=auth(keys["reader"])
    )
    assert render.status_code == 200

    await c.post(f"{P}/draft/archive", headers=auth(keys["editor"]))
    assert (await c.delete(f"{P}/draft", headers=auth(keys["editor"]))).status_code == 403
    assert (await c.delete(f"{P}/draft", headers=auth(keys["admin"]))).status_code == 204
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == 1

    tags = await c.patch(f"{P}/greet", json={"tags": ["a", "b", "a"]}, headers=auth(keys["editor"]))
    assert tags.json()["tags"] == ["a", "b"]


async def test_blobs_are_stored_once_and_rendered_inline(
    api: Api, keys: dict[str, str], superuser: asyncpg.Connection
) -> None:
    c = api.client
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    sha = hashlib.sha256(png).hexdigest()
    up = await c.post(
        "/api/v1/tenants/acme/blobs",
        content=png,
        headers={**auth(keys["editor"]), "Content-Type": "image/png"},
    )
    assert up.status_code == 201
    assert up.json() == {"sha256": sha, "size": len(png), "mime_type": "image/png", "created": True}
    again = await c.post(
        "/api/v1/tenants/acme/blobs",
        content=png,
        headers={**auth(keys["editor"]), "Content-Type": "image/png"},
    )
    assert again.status_code == 200
    down = await c.get(f"/api/v1/tenants/acme/blobs/{sha}", headers=auth(keys["reader"]))
    assert down.content == png
    assert down.headers["content-type"] == "image/png"

    audio = b"RIFF....WAVE"
    body = {
        "name": "media",
        "messages": [
            {"role": "user", "content": {"type": "image", "mimeType": "image/png", "blob": sha}},
            {"role": "user", "content": {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(audio).decode()}},
            {"role": "user", "content": {"type": "resource", "resource": {"uri": "file:///x.png", "mimeType": "image/png", "blob": base64.b64encode(png).decode()}}},
            {"role": "user", "content": {"type": "resource_link", "uri": "https://example.com/doc", "name": "doc"}},
        ],
    }  # fmt: skip
    created = await c.post(P, json=body, headers=auth(keys["editor"]))
    assert created.status_code == 201, created.text
    stored = created.json()["prompt"]["latest"]["messages"]
    assert stored[1]["content"]["blob"] == hashlib.sha256(audio).hexdigest()
    assert "data" not in stored[1]["content"]
    assert stored[2]["content"]["resource"]["blob"] == sha  # the same bytes, stored once
    assert await superuser.fetchval("SELECT count(*) FROM blobs") == 2

    rendered = (
        await c.post(f"{P}/media/render", json={"version": 1}, headers=auth(keys["reader"]))
    ).json()
    contents = [m["content"] for m in rendered["messages"]]
    assert base64.b64decode(contents[0]["data"]) == png
    assert base64.b64decode(contents[1]["data"]) == audio
    assert base64.b64decode(contents[2]["resource"]["blob"]) == png
    assert contents[3] == {"type": "resource_link", "uri": "https://example.com/doc", "name": "doc"}


@pytest.mark.parametrize(
    "settings_overrides", [{"max_blob_bytes": 1000, "max_request_bytes": 4096}]
)
async def test_size_limits_give_413(
    api: Api, keys: dict[str, str], superuser: asyncpg.Connection
) -> None:
    c = api.client
    big = await c.post(
        "/api/v1/tenants/acme/blobs",
        content=b"x" * 1001,
        headers={**auth(keys["editor"]), "Content-Type": "text/plain"},
    )
    assert big.status_code == 413
    inline = {**SIMPLE, "messages": [{"role": "user", "content": {
        "type": "image", "mimeType": "image/png", "data": base64.b64encode(b"x" * 1500).decode()}}]}  # fmt: skip
    too_big = await c.post(P, json={**inline, "arguments": []}, headers=auth(keys["editor"]))
    assert too_big.status_code == 413
    huge_json = await c.post(
        P, json={**SIMPLE, "description": "d" * 5000}, headers=auth(keys["editor"])
    )
    assert huge_json.status_code == 413
    assert await superuser.fetchval("SELECT count(*) FROM blobs") == 0
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == 0


async def test_diff_between_versions(api: Api, keys: dict[str, str]) -> None:
    c = api.client
    await c.post(P, json=SIMPLE, headers=auth(keys["editor"]))
    v2 = {
        "title": "Greeting v2",
        "arguments": [
            {"name": "who", "required": True, "description": "changed"},
            {"name": "mood"},
        ],
        "messages": [
            {
                "role": "user",
                "content": {"type": "text", "text": "Hello {{who}}!\nFeeling {{mood}}?"},
            },
            {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
        ],
    }
    await c.post(f"{P}/greet/versions", json=v2, headers=auth(keys["editor"]))
    diff = (
        await c.get(f"{P}/greet/diff", params={"from": 1, "to": 2}, headers=auth(keys["reader"]))
    ).json()
    assert diff["metadata"]["title"] == {"before": "Greeting", "after": "Greeting v2"}
    assert diff["metadata"]["description"] == {"before": "Says hello", "after": None}
    assert diff["arguments"]["added"] == ["mood"]
    assert diff["arguments"]["changed"]["who"]["description"] == {
        "before": "whom to greet",
        "after": "changed",
    }
    assert [m["status"] for m in diff["messages"]] == ["changed", "added"]
    assert "+Feeling {{mood}}?" in diff["messages"][0]["diff"]
    assert (
        await c.get(f"{P}/greet/diff", params={"from": 1, "to": 5}, headers=auth(keys["reader"]))
    ).status_code == 404


async def test_dry_run_writes_nothing(
    api: Api, keys: dict[str, str], superuser: asyncpg.Connection
) -> None:
    before = await superuser.fetchval("SELECT count(*) FROM audit_log")
    response = await api.client.post(
        P, params={"dry_run": "true"}, json=SIMPLE, headers=auth(keys["editor"])
    )
    assert response.status_code == 201
    assert response.json()["dry_run"] is True
    assert response.json()["version"] == 1
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == 0
    assert await superuser.fetchval("SELECT count(*) FROM audit_log") == before


async def test_every_serving_change_is_in_the_change_log_and_audit(
    api: Api, keys: dict[str, str], superuser: asyncpg.Connection
) -> None:
    c = api.client
    await c.post(P, json={**SIMPLE, "labels": ["production"]}, headers=auth(keys["publisher"]))
    await c.post(
        f"{P}/greet/versions", json=version_body("v2 {{who}}"), headers=auth(keys["editor"])
    )
    await c.put(
        f"{P}/greet/labels/production", json={"version": 2}, headers=auth(keys["publisher"])
    )
    await c.post(f"{P}/greet/archive", headers=auth(keys["publisher"]))
    kinds = [r["kind"] for r in await superuser.fetch("SELECT kind FROM change_log ORDER BY seq")]
    assert kinds == ["label.move", "label.move", "label.move", "label.move", "prompt.archive"]
    seqs = [r["seq"] for r in await superuser.fetch("SELECT seq FROM change_log ORDER BY seq")]
    assert seqs == [1, 2, 3, 4, 5]
    actions = [r["action"] for r in await superuser.fetch(
        "SELECT action FROM audit_log WHERE actor LIKE 'key:%' ORDER BY id")]  # fmt: skip
    assert actions == [
        "prompt.create", "version.create", "label.move", "version.create", "label.move", "prompt.archive",
    ]  # fmt: skip


async def test_tenant_isolation_over_the_api(api: Api, superuser: asyncpg.Connection) -> None:
    a = await api.tenant("alpha")
    b = await api.tenant("bravo")
    c = api.client
    secret_png = b"\x89PNG\r\n\x1a\nalpha-only-bytes"
    sha = hashlib.sha256(secret_png).hexdigest()
    await c.post(
        "/api/v1/tenants/alpha/blobs",
        content=secret_png,
        headers={**auth(a["editor"]), "Content-Type": "image/png"},
    )
    await c.post(
        "/api/v1/tenants/alpha/prompts",
        json={**SIMPLE, "name": "secret"},
        headers=auth(a["editor"]),
    )

    # bravo cannot fetch alpha's blob by hash, nor reference it in its own prompt.
    assert (
        await c.get(f"/api/v1/tenants/bravo/blobs/{sha}", headers=auth(b["admin"]))
    ).status_code == 404
    stolen = {
        "name": "steal",
        "messages": [
            {"role": "user", "content": {"type": "image", "mimeType": "image/png", "blob": sha}}
        ],
    }
    refused = await c.post("/api/v1/tenants/bravo/prompts", json=stolen, headers=auth(b["admin"]))
    assert refused.status_code == 422
    assert "has not been uploaded" in refused.json()["detail"]
    # bravo sees nothing of alpha by name, listing, audit or export.
    assert (
        await c.get("/api/v1/tenants/bravo/prompts/secret", headers=auth(b["admin"]))
    ).status_code == 404
    assert (await c.get("/api/v1/tenants/bravo/prompts", headers=auth(b["admin"]))).json()[
        "items"
    ] == []
    audit = (
        await c.get("/api/v1/tenants/bravo/audit", params={"limit": 500}, headers=auth(b["admin"]))
    ).json()
    assert all("secret" not in str(item) and "alpha" not in str(item) for item in audit["items"])
    export = (await c.get("/api/v1/tenants/bravo/export", headers=auth(b["admin"]))).json()
    assert export["prompts"] == []
    assert export["blobs"] == {}
    # and writes with bravo's key on alpha's paths are refused before touching anything.
    writes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", "/prompts", {**SIMPLE, "name": "planted"}),
        ("POST", "/prompts/secret/versions", version_body("x {{who}}")),
        ("PUT", "/prompts/secret/labels/x", {"version": 1}),
        ("DELETE", "/prompts/secret", None),
        ("POST", "/import", {"prompts": []}),
    ]
    for method, path, body in writes:
        response = await c.request(
            method, f"/api/v1/tenants/alpha{path}", json=body, headers=auth(b["admin"])
        )
        assert response.status_code == 403, path
    blob = await c.post(
        "/api/v1/tenants/alpha/blobs",
        content=b"x",
        headers={**auth(b["admin"]), "Content-Type": "text/plain"},
    )
    assert blob.status_code == 403
    # Without any credential, even a malformed body gets 401 first.
    assert (await c.post("/api/v1/tenants/alpha/prompts", json={"junk": 1})).status_code == 401
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == 1


async def test_export_then_import_is_idempotent(api: Api, superuser: asyncpg.Connection) -> None:
    a = await api.tenant("alpha")
    b = await api.tenant("bravo")
    c = api.client
    png = b"\x89PNG\r\n\x1a\nimage-bytes"
    await c.post(
        "/api/v1/tenants/alpha/prompts",
        json={**SIMPLE, "labels": ["production"]},
        headers=auth(a["publisher"]),
    )
    await c.post(
        "/api/v1/tenants/alpha/prompts/greet/versions",
        json=version_body("v2 {{who}}", labels=["staging"]),
        headers=auth(a["editor"]),
    )
    media = {
        "name": "media",
        "messages": [
            {
                "role": "user",
                "content": {
                    "type": "image",
                    "mimeType": "image/png",
                    "data": base64.b64encode(png).decode(),
                },
            }
        ],
    }
    await c.post("/api/v1/tenants/alpha/prompts", json=media, headers=auth(a["editor"]))

    bundle = (await c.get("/api/v1/tenants/alpha/export", headers=auth(a["reader"]))).json()
    assert [p["name"] for p in bundle["prompts"]] == ["greet", "media"]
    assert bundle["prompts"][0]["labels"] == {"production": 1, "staging": 2}
    assert list(bundle["blobs"]) == [hashlib.sha256(png).hexdigest()]
    labelled = (
        await c.get(
            "/api/v1/tenants/alpha/export",
            params={"versions": "labelled"},
            headers=auth(a["reader"]),
        )
    ).json()
    assert [v["version"] for v in labelled["prompts"][0]["versions"]] == [1, 2]

    assert (
        await c.post("/api/v1/tenants/bravo/import", json=bundle, headers=auth(b["editor"]))
    ).status_code == 403  # production
    first = await c.post("/api/v1/tenants/bravo/import", json=bundle, headers=auth(b["publisher"]))
    assert first.status_code == 200, first.text
    assert first.json() == {
        "prompts_created": 2,
        "versions_created": 3,
        "labels_moved": 2,
        "blobs_stored": 1,
        "unchanged_versions": 0,
        "skills_created": 0,
        "skill_versions_created": 0,
        "skill_labels_moved": 0,
    }
    counts = [
        await superuser.fetchval(f"SELECT count(*) FROM {t}")
        for t in ("prompt_versions", "label_history", "audit_log")
    ]
    second = await c.post("/api/v1/tenants/bravo/import", json=bundle, headers=auth(b["publisher"]))
    assert second.json() == {
        "prompts_created": 0,
        "versions_created": 0,
        "labels_moved": 0,
        "blobs_stored": 0,
        "unchanged_versions": 3,
        "skills_created": 0,
        "skill_versions_created": 0,
        "skill_labels_moved": 0,
    }
    assert counts == [
        await superuser.fetchval(f"SELECT count(*) FROM {t}")
        for t in ("prompt_versions", "label_history", "audit_log")
    ]
    rendered = await c.post(
        "/api/v1/tenants/bravo/prompts/greet/render",
        json={"arguments": {"who": "B"}},
        headers=auth(b["reader"]),
    )
    assert rendered.json()["messages"][0]["content"]["text"] == "Hello B!"
    # A bundle whose prompt needs a blob that is neither in the bundle nor in the tenant: refused, whole.
    charlie = await api.tenant("charlie")
    before = await superuser.fetchval("SELECT count(*) FROM prompts")
    broken = {**bundle, "blobs": {}}
    bad = await c.post(
        "/api/v1/tenants/charlie/import", json=broken, headers=auth(charlie["publisher"])
    )
    assert bad.status_code == 422
    assert "has not been uploaded" in bad.json()["detail"]
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == before


async def test_nul_characters_are_refused_not_500(
    api: Api, keys: dict[str, str], superuser: asyncpg.Connection
) -> None:
    c = api.client
    body = {**SIMPLE, "description": "bad\x00value"}
    refused = await c.post(P, json=body, headers=auth(keys["editor"]))
    assert refused.status_code == 422
    assert "description: text may not contain NUL" in refused.json()["detail"]
    search = await c.get(P, params={"q": "a\x00b"}, headers=auth(keys["reader"]))
    assert search.status_code == 422
    assert await superuser.fetchval("SELECT count(*) FROM prompts") == 0
