"""Receipts: every answer that serves a prompt or a skill's file carries a signed receipt of exactly
what it served; `registry verify-receipt` accepts it with the published key, and refuses it once one
byte of the answer or of the receipt is changed. A cached answer keeps its receipt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import LiveServer, registry_command
from tests.mcp.conftest import CONFORMANCE_SKILLS
from tests.mcp.test_stateless_live import META, REVISION
from tests.mcp.test_tools import PLAIN, REPLY
from tests.test_verify_skill import signing_server

__all__ = ["signing_server"]


def mcp(http: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {"MCP-Protocol-Version": REVISION, "Mcp-Method": method}
    if method in ("prompts/get", "tools/call"):
        headers["Mcp-Name"] = params["name"]
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    answer = http.post(
        "/mcp/acme",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META, **params}},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def verify(tmp_path: Path, name: str, answer: Any, key: Path) -> Any:
    saved = tmp_path / f"{name}.json"
    saved.write_text(json.dumps(answer))
    return registry_command("verify-receipt", str(saved), "--public-key", str(key), env={})


def test_receipts_verify_and_a_changed_byte_does_not(
    signing_server: LiveServer, tmp_path: Path
) -> None:
    reader = signing_server.tenant("acme", roles=("reader",), prompts=[REPLY, PLAIN], tools=True)
    signing_server.skill("acme", CONFORMANCE_SKILLS[1])
    key = tmp_path / "published.pub"
    with httpx.Client(base_url=signing_server.url, timeout=30) as http:
        key.write_bytes(http.get("/.well-known/prompt-registry/signing-key").content)
        http.headers["Authorization"] = f"Bearer {reader['reader']}"
        arguments = {"topic": "billing"}
        got = mcp(http, "prompts/get", {"name": "support.reply", "arguments": arguments})
        again = mcp(http, "prompts/get", {"name": "support.reply", "arguments": arguments})
        called = mcp(http, "tools/call", {"name": "support_reply", "arguments": arguments})
        read = mcp(http, "resources/read", {"uri": "skill://code-review/SKILL.md"})
        rendered = http.post(
            "/api/v1/tenants/acme/prompts/support.reply/render", json={"arguments": arguments}
        ).json()
    receipt = got["result"]["_meta"]["dev.prompt-registry/receipt"]
    assert (receipt["prompt"], receipt["version"], receipt["label"]) == (
        "support.reply",
        1,
        "production",
    )
    assert receipt["alg"] == "Ed25519"
    assert again["result"]["_meta"] == got["result"]["_meta"]  # kept with the cached answer
    for name, answer in (("get", got), ("tool", called), ("skill", read), ("rest", rendered)):
        done = verify(tmp_path, name, answer, key)
        assert done.returncode == 0, (name, done.stderr)
        assert "verified" in done.stdout

    changed = json.loads(json.dumps(got))
    text = changed["result"]["messages"][0]["content"]["text"]
    changed["result"]["messages"][0]["content"]["text"] = text.replace("billing", "billinG")
    refused = verify(tmp_path, "changed-answer", changed, key)
    assert refused.returncode == 1 and "not the one this receipt names" in refused.stderr

    forged = json.loads(json.dumps(got))
    forged["result"]["_meta"]["dev.prompt-registry/receipt"]["version"] = 2
    refused = verify(tmp_path, "changed-receipt", forged, key)
    assert refused.returncode == 1 and "does not verify" in refused.stderr
