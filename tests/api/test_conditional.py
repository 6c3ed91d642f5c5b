"""Conditional fetch: the prompt, version and render answers carry a strong ETag from what they
send, If-None-Match answers 304 while nothing changed, and a label move or a new version changes
the tag; a prompt's tag still works as If-Match on the next write."""

from __future__ import annotations

from tests.conftest import SIMPLE, Api, auth

P = "/api/v1/tenants/acme/prompts"


async def test_prompt_version_and_render_answer_304_until_something_changes(api: Api) -> None:
    keys = await api.tenant("acme")
    reader, publisher = auth(keys["reader"]), auth(keys["publisher"])
    created = await api.client.post(P, json={**SIMPLE, "labels": ["production"]}, headers=publisher)
    assert created.status_code == 201, created.text

    prompt = await api.client.get(f"{P}/greet", headers=reader)
    tag = prompt.headers["etag"]
    assert tag.startswith('"1.') and not tag.startswith("W/")
    same = await api.client.get(f"{P}/greet", headers={**reader, "If-None-Match": tag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == tag
    listed = await api.client.get(
        f"{P}/greet", headers={**reader, "If-None-Match": f'"x", W/{tag}'}
    )
    assert listed.status_code == 304  # any of the listed tags, weak comparison

    version = await api.client.get(f"{P}/greet/versions/1", headers=reader)
    assert version.status_code == 200
    again = await api.client.get(
        f"{P}/greet/versions/1", headers={**reader, "If-None-Match": version.headers["etag"]}
    )
    assert again.status_code == 304

    body = {"arguments": {"who": "Ann"}}
    rendered = await api.client.post(f"{P}/greet/render", json=body, headers=reader)
    render_tag = rendered.headers["etag"]
    cached = await api.client.post(
        f"{P}/greet/render", json=body, headers={**reader, "If-None-Match": render_tag}
    )
    assert cached.status_code == 304
    other = await api.client.post(
        f"{P}/greet/render", json={"arguments": {"who": "Bo"}},
        headers={**reader, "If-None-Match": render_tag},
    )  # fmt: skip
    assert other.status_code == 200 and other.headers["etag"] != render_tag

    # A new version, then production moved to it: the prompt's tag changes at each step, and the
    # render of production changes once production serves the new version.
    written = await api.client.post(
        f"{P}/greet/versions",
        json={**{k: v for k, v in SIMPLE.items() if k != "name"}, "description": "new"},
        headers={**publisher, "If-Match": tag},  # the tag read above names version 1
    )
    assert written.status_code == 201, written.text
    after_write = await api.client.get(f"{P}/greet", headers={**reader, "If-None-Match": tag})
    assert after_write.status_code == 200 and after_write.headers["etag"].startswith('"2.')
    still = await api.client.post(
        f"{P}/greet/render", json=body, headers={**reader, "If-None-Match": render_tag}
    )
    assert still.status_code == 304  # production still serves version 1
    moved = await api.client.put(
        f"{P}/greet/labels/production", json={"version": 2}, headers=publisher
    )
    assert moved.status_code == 200
    now = await api.client.post(
        f"{P}/greet/render", json=body, headers={**reader, "If-None-Match": render_tag}
    )
    assert now.status_code == 200 and now.json()["description"] == "new"
    tag_before_move = after_write.headers["etag"]
    relabelled = await api.client.get(
        f"{P}/greet", headers={**reader, "If-None-Match": tag_before_move}
    )
    assert relabelled.status_code == 200  # labels are part of the prompt's answer
