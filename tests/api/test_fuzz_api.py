"""Random JSON to the write endpoints: only 2xx or 4xx answers, and never a half-written row."""

from __future__ import annotations

import base64
import copy
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import SIMPLE, Api, auth

STATUS_SEEN: dict[int, int] = {2: 0, 4: 0}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
# Values that tend to be almost right: template syntax, names, sizes, MIME types, base64.
tricky: st.SearchStrategy[str] = st.sampled_from([
    "{{who}}", "{{#who}}x", "{{/who}}", "{{unknown}}", "{{=<% %>=}}<%who%>", "{{> p}}", "", " ",
    "a" * 300, "production", "latest", "image/png", "not a mime", "aGVsbG8=", "%%%", "a" * 64, "user",
    "assistant", "system", "resource", "image", "audio", "text", "resource_link", -1, 0, 10**12, None,
    True, [], {}, "(a)\\1", "[a-z]+", "x:y.z", "bad/name", "@", "\u0000", "\ud7ff",
])  # fmt: skip


def mutate(body: Any, path: list[Any], value: Any) -> Any:
    """Replace the node at ``path`` (as far as it exists) with ``value``."""
    body = copy.deepcopy(body)
    node = body
    for step in path[:-1]:
        if isinstance(node, dict) and node:
            node = node[sorted(node)[step % len(node)]]
        elif isinstance(node, list) and node:
            node = node[step % len(node)]
        else:
            return value
    if isinstance(node, dict) and node:
        node[sorted(node)[path[-1] % len(node)]] = value
    elif isinstance(node, list) and node:
        node[path[-1] % len(node)] = value
    return body


VALID = {
    **SIMPLE,
    "labels": ["staging"],
    "tags": ["t"],
    "arguments": [
        {"name": "who", "required": True, "enum": ["a", "b"], "pattern": "[a-z]+", "max_length": 3}
    ],
    "messages": [
        {"role": "user", "content": {"type": "text", "text": "Hi {{who}}"}},
        {
            "role": "assistant",
            "content": {"type": "image", "mimeType": "image/png", "data": PNG},
        },
        {
            "role": "user",
            "content": {"type": "resource", "resource": {"uri": "x://y", "text": "{{who}}"}},
        },
    ],
}

VERSION = {k: v for k, v in VALID.items() if k not in ("name", "tags")}
SKILL_MD = "---\nname: review\ndescription: How we review\n---\nCheck it.\n"
SKILL = {"name": "review", "files": [{"path": "SKILL.md", "text": SKILL_MD},
                                     {"path": "references/A.md", "text": "a"}]}  # fmt: skip
names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,10}", fullmatch=True) | st.text(max_size=12)
words = st.text(alphabet="abcxyz{}#/^!= \n", max_size=20)


def valid_bodies(path: str) -> st.SearchStrategy[Any]:
    """Bodies this endpoint accepts (mostly), with the values that vary drawn at random."""
    if path == "/prompts":
        return st.builds(lambda n, w: {**VALID, "name": n, "description": w}, names, words)
    if path == "/prompts/greet/versions":
        return st.builds(
            lambda w, t: {**VERSION, "messages": [{"role": "user", "content": {"type": "text", "text": t}}], "title": w},
            words, st.sampled_from(["Hi {{who}}", "{{#who}}x{{/who}}", "plain", "{{who}"]) | words,
        )  # fmt: skip
    if path == "/skills":
        return st.builds(
            lambda n, w: {**SKILL, "name": n, "files": [
                {"path": "SKILL.md", "text": SKILL_MD.replace("review", n)}, {"path": w, "text": w}]},
            st.sampled_from(["review", "other", "a--b", "Bad"]) | names, words,
        )  # fmt: skip
    if path == "/skills/review/versions":
        return st.builds(
            lambda p, t: {"files": [{"path": "SKILL.md", "text": t}, {"path": p, "base64": "AAEC"}]},
            st.sampled_from(["x.bin", "../up", "a/b", "SKILL.md", ""]) | words,
            st.sampled_from([SKILL_MD, SKILL_MD + "more", "no front matter"]) | words,
        )  # fmt: skip
    if path.startswith("/skills/review/labels"):
        return st.builds(lambda v: {"version": v}, st.integers(-1, 4))
    if path.startswith("/prompts/greet/labels"):
        return st.builds(lambda v: {"version": v}, st.integers(-1, 4))
    if path.endswith("/render"):
        return st.builds(
            lambda w: {"arguments": {"who": w}}, st.sampled_from(["a", "ab", "abcd", "A"]) | words
        )
    if path == "/import":
        return st.builds(
            lambda n: {
                "prompts": [
                    {"name": n, "versions": [{**VERSION, "version": 1}], "labels": {"staging": 1}}
                ]
            },
            names,
        )
    return st.builds(lambda tags: {"tags": tags}, st.lists(names, max_size=3))


ENDPOINTS = [
    ("POST", "/prompts"), ("POST", "/prompts/greet/versions"), ("PUT", "/prompts/greet/labels/staging"),
    ("POST", "/prompts/greet/render"), ("POST", "/import"), ("PATCH", "/prompts/greet"),
    ("POST", "/skills"), ("POST", "/skills/review/versions"), ("PUT", "/skills/review/labels/staging"),
]  # fmt: skip


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, Any]:
    method, path = draw(st.sampled_from(ENDPOINTS))
    body = draw(valid_bodies(path))
    choice = draw(st.integers(0, 2))
    if choice == 1:  # a valid shape with one node replaced
        body = mutate(
            body,
            draw(st.lists(st.integers(0, 50), min_size=1, max_size=5)),
            draw(tricky | json_values),
        )
    elif choice == 2:
        body = draw(json_values)
    return method, path, body


async def check_invariants(db: asyncpg.Connection) -> None:
    """What a committed write always leaves behind, whatever was sent."""
    broken = await db.fetch(
        """
        SELECT p.name FROM prompts p
        WHERE p.latest_version <> (SELECT count(*) FROM prompt_versions v WHERE v.prompt_id = p.id)
           OR p.latest_version < 1
           OR NOT EXISTS (SELECT 1 FROM labels l WHERE l.prompt_id = p.id AND l.label = 'latest'
                          AND l.version = p.latest_version)
        """
    )
    assert broken == []
    empty = await db.fetchval(
        "SELECT count(*) FROM prompt_versions v WHERE NOT EXISTS "
        "(SELECT 1 FROM prompt_messages m WHERE m.prompt_id = v.prompt_id AND m.version = v.version)"
    )
    assert empty == 0
    seqs = [r["seq"] for r in await db.fetch("SELECT seq FROM change_log ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1))
    unlogged = await db.fetchval(
        "SELECT count(*) FROM prompt_versions v WHERE NOT EXISTS (SELECT 1 FROM audit_log a "
        "WHERE a.action = 'version.create' AND a.target = "
        "(SELECT 'prompt:' || p.name || '@' || v.version FROM prompts p WHERE p.id = v.prompt_id))"
    )
    assert unlogged == 0
    skills = await db.fetch(
        """
        SELECT s.name FROM skills s
        WHERE s.latest_version <> (SELECT count(*) FROM skill_versions v WHERE v.skill_id = s.id)
           OR NOT EXISTS (SELECT 1 FROM skill_labels l WHERE l.skill_id = s.id AND l.label = 'latest'
                          AND l.version = s.latest_version)
           OR EXISTS (SELECT 1 FROM skill_versions v WHERE v.skill_id = s.id AND NOT EXISTS (
                SELECT 1 FROM skill_files f WHERE f.skill_id = v.skill_id AND f.version = v.version
                   AND f.path = 'SKILL.md'))
        """
    )
    assert skills == []


@pytest.fixture
async def seeded(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme")
    response = await api.client.post(
        "/api/v1/tenants/acme/prompts", json=VALID, headers=auth(keys["publisher"])
    )
    assert response.status_code == 201, response.text
    response = await api.client.post(
        "/api/v1/tenants/acme/skills", json=SKILL, headers=auth(keys["publisher"])
    )
    assert response.status_code == 201, response.text
    return keys


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
async def test_random_json_never_500s_or_half_writes(
    api: Api, seeded: dict[str, str], superuser: asyncpg.Connection, request: tuple[str, str, Any]
) -> None:
    method, path, body = request
    response = await api.client.request(
        method, f"/api/v1/tenants/acme{path}", json=body, headers=auth(seeded["publisher"])
    )
    assert 200 <= response.status_code < 500, (response.status_code, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["detail"]
    STATUS_SEEN[response.status_code // 100] = STATUS_SEEN.get(response.status_code // 100, 0) + 1
    await check_invariants(superuser)


def test_fuzzing_reached_both_success_and_rejection() -> None:
    """The generator must exercise accepted writes too, or the invariants above prove nothing."""
    if STATUS_SEEN[2] + STATUS_SEEN[4] == 0:
        pytest.skip("the fuzz test did not run in this session")
    print("fuzz status classes:", STATUS_SEEN)
    assert STATUS_SEEN[2] > 0
    assert STATUS_SEEN[4] > 0
