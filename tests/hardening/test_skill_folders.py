"""A skill's folder as an attacker writes it: front matter bounded in size, depth and values when it is
written (nothing half-written, every stored version servable), list pages bounded, file paths every
host's file system holds as written (Hardening IV, findings 3, 4, 8 and 9)."""

from __future__ import annotations

from typing import Any

import pytest

from registry.skills import folder
from tests.api.conftest import Api, auth
from tests.mcp.test_stateless import Stateless, meta

S = "/api/v1/tenants/acme/skills"


def _skill(name: str, front: str, *extra: dict[str, str]) -> dict[str, Any]:
    text = f"---\nname: {name}\ndescription: d\n{front}---\n# Body\n"
    return {"name": name, "labels": ["production"],
            "files": [{"path": "SKILL.md", "text": text}, *extra]}  # fmt: skip


def _nested(depth: int) -> str:
    return "x: " + "[" * depth + "]" * depth + "\n"


REFUSED_FRONT_MATTER = [
    (_nested(300), "nested deeper than 8"),
    (_nested(990), "nested deeper than 8"),
    ("metadata:\n" + "".join(f"  k{i}: v\n" for i in range(600)), "more than 512 values"),
    ("long: " + "y" * 17_000 + "\n", "at most 16,384 bytes"),
    ("n: " + "9" * 5_000 + "\n", "cannot be read"),
    ("labels: [production]\n", "'labels' is not front matter"),  # .registry.yaml's (issue 67)
    ("tests:\n  - name: x\n", "'tests' is not front matter"),
]


@pytest.mark.parametrize(("front", "why"), REFUSED_FRONT_MATTER)
async def test_front_matter_over_the_bounds_is_refused_and_writes_nothing(
    api: Api, front: str, why: str
) -> None:
    keys = await api.tenant("acme")
    publisher = auth(keys["publisher"])
    refused = await api.client.post(S, json=_skill("bulky", front), headers=publisher)
    assert refused.status_code == 422, refused.text
    assert why in refused.json()["detail"]
    assert (await api.client.get(f"{S}/bulky", headers=publisher)).status_code == 404
    made = await api.client.post(S, json=_skill("bulky", ""), headers=publisher)
    assert made.status_code == 201, made.text
    again = await api.client.post(
        f"{S}/bulky/versions", json={"files": _skill("bulky", front)["files"]}, headers=publisher
    )
    assert again.status_code == 422, again.text
    shown = (await api.client.get(f"{S}/bulky", headers=publisher)).json()
    assert shown["latest_version"] == 1


async def test_a_list_page_carries_bounded_entries_even_for_versions_stored_before_the_bounds(
    api: Api, superuser: Any
) -> None:
    keys = await api.tenant("acme")
    publisher = auth(keys["publisher"])
    front = "metadata:\n" + "".join(f"  k{i}: {'v' * 500}\n" for i in range(30))  # ~15 KiB
    for name in ("one", "two"):
        made = await api.client.post(S, json=_skill(name, front), headers=publisher)
        assert made.status_code == 201, made.text
    # A version written before the bounds: 2 MiB of front matter, nested 300 deep.
    deep = "[" * 300 + "]" * 300
    huge = (
        '{"name": "two", "description": "d", "blob": "'
        + "z" * 2_000_000
        + '", "deep": '
        + deep
        + "}"
    )
    async with superuser.transaction():
        await superuser.execute("ALTER TABLE skill_versions DISABLE TRIGGER immutable_v1")
        await superuser.execute(
            "UPDATE skill_versions SET frontmatter = $1::jsonb WHERE skill_id = "
            "(SELECT id FROM skills WHERE name = 'two')",
            huge,
        )
        await superuser.execute("ALTER TABLE skill_versions ENABLE TRIGGER immutable_v1")
    session = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    listed = await session.post("skills/list", {"_meta": meta()})
    assert listed.status_code == 200, listed.text
    assert "result" in listed.json(), listed.text[:2000]
    entries = {e["frontmatter"]["name"]: e for e in listed.json()["result"]["skills"]}
    assert entries["two"]["frontmatter"] == {"name": "two", "description": "d"}
    assert len(entries["one"]["frontmatter"]["metadata"]) == 30
    assert len(listed.content) < 3 * folder.MAX_FRONT_MATTER
    got = await session.post("skills/get", {"_meta": meta(), "uri": "skill://two/SKILL.md"})
    assert got.status_code == 200 and got.json()["result"]["skill"]["frontmatter"]["name"] == "two"
    shown = await api.client.get(f"{S}/two/versions/1", headers=publisher)
    assert shown.status_code == 200, shown.text


NOT_PORTABLE = [
    "a\uff0fb.md", "a\u2044b.md", "a\u2215b.md", "\u2024\u2024/x.md", "notes\u202egpj.md",
    "zero\u200bwidth.md", "\ufeffSKILL.md", "CON", "docs/con.txt", "C:notes.md", "a.md:stream",
    "trailing.", "space ",
]  # fmt: skip


@pytest.mark.parametrize("path", NOT_PORTABLE)
async def test_a_path_no_portable_file_system_holds_is_refused_with_its_rule(
    api: Api, path: str
) -> None:
    keys = await api.tenant("acme")
    body = _skill("paths", "", {"path": path, "text": "x"})
    refused = await api.client.post(S, json=body, headers=auth(keys["publisher"]))
    assert refused.status_code == 422, refused.text
    assert "invalid file path" in refused.json()["detail"]


async def test_twins_by_case_or_normal_form_are_refused_and_paths_are_stored_in_nfc(
    api: Api,
) -> None:
    keys = await api.tenant("acme")
    publisher = auth(keys["publisher"])
    twins = _skill(
        "paths", "", {"path": "README.md", "text": "a"}, {"path": "readme.md", "text": "b"}
    )
    refused = await api.client.post(S, json=twins, headers=publisher)
    assert refused.status_code == 422 and "differ only in case" in refused.text
    nfd = _skill(
        "paths", "", {"path": "cafe\u0301.md", "text": "a"}, {"path": "caf\u00e9.md", "text": "b"}
    )
    refused = await api.client.post(S, json=nfd, headers=publisher)
    assert refused.status_code == 422 and "given twice" in refused.text
    made = await api.client.post(
        S, json=_skill("paths", "", {"path": "cafe\u0301.md", "text": "a"}), headers=publisher
    )
    assert made.status_code == 201, made.text
    files = (await api.client.get(f"{S}/paths/versions/1", headers=publisher)).json()["files"]
    assert [f["path"] for f in files] == ["SKILL.md", "caf\u00e9.md"]


async def test_a_skill_diff_is_bounded_like_a_prompts(api: Api) -> None:
    """difflib's cost grows faster than its input: a skill's large file is reported changed with a
    note (as a prompt's large message is), never diffed line by line in a reader's request."""
    keys = await api.tenant("acme")
    publisher = auth(keys["publisher"])
    big = "\n".join(f"line {i}" for i in range(6_000))
    changed = "\n".join(f"changed {i}" if i % 3 else f"line {i}" for i in range(6_000))
    files = [{"path": "notes.md", "text": big}, {"path": "small.md", "text": "a\nb\n"}]
    made = await api.client.post(S, json=_skill("diffed", "", *files), headers=publisher)
    assert made.status_code == 201, made.text
    files = [{"path": "notes.md", "text": changed}, {"path": "small.md", "text": "a\nc\n"}]
    again = await api.client.post(
        f"{S}/diffed/versions", json={"files": _skill("diffed", "", *files)["files"]},
        headers=publisher,
    )  # fmt: skip
    assert again.status_code == 201, again.text
    diff = await api.client.get(f"{S}/diffed/diff", params={"from": 1, "to": 2}, headers=publisher)
    assert diff.status_code == 200, diff.text
    by_path = {f["path"]: f for f in diff.json()["files"]}
    assert by_path["notes.md"]["diff"] is None
    assert "too large to diff line by line (6,000 and 6,000 lines" in by_path["notes.md"]["note"]
    assert "+c" in by_path["small.md"]["diff"]
