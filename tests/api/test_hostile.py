"""Hostile input on the REST API: bounded work, nothing that queues other requests, never a 500."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.api.conftest import SIMPLE, Api, auth

P = "/api/v1/tenants/acme/prompts"


def _text_version(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


async def test_a_key_in_use_elsewhere_never_makes_a_request_wait(
    api: Api, superuser: asyncpg.Connection
) -> None:
    """The key's last use is recorded outside the request's transaction, and skipped while another
    transaction holds the key's row: a slow request of a key never queues the others."""
    keys = await api.tenant("acme")
    secret = keys["reader"].removeprefix("Bearer ")
    key_id = await superuser.fetchval(
        "SELECT id FROM api_keys WHERE name = 'reader' AND tenant_id = "
        "(SELECT id FROM tenants WHERE slug = 'acme')"
    )
    async with superuser.transaction():
        await superuser.execute("SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE", key_id)
        answer = await asyncio.wait_for(
            api.client.get(P, headers={"Authorization": f"Bearer {secret}"}), 20
        )
        assert answer.status_code == 200, answer.text
    again = await api.client.get(P, headers={"Authorization": f"Bearer {secret}"})
    assert again.status_code == 200
    used = await superuser.fetchval("SELECT last_used_at FROM api_keys WHERE id = $1", key_id)
    assert used is not None  # recorded once the row was free


async def test_large_diffs_are_bounded_and_say_so(api: Api) -> None:
    keys = await api.tenant("acme")
    editor = auth(keys["editor"])
    first = "\n".join(f"line {i}" for i in range(15_000))
    second = "\n".join(f"changed {i}" if i % 7 == 0 else f"line {i}" for i in range(15_000))
    created = await api.client.post(P, json={"name": "big", **_text_version(first)}, headers=editor)
    assert created.status_code == 201, created.text
    written = await api.client.post(f"{P}/big/versions", json=_text_version(second), headers=editor)
    assert written.status_code == 201, written.text
    diff = await api.client.get(f"{P}/big/diff", params={"from": 1, "to": 2}, headers=editor)
    assert diff.status_code == 200, diff.text
    (message,) = diff.json()["messages"]
    assert message["status"] == "changed"
    assert message["diff"] == []
    assert "too large to diff line by line (15,000 and 15,000 lines" in message["note"]


async def test_templates_that_could_never_render_are_refused_when_written(api: Api) -> None:
    keys = await api.tenant("acme")
    deep = "{{#a}}" * 1500 + "x" + "{{/a}}" * 1500
    body = {**SIMPLE, "name": "deep", "arguments": [{"name": "a"}], **_text_version(deep)}
    refused = await api.client.post(P, json=body, headers=auth(keys["editor"]))
    assert refused.status_code == 422, refused.text
    assert "nest more than" in refused.json()["detail"]


async def test_numbers_out_of_range_or_not_ascii_are_refused_not_500(api: Api) -> None:
    keys = await api.tenant("acme")
    reader, editor = auth(keys["reader"]), auth(keys["publisher"])
    created = await api.client.post(P, json=SIMPLE, headers=editor)
    assert created.status_code == 201, created.text
    huge = 2**31
    for method, path, body, params in [
        ("GET", f"{P}/greet/versions/{huge}", None, None),
        ("GET", f"{P}/greet/versions/{2**70}", None, None),
        ("POST", f"{P}/greet/versions/{huge}/restore", None, None),
        ("GET", f"{P}/greet/diff", None, {"from": 1, "to": huge}),
        ("PUT", f"{P}/greet/labels/staging", {"version": huge}, None),
        ("POST", f"{P}/greet/render", {"arguments": {"who": "x"}, "version": huge}, None),
    ]:
        answer = await api.client.request(method, path, json=body, params=params, headers=editor)
        assert answer.status_code == 422, (path, answer.status_code, answer.text)
    version = {"messages": SIMPLE["messages"], "arguments": SIMPLE["arguments"]}
    for value in ('"²"', '"99999999999"', '"-1"', '"1_0"'):
        answer = await api.client.post(
            f"{P}/greet/versions",
            json=version,
            headers={**editor, "If-Match": value.encode()},  # type: ignore[dict-item]
        )
        assert answer.status_code == 422, (value, answer.text)
        assert "If-Match" in answer.json()["detail"]
    assert (await api.client.get(f"{P}/greet", headers=reader)).status_code == 200


async def test_an_oversized_chunked_body_is_413(api: Api) -> None:
    keys = await api.tenant("acme")

    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(5):
            yield b"x" * (1024 * 1024)  # no Content-Length: 5 MiB past the 4 MiB limit

    answer = await api.client.post(P, content=chunks(), headers=auth(keys["editor"]))
    assert answer.status_code == 413, answer.text
    assert answer.json()["code"] == "payload_too_large"


async def test_a_key_cannot_be_born_expired(api: Api) -> None:
    keys = await api.tenant("acme")
    for expires_at in ("2001-01-01T00:00:00Z", "2099-01-01T00:00:00"):
        answer = await api.client.post(
            "/api/v1/tenants/acme/keys",
            json={"role": "reader", "expires_at": expires_at},
            headers=auth(keys["admin"]),
        )
        assert answer.status_code == 422, answer.text
        assert "expires_at" in answer.json()["detail"]


async def test_a_dry_run_says_nothing_was_saved_and_text_shorthand_is_taken(api: Api) -> None:
    keys = await api.tenant("acme")
    body = {
        "name": "short",
        "messages": [{"role": "user", "text": "Hi"}, {"role": "assistant", "content": "Hello"}],
    }
    dry = await api.client.post(
        P, params={"dry_run": "true"}, json=body, headers=auth(keys["editor"])
    )
    assert dry.status_code == 201, dry.text
    assert dry.json()["detail"] == "version 1 would be written (dry run: nothing saved)"
    assert (await api.client.get(f"{P}/short", headers=auth(keys["reader"]))).status_code == 404
    made = await api.client.post(P, json=body, headers=auth(keys["editor"]))
    assert made.status_code == 201, made.text
    contents = [m["content"] for m in made.json()["prompt"]["latest"]["messages"]]
    assert contents == [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Hello"}]
