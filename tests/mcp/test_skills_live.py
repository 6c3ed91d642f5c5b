"""Skills read by real clients from a live server: the official Python SDK reads every file of every
skill through resources/read and gets exactly the bytes the manifest names; the MCP Inspector CLI
lists, gets and verifies them (its SEP-2640 digest checks); a new version reaches an open listen
stream as notifications/resources/list_changed (the time it took is printed); another tenant's
skills are never listed or read."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import types

from tests.conftest import LiveServer, PgServer, module_server
from tests.mcp.conftest import CONFORMANCE_SKILLS
from tests.mcp.test_sdk import sdk_client
from tests.mcp.test_stateless_live import META, REVISION, listen
from tests.node import INSPECTOR, node, npm_package

pytestmark = pytest.mark.slow
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
BINARY_SKILL = {
    "name": "brand-assets",
    "files": [
        {
            "path": "SKILL.md",
            "text": "---\nname: brand-assets\ndescription: Our logo\n---\nUse it.\n",
        },
        {"path": "assets/logo.png", "base64": base64.b64encode(PNG).decode()},
    ],
}


def stateless(client: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {"MCP-Protocol-Version": REVISION, "Mcp-Method": method}
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    answer = client.post(
        "/mcp/acme",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META, **params}},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.fixture(scope="module")
async def served(pg_server: PgServer, template_db: str) -> AsyncIterator[tuple[LiveServer, str]]:
    async with module_server(pg_server, template_db) as live_server:
        yield _serve(live_server)


def _serve(live_server: LiveServer) -> tuple[LiveServer, str]:
    keys = live_server.tenant("acme", roles=("reader", "publisher"))
    for skill in [*CONFORMANCE_SKILLS, BINARY_SKILL]:
        live_server.skill("acme", skill)
    live_server.tenant("other")  # the same skill name in another tenant: never served to acme
    theirs = "---\nname: code-review\ndescription: Theirs\n---\nSecret.\n"
    live_server.skill(
        "other", {"name": "code-review", "files": [{"path": "SKILL.md", "text": theirs}]}
    )
    return live_server, keys["reader"]


async def test_the_sdk_reads_every_file_with_matching_digests(
    served: tuple[LiveServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, key = served
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as http:
        entries = stateless(http, "skills/list", {})["result"]["skills"]
    assert [e["frontmatter"]["name"] for e in entries] == [
        "brand-assets", "code-review", "pdf-processing"
    ]  # fmt: skip
    assert all(e["frontmatter"]["description"] != "Theirs" for e in entries)
    manifest = {r["uri"]: r for e in entries for r in e["resources"]}
    async with sdk_client(f"{server.url}/mcp/acme", key, "2025-11-25", monkeypatch) as session:
        initialized = await session.initialize()
        assert initialized.capabilities.resources is not None
        listed = await session.list_resources()
        assert sorted(str(r.uri) for r in listed.resources) == sorted(e["uri"] for e in entries)
        for uri, expected in manifest.items():
            read = await session.read_resource(uri)
            (contents,) = read.contents
            if isinstance(contents, types.TextResourceContents):
                data = contents.text.encode("utf-8")
            else:
                data = base64.b64decode(contents.blob)
            assert f"sha256:{hashlib.sha256(data).hexdigest()}" == expected["digest"], uri
            assert len(data) == expected["size"], uri
        assert (await session.read_resource("skill://brand-assets/assets/logo.png")).contents[0]
        with pytest.raises(Exception, match="not found"):
            await session.read_resource("skill://code-review/../other/SKILL.md")


def inspector() -> list[str]:
    return [node(), str(npm_package(INSPECTOR)), "--cli"]


def test_the_inspector_cli_lists_gets_and_verifies(served: tuple[LiveServer, str]) -> None:
    server, key = served
    url = f"{server.url}/mcp/acme"
    auth = ["--header", f"Authorization: Bearer {key}"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*inspector(), url, "--transport", "http", "--protocol-era", "modern", *auth, *args],
            capture_output=True, text=True, timeout=120, check=False, cwd=INSPECTOR.cache,
        )  # fmt: skip

    listed = run("--method", "skills/list", "--verify")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    reports = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 3, listed.stdout
    got = run("--method", "skills/get", "--uri", "skill://pdf-processing/SKILL.md", "--verify")
    assert got.returncode == 0, got.stdout + got.stderr
    read = run("--method", "resources/read", "--uri", "skill://pdf-processing/references/FORMS.md")
    assert read.returncode == 0 and "Fill every field." in read.stdout, read.stdout + read.stderr


async def test_a_new_version_reaches_an_open_stream_within_a_second(
    served: tuple[LiveServer, str],
) -> None:
    server, key = served
    operator = {"Authorization": "Bearer operator-token-for-tests"}
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        stream = listen(client, 1, {"resourcesListChanged": True})
        ack = await asyncio.wait_for(anext(stream), 10)
        assert ack["params"]["notifications"] == {"resourcesListChanged": True}
        body = {
            "files": [{"path": "SKILL.md", "text": "---\nname: code-review\ndescription: How we "
                       "review a change, now\n---\n# Review\n"}],
            "labels": ["production"],
        }  # fmt: skip
        started = time.monotonic()
        written = await client.post(
            "/api/v1/tenants/acme/skills/code-review/versions", json=body, headers=operator
        )
        assert written.status_code == 201, written.text
        changed = await asyncio.wait_for(anext(stream), 10)
        # Reported, not asserted (timings are never pass/fail here): run with -s to see it.
        print(f"resources list_changed {time.monotonic() - started:.3f} s after the write began")
        assert changed["method"] == "notifications/resources/list_changed"
        await stream.aclose()
