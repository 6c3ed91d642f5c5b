"""Random messages to the MCP endpoint, in both eras: always a JSON-RPC answer, never a 500.
(subscriptions/listen opens a stream that never ends by itself: the stream tests cover it.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import Api
from tests.mcp.conftest import ACCEPT, CONFORMANCE_PROMPTS, CONFORMANCE_SKILLS, add_prompts

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(["test_simple_prompt", "test_prompt_with_arguments@1", "x@²", "x@9" * 6,
                       "\ud800", "prompts/get", "prompts/list", "initialize", "", "²",
                       "skill://pdf-processing/SKILL.md", "skill://pdf-processing",
                       "skill://pdf-processing/../x", "skill://", "skill:///SKILL.md"])
)  # fmt: skip
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
methods = st.sampled_from(
    ["prompts/get", "prompts/list", "completion/complete", "server/discover", "ping",
     "initialize", "logging/setLevel", "skills/list", "skills/get", "resources/read",
     "resources/list", "resources/directory/read", "tools/list", "tools/call", "nope"]
) | st.text(max_size=10)  # fmt: skip


@st.composite
def messages(draw: Any) -> tuple[bytes, dict[str, str]]:
    method = draw(methods)
    params: Any = draw(st.dictionaries(st.text(max_size=8), values, max_size=4))
    if draw(st.booleans()) and isinstance(params, dict):
        params["_meta"] = draw(st.sampled_from([META, {**META, "x": draw(values)}, draw(values)]))
    if draw(st.booleans()):
        params = {**params, "name": draw(values), "arguments": draw(values)}
    if draw(st.booleans()):
        params = {**params, "uri": draw(values), "cursor": draw(values)}
    message: Any = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "1.0", 2])), "method": method,
                    "params": params}  # fmt: skip
    if draw(st.booleans()):
        message["id"] = draw(scalars)
    shape = draw(st.sampled_from(["one", "batch", "deep", "bytes"]))
    if shape == "batch":
        message = [message, draw(values)]
    elif shape == "deep":
        message = json.loads("[" * 300 + "1" + "]" * 300)
    raw = draw(st.binary(max_size=64)) if shape == "bytes" else json.dumps(message).encode()
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": draw(st.sampled_from(["2026-07-28", "2025-11-25", "1999-01-01"])),
        "Mcp-Method": method if isinstance(method, str) and method.isascii() else "x",
    }
    return raw, headers


@pytest.fixture
async def public(api: Api) -> None:
    keys = await api.tenant("acme", public_read=True)
    await api.client.patch("/api/v1/tenants/acme", json={"mcp_tools": True}, headers=api.operator)
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    for skill in CONFORMANCE_SKILLS:
        made = await api.client.post(
            "/api/v1/tenants/acme/skills", json={**skill, "labels": ["production"]},
            headers={"Authorization": keys["publisher"]},
        )  # fmt: skip
        assert made.status_code == 201, made.text


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sent=messages())
async def test_random_messages_get_json_rpc_answers(
    api: Api, public: None, sent: tuple[bytes, dict[str, str]]
) -> None:
    raw, headers = sent
    answer = await api.client.post("/mcp/acme", content=raw, headers=headers)
    assert answer.status_code < 500, (answer.status_code, answer.text)
    if answer.status_code in (202, 204):
        return
    body = answer.json()
    for item in body if isinstance(body, list) else [body]:
        assert item["jsonrpc"] == "2.0"
        assert ("result" in item) != ("error" in item), item
