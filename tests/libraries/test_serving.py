"""A library's prompts served on its subscribers' MCP endpoints: the subscriber lists its own and the
library's (its own winning a name both serve, a prefix when it chose one), renders them with their
partials resolved in the library, receives a receipt naming the library; following sees each
publish of the label, pinning sees only versions that label served; drafts, other labels and
versions by number stay unread; a withdrawn offer or an ended subscription reads nothing; a tenant
that never subscribed sees nothing of it."""

from __future__ import annotations

import base64
from typing import Any

from tests.conftest import Api, auth
from tests.mcp.test_stateless import Stateless, meta

V1 = "/api/v1/tenants"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(24)).decode()


def prompt(name: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            **extra}  # fmt: skip


async def publish(api: Api, key: str, tenant: str, name: str, text: str, label: str) -> int:
    body = {"messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "labels": [label]}  # fmt: skip
    made = await api.client.post(f"{V1}/{tenant}/prompts/{name}/versions", json=body,
                                 headers=auth(key))  # fmt: skip
    assert made.status_code == 201, made.text
    return int(made.json()["version"])


async def names(mcp: Stateless) -> list[str]:
    listed: list[str] = []
    cursor: str | None = None
    while True:
        page = await mcp.result("prompts/list", {"cursor": cursor} if cursor else {})
        listed += [p["name"] for p in page["prompts"]]
        cursor = page.get("nextCursor")
        if not cursor:
            return listed


async def text_of(mcp: Stateless, name: str, **arguments: str) -> str:
    got = await mcp.result("prompts/get", {"name": name, "arguments": arguments})
    return str(got["messages"][0]["content"]["text"])


async def setup(api: Api) -> tuple[dict[str, str], dict[str, str]]:
    platform = await api.tenant("platform")
    acme = await api.tenant("acme")
    writer = auth(platform["publisher"])
    for body in (
        prompt("tone", "Be kind.", labels=["production"]),
        prompt("style", "Use {{> tone}} and short words for {{who}}.",
               arguments=[{"name": "who", "required": True}], labels=["production"]),
        prompt("greet", "Platform hello.", labels=["production"]),
        prompt("draft-only", "Never published."),
        prompt("staged", "Only on staging.", labels=["staging"]),
    ):  # fmt: skip
        made = await api.client.post(f"{V1}/platform/prompts", json=body, headers=writer)
        assert made.status_code == 201, made.text
    own = await api.client.post(f"{V1}/acme/prompts", headers=auth(acme["publisher"]),
                                json=prompt("greet", "Acme hello.", labels=["production"]))  # fmt: skip
    assert own.status_code == 201, own.text
    offered = await api.client.post(f"{V1}/platform/subscribers", headers=auth(platform["admin"]),
                                    json={"tenant": "acme", "label": "production"})  # fmt: skip
    assert offered.status_code == 201, offered.text
    return platform, acme


async def test_a_follower_serves_the_library_beside_its_own(api: Api) -> None:
    platform, acme = await setup(api)
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    assert await names(mcp) == ["greet"]  # offered, not yet accepted: nothing of it

    accepted = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                     json={"library": "platform", "label": "production"})  # fmt: skip
    assert accepted.status_code == 201, accepted.text
    assert await names(mcp) == ["greet", "style", "tone"]  # drafts and staging stay unread
    assert await text_of(mcp, "greet") == "Acme hello."  # its own wins the clash
    assert await text_of(mcp, "style", who="Ann") == "Use Be kind. and short words for Ann."
    got = await mcp.result("prompts/get", {"name": "tone"})
    receipt = got["_meta"]["dev.prompt-registry/receipt"]
    assert (receipt["prompt"], receipt["version"], receipt["library"]) == ("tone", 1, "platform")
    # Through the tools of a tenant that offers its prompts as tools, render_prompt too.
    tools_on = await api.client.patch(f"{V1}/acme", json={"mcp_tools": True},
                                      headers=auth(acme["admin"]))  # fmt: skip
    assert tools_on.status_code == 200, tools_on.text
    answer = await mcp.post("tools/call", {"_meta": meta(), "name": "render_prompt", "arguments": {
        "name": "style", "arguments": {"who": "Al"}}}, **{"Mcp-Name": "render_prompt"})  # fmt: skip
    assert answer.status_code == 200, answer.text
    called = answer.json()["result"]
    assert called["content"][0]["text"] == "Use Be kind. and short words for Al."
    assert called["_meta"]["dev.prompt-registry/receipt"]["library"] == "platform"
    for hidden in ("draft-only", "staged", "tone@1", "style@production"):
        refused = await mcp.post("prompts/get", {"_meta": meta(), "name": hidden})
        assert "error" in refused.json(), (hidden, refused.text)

    # A library's image is read through the grant too (blobs are the library's).
    logo = {"name": "logo", "labels": ["production"], "messages": [
        {"role": "user", "content": {"type": "image", "mimeType": "image/png", "data": PNG}}]}  # fmt: skip
    made = await api.client.post(f"{V1}/platform/prompts", json=logo,
                                 headers=auth(platform["publisher"]))  # fmt: skip
    assert made.status_code == 201, made.text
    image = (await mcp.result("prompts/get", {"name": "logo"}))["messages"][0]["content"]
    assert (image["type"], image["data"]) == ("image", PNG)

    # A publish on the label reaches the follower (its caches dropped by the library's change);
    # style keeps the tone it was written with (a partial is locked when its version is written).
    await publish(api, platform["publisher"], "platform", "tone", "Be warm.", "production")
    assert await text_of(mcp, "tone") == "Be warm."
    assert await text_of(mcp, "style", who="Bo") == "Use Be kind. and short words for Bo."

    # Pages merge in name order whatever their size.
    for name in ("a1", "m1", "z1"):
        made = await api.client.post(f"{V1}/acme/prompts", headers=auth(acme["publisher"]),
                                     json=prompt(name, name, labels=["production"]))  # fmt: skip
        assert made.status_code == 201
    patched = await api.client.patch(f"{V1}/acme", json={"page_size": 2},
                                     headers=auth(acme["admin"]))  # fmt: skip
    assert patched.status_code == 200, patched.text
    assert await names(mcp) == ["a1", "greet", "logo", "m1", "style", "tone", "z1"]

    # A prefix puts the library's names apart: no clash then.
    prefixed = await api.client.patch(f"{V1}/acme/libraries/platform", json={"prefix": "pl."},
                                      headers=auth(acme["admin"]))  # fmt: skip
    assert prefixed.status_code == 200, prefixed.text
    assert await names(mcp) == [
        "a1", "greet", "m1", "pl.greet", "pl.logo", "pl.style", "pl.tone", "z1"]  # fmt: skip
    assert await text_of(mcp, "pl.greet") == "Platform hello."

    # Completion offers a library prompt's enum values, under the name the tenant serves it by.
    mood = prompt("mood", "Feel {{m}}.", labels=["production"],
                  arguments=[{"name": "m", "enum": ["calm", "cheerful", "brisk"]}])  # fmt: skip
    made = await api.client.post(f"{V1}/platform/prompts", json=mood,
                                 headers=auth(platform["publisher"]))  # fmt: skip
    assert made.status_code == 201, made.text
    ref = {"type": "ref/prompt", "name": "pl.mood"}
    done = await mcp.result(
        "completion/complete", {"ref": ref, "argument": {"name": "m", "value": "c"}}
    )
    assert done["completion"]["values"] == ["calm", "cheerful"]
    unknown = await mcp.post("completion/complete", {"_meta": meta(), "ref": ref,
                                                     "argument": {"name": "x", "value": ""}})  # fmt: skip
    assert "no argument 'x'" in unknown.json()["error"]["message"]

    # Withdrawn: nothing of it is read, though acme's subscription stays.
    withdrawn = await api.client.delete(f"{V1}/platform/subscribers/acme",
                                        headers=auth(platform["admin"]))  # fmt: skip
    assert withdrawn.status_code == 204, withdrawn.text
    assert await names(mcp) == ["a1", "greet", "m1", "z1"]
    refused = await mcp.post("prompts/get", {"_meta": meta(), "name": "pl.tone"})
    assert "error" in refused.json()
    gone = await mcp.post("completion/complete", {"_meta": meta(), "ref": ref,
                                                  "argument": {"name": "m", "value": ""}})  # fmt: skip
    assert "error" in gone.json()


async def test_pins_reach_only_versions_the_label_served(api: Api) -> None:
    platform, acme = await setup(api)
    two = await publish(api, platform["publisher"], "platform", "tone", "Be warm.", "production")
    three = await publish(api, platform["publisher"], "platform", "tone", "Be loud.", "staging")
    pinned = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                   json={"library": "platform", "label": "production",
                                         "pins": {"tone": 1, "staged": 1}})  # fmt: skip
    assert pinned.status_code == 201, pinned.text
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    assert await names(mcp) == ["greet", "tone"]  # staged@1 was never on production
    assert await text_of(mcp, "tone") == "Be kind."  # v1 while production serves v2
    moved = await api.client.patch(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]),
                                   json={"pins": {"tone": two}})  # fmt: skip
    assert moved.status_code == 200, moved.text
    assert await text_of(mcp, "tone") == "Be warm."
    drafted = await api.client.patch(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]),
                                     json={"pins": {"tone": three}})  # fmt: skip
    assert drafted.status_code == 200
    assert await names(mcp) == ["greet"]  # v3 only ever on staging: not read
    refused = await mcp.post("prompts/get", {"_meta": meta(), "name": "tone"})
    assert "error" in refused.json()


async def test_others_see_nothing_and_ending_it_ends_it(api: Api) -> None:
    _, acme = await setup(api)
    beta = await api.tenant("beta")
    joined = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                   json={"library": "platform", "label": "production"})  # fmt: skip
    assert joined.status_code == 201
    stranger = Stateless(api.client, "/mcp/beta", auth(beta["reader"]))
    assert await names(stranger) == []
    refused = await stranger.post("prompts/get", {"_meta": meta(), "name": "tone"})
    assert "error" in refused.json()
    # The library's own endpoint is not the subscriber's: acme's key reads nothing there.
    across = Stateless(api.client, "/mcp/platform", auth(acme["reader"]))
    assert (await across.post("prompts/list", {"_meta": meta()})).status_code in (401, 403)

    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    assert "tone" in await names(mcp)
    ended = await api.client.delete(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]))
    assert ended.status_code == 204, ended.text
    assert await names(mcp) == ["greet"]


async def test_the_impact_of_a_library_prompt(api: Api) -> None:
    platform, acme = await setup(api)
    beta = await api.tenant("beta")
    gamma = await api.tenant("gamma")
    two = await publish(api, platform["publisher"], "platform", "tone", "Be warm.", "production")
    for slug in ("beta", "gamma"):
        made = await api.client.post(f"{V1}/platform/subscribers", headers=auth(platform["admin"]),
                                     json={"tenant": slug, "label": "production"})  # fmt: skip
        assert made.status_code == 201, made.text
    for slug, keys, body in (
        ("acme", acme, {"follow": True}),
        ("beta", beta, {"pins": {"tone": 1}}),
        ("gamma", gamma, {"pins": {"greet": 1}}),
    ):
        joined = await api.client.post(f"{V1}/{slug}/libraries", headers=auth(keys["admin"]),
                                       json={"library": "platform", "label": "production", **body})  # fmt: skip
        assert joined.status_code == 201, joined.text
    seen = await api.client.get(f"{V1}/platform/prompts/tone/subscribers",
                                headers=auth(platform["publisher"]))  # fmt: skip
    assert seen.status_code == 200, seen.text
    impact = seen.json()
    assert impact["labels"]["production"] == two
    assert [(s["tenant"], s["follow"], s["pinned"], s["served"]) for s in impact["subscribers"]] == [
        ("acme", True, None, two), ("beta", False, 1, 1), ("gamma", False, None, None)]  # fmt: skip
    reader = await api.client.get(f"{V1}/platform/prompts/tone/subscribers",
                                  headers=auth(platform["reader"]))  # fmt: skip
    assert reader.status_code == 403
    missing = await api.client.get(f"{V1}/platform/prompts/nope/subscribers",
                                   headers=auth(platform["publisher"]))  # fmt: skip
    assert missing.status_code == 404
    # The library's change request says whom its move reaches.
    three = await publish(api, platform["publisher"], "platform", "tone", "Be brief.", "staging")
    gated = await api.client.patch(f"{V1}/platform", json={"approvals": {"production": 1}},
                                   headers=auth(platform["admin"]))  # fmt: skip
    assert gated.status_code == 200, gated.text
    opened = await api.client.post(f"{V1}/platform/change-requests", headers=auth(platform["publisher"]),
                                   json={"description": "tone v3", "moves": [
                                       {"prompt": "tone", "label": "production", "version": three}]})  # fmt: skip
    assert opened.status_code == 201, opened.text
    await api.console_sign_in(platform["admin"].removeprefix("Bearer "), tenant="platform")
    page = await api.client.get(f"/ui/platform/change-requests/{opened.json()['id']}")
    assert page.status_code == 200, page.text[:500]
    assert (f"<strong>acme</strong> (follows it: v{two} now, v{three} once applied), "
            "<strong>beta</strong> (pinned v1: unchanged)") in page.text  # fmt: skip
    # So does its REST view, to a publisher; a reader of the library sees no subscriber.
    path = f"{V1}/platform/change-requests/{opened.json()['id']}"
    shown = await api.client.get(path, headers=auth(platform["publisher"]))
    assert [[(r["tenant"], r["follow"], r["pinned"]) for r in move]
            for move in shown.json()["library_reach"]] == [
        [("acme", True, None), ("beta", False, 1), ("gamma", False, None)]]  # fmt: skip
    read = await api.client.get(path, headers=auth(platform["reader"]))
    assert read.status_code == 200 and read.json()["library_reach"] == [[]]

    # A subscriber sees nothing of the library's other subscribers.
    across = await api.client.get(f"{V1}/platform/prompts/tone/subscribers",
                                  headers=auth(acme["admin"]))  # fmt: skip
    assert across.status_code in (401, 403, 404)


ORIGIN = {"Origin": "http://test"}


async def test_the_console_accepts_pins_moves_and_ends(api: Api) -> None:
    """Both sides in the console: the library's admin offers, the subscriber's admin sees the
    offer, accepts it pinned, sees what it inherits, moves the pin, follows, ends it; a publisher
    is sent away and a bad pin is a clear error."""
    platform, acme = await setup(api)
    withdrawn = await api.client.delete(f"{V1}/platform/subscribers/acme",
                                        headers=auth(platform["admin"]))  # fmt: skip
    assert withdrawn.status_code == 204
    csrf = await api.console_sign_in(platform["admin"].removeprefix("Bearer "), tenant="platform")
    offered = await api.client.post("/ui/platform/libraries/offer", headers=ORIGIN,
                                    data={"csrf": csrf, "tenant": "*", "label": "production"})  # fmt: skip
    assert offered.status_code == 303, offered.text
    own = await api.client.get("/ui/platform/libraries")
    assert "To <strong>every tenant</strong>: production; accepted by nobody yet" in own.text

    csrf = await api.console_sign_in(acme["admin"].removeprefix("Bearer "))
    page = await api.client.get("/ui/acme/libraries")
    assert (
        page.status_code == 200
        and "<strong>platform</strong> offers its label production" in page.text
    )
    bad = await api.client.post("/ui/acme/libraries/subscribe", headers=ORIGIN, data={
        "csrf": csrf, "library": "platform", "label": "production", "pins": "tone3"})  # fmt: skip
    assert bad.status_code == 422 and "is not NAME@VERSION" in bad.text
    taken = await api.client.post("/ui/acme/libraries/subscribe", headers=ORIGIN, data={
        "csrf": csrf, "library": "platform", "label": "production", "pins": "tone@1"})  # fmt: skip
    assert taken.status_code == 303, taken.text
    page = await api.client.get("/ui/acme/libraries")
    assert (
        "pinned: tone@1" in page.text and "Serves this tenant now: <code>tone</code>." in page.text
    )
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    assert await names(mcp) == ["greet", "tone"]

    followed = await api.client.post("/ui/acme/libraries/platform/change", headers=ORIGIN,
                                     data={"csrf": csrf, "pins": "", "prefix": "pl."})  # fmt: skip
    assert followed.status_code == 303, followed.text
    page = await api.client.get("/ui/acme/libraries")
    assert "following the label, served under the prefix <code>pl.</code>" in page.text
    assert "<code>pl.style</code>" in page.text
    assert await names(mcp) == ["greet", "pl.greet", "pl.style", "pl.tone"]
    ended = await api.client.post("/ui/acme/libraries/platform/end", headers=ORIGIN,
                                  data={"csrf": csrf})  # fmt: skip
    assert ended.status_code == 303, ended.text
    assert await names(mcp) == ["greet"]

    await api.console_sign_in(acme["publisher"].removeprefix("Bearer "))
    refused = await api.client.get("/ui/acme/libraries")
    assert refused.status_code == 403


REVIEW = {"name": "review", "files": [
    {"path": "SKILL.md", "text": "---\nname: review\ndescription: How we review\n---\n# Review\n"},
    {"path": "CHECKLIST.md", "text": "- [ ] tests\n"}]}  # fmt: skip


async def test_a_library_serves_its_skills_too(api: Api) -> None:
    platform, acme = await setup(api)
    made = await api.client.post(f"{V1}/platform/skills", json={**REVIEW, "labels": ["production"]},
                                 headers=auth(platform["publisher"]))  # fmt: skip
    assert made.status_code == 201, made.text
    draft = {"name": "draft-skill", "files": [
        {"path": "SKILL.md", "text": "---\nname: draft-skill\ndescription: x\n---\nx\n"}]}  # fmt: skip
    made = await api.client.post(f"{V1}/platform/skills", json=draft,
                                 headers=auth(platform["publisher"]))  # fmt: skip
    assert made.status_code == 201, made.text
    mcp = Stateless(api.client, "/mcp/acme", auth(acme["reader"]))
    assert (await plain(mcp, "skills/list"))["skills"] == []
    joined = await api.client.post(f"{V1}/acme/libraries", headers=auth(acme["admin"]),
                                   json={"library": "platform", "label": "production"})  # fmt: skip
    assert joined.status_code == 201, joined.text
    listed = (await plain(mcp, "skills/list"))["skills"]
    assert [s["frontmatter"]["name"] for s in listed] == ["review"]  # the draft stays the library's
    signed = listed[0]["_meta"]["dev.prompt-registry/skill"]
    assert (signed["tenant"], signed["library"], signed["version"]) == ("platform", "platform", 1)
    got = await plain(mcp, "skills/get", {"uri": "skill://review/SKILL.md"})
    assert got["skill"]["resources"] == listed[0]["resources"]
    read = await plain(mcp, "resources/read", {"uri": "skill://review/CHECKLIST.md"})
    assert read["contents"][0]["text"] == "- [ ] tests\n"
    hidden = await mcp.post("resources/read", {"_meta": meta(), "uri": "skill://draft-skill/SKILL.md"},
                            **{"Mcp-Name": "skill://draft-skill/SKILL.md"})  # fmt: skip
    assert "error" in hidden.json(), hidden.text
    # Its own skill of the same name wins.
    own = await api.client.post(f"{V1}/acme/skills", headers=auth(acme["publisher"]), json={
        "name": "review", "labels": ["production"], "files": [
            {"path": "SKILL.md", "text": "---\nname: review\ndescription: Ours\n---\n# Ours\n"}]})  # fmt: skip
    assert own.status_code == 201, own.text
    read = await plain(mcp, "resources/read", {"uri": "skill://review/SKILL.md"})
    assert "# Ours" in read["contents"][0]["text"]
    ended = await api.client.delete(f"{V1}/acme/libraries/platform", headers=auth(acme["admin"]))
    assert ended.status_code == 204
    listed = (await plain(mcp, "skills/list"))["skills"]
    assert [s["frontmatter"]["description"] for s in listed] == ["Ours"]


async def plain(
    mcp: Stateless, method: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A result of the Skills extension's methods (the revision's schema does not hold them)."""
    headers = {"Mcp-Name": params["uri"]} if params and "uri" in params else {}
    answer = await mcp.post(method, {"_meta": meta(), **(params or {})}, **headers)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result
