"""One answer serving a rendering is bounded as the bytes it sends, not only as the text it renders
(Hardening IV, finding 11: a tool answer holds the rendering twice and JSON escapes multiply it, so
a 65,536-character argument made a 23.6 MB answer)."""

from __future__ import annotations

from tests.api.conftest import Api, auth
from tests.mcp.test_stateless import Stateless, meta

T = "/api/v1/tenants/acme"
ECHO = {
    "name": "echo", "as_tool": True, "labels": ["production"],
    "arguments": [{"name": "who", "required": True}],
    "messages": [{"role": "user", "content": {"type": "text", "text": "{{who}} " * 30}}],
}  # fmt: skip


async def test_a_tool_answer_over_the_bound_is_a_tool_error_that_says_so(api: Api) -> None:
    keys = await api.tenant("acme")
    admin = auth(keys["admin"])
    assert (await api.client.patch(T, json={"mcp_tools": True}, headers=admin)).status_code == 200
    made = await api.client.post(f"{T}/prompts", json=ECHO, headers=admin)
    assert made.status_code == 201, made.text
    client = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    escaped = (
        "\u0001" * 65_536
    )  # six bytes each as JSON; 1.97 M characters rendered, under its bound

    called = await client.post(
        "tools/call", {"_meta": meta(), "name": "echo", "arguments": {"who": escaped}},
        **{"Mcp-Name": "echo"},
    )  # fmt: skip
    assert called.status_code == 200
    assert len(called.content) < 100_000, len(called.content)
    result = called.json()["result"]
    assert result["isError"] is True
    assert "REGISTRY_MAX_ANSWER_BYTES" in result["content"][0]["text"]

    got = await client.post(
        "prompts/get", {"_meta": meta(), "name": "echo", "arguments": {"who": escaped}},
        **{"Mcp-Name": "echo"},
    )  # fmt: skip
    assert got.json()["error"]["code"] == -32602, got.text[:500]
    assert "REGISTRY_MAX_ANSWER_BYTES" in got.json()["error"]["message"]

    small = await client.post(
        "tools/call", {"_meta": meta(), "name": "echo", "arguments": {"who": "Ann"}},
        **{"Mcp-Name": "echo"},
    )  # fmt: skip
    assert "isError" not in small.json()["result"], small.text
