"""`registry import --from langfuse` on a live server, from a file of prompt versions in the shapes
Langfuse documents (its public API's Prompt object: text and chat prompts, ``{{variables}}``,
composability tags as ``resolve=false`` returns them, message placeholders, folders, labels with
``latest`` its own, free-form config): versions, labels, tags, config and arguments land, what does not
map is reported, a dry run writes nothing, and an existing prompt is left alone."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    LiveServer,
    PgServer,
    module_server,
    registry_command,
)

pytestmark = pytest.mark.slow

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}

# Prompt versions as Langfuse's GET /api/public/v2/prompts/{name}?version=N answers them.
EXPORT: list[dict[str, Any]] = [
    {"name": "support/tone", "version": 1, "type": "text",
     "prompt": "Be warm and brief.", "config": {}, "labels": ["production", "latest"],
     "tags": ["support"], "commitMessage": None},
    {"name": "movie-critic", "version": 1, "type": "text",
     "prompt": "As a {{criticlevel}} movie critic, do you like {{movie}}?",
     "config": {"model": "gpt-4o", "temperature": 0.7, "supported_languages": ["en", "fr"]},
     "labels": [], "tags": ["movies"], "commitMessage": "first cut"},
    {"name": "movie-critic", "version": 3, "type": "text",
     "prompt": "As a {{criticlevel}} movie critic, do you like {{movie}}? "
               "@@@langfusePrompt:name=support/tone|version=1@@@",
     "config": {"model": "gpt-4o", "temperature": 5},
     "labels": ["production", "latest", "Prod A"], "tags": ["movies"],
     "commitMessage": "tone from the shared prompt"},
    {"name": "movie-critic-chat", "version": 1, "type": "chat",
     "prompt": [
         {"role": "system", "content": "You are an {{criticlevel}} movie critic"},
         {"type": "placeholder", "name": "chat_history"},
         {"role": "user", "content": "Do you like {{movie}}?"},
     ],
     "config": {"model": "gpt-4o"}, "labels": ["staging", "latest"], "tags": [],
     "commitMessage": None},
]  # fmt: skip


@pytest.fixture(scope="module")
async def server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    async with module_server(pg_server, template_db) as server:
        yield server


def run(server: LiveServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key}
    return registry_command("import", *args, env=env, timeout=120)


def test_a_langfuse_export_lands_with_a_report(server: LiveServer, tmp_path: Path) -> None:
    key = server.tenant("moved", roles=("publisher",))["publisher"]
    export = tmp_path / "langfuse.json"
    export.write_text(json.dumps({"data": EXPORT}))
    base = f"{server.url}/api/v1/tenants/moved"

    dry = run(server, key, "--from", "langfuse", str(export), "--tenant", "moved", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "movie-critic: would create: 2 version(s), labels: production" in dry.stdout
    assert httpx.get(f"{base}/prompts", headers=OPERATOR).json()["items"] == []

    done = run(server, key, "--from", "langfuse", str(export), "--tenant", "moved")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.index("support.tone: create") < done.stdout.index("movie-critic: create")
    report = done.stderr
    for expected in (
        "support/tone: imported as 'support.tone'",
        "movie-critic: versions numbered anew (v3→v2)",
        "movie-critic v3: config not kept (temperature:",
        "movie-critic v3: label 'Prod A' is not a label name here; dropped",
        "movie-critic-chat v1: message 1 (system) written as a user message",
        "movie-critic-chat v1: message 2 is a placeholder ('chat_history')",
        "imported 3 of 3 prompt(s)",
    ):
        assert expected in report, (expected, report)

    critic = httpx.get(f"{base}/prompts/movie-critic", headers=OPERATOR).json()
    assert critic["labels"] == {"latest": 2, "production": 2}
    assert critic["tags"] == ["movies"]
    first = httpx.get(f"{base}/prompts/movie-critic/versions/1", headers=OPERATOR).json()
    assert first["config"] == {"model": "gpt-4o", "temperature": 0.7,
                               "supported_languages": ["en", "fr"]}  # fmt: skip
    assert first["commit_message"] == "first cut"
    assert [(a["name"], a["required"]) for a in first["arguments"]] == [
        ("criticlevel", True), ("movie", True)]  # fmt: skip
    rendered = httpx.post(
        f"{base}/prompts/movie-critic/render",
        json={"label": "production", "arguments": {"criticlevel": "stern", "movie": "Heat"}},
        headers=OPERATOR,
    )
    assert rendered.status_code == 200, rendered.text
    text = rendered.json()["messages"][0]["content"]["text"]
    assert text == "As a stern movie critic, do you like Heat? Be warm and brief."

    chat = httpx.get(f"{base}/prompts/movie-critic-chat", headers=OPERATOR).json()
    assert chat["labels"]["staging"] == 1
    messages = chat["latest"]["messages"]
    assert [(m["role"], m["content"]["text"]) for m in messages] == [
        ("user", "You are an {{criticlevel}} movie critic"),
        ("user", "Do you like {{movie}}?"),
    ]

    again = run(server, key, "--from", "langfuse", str(export), "--tenant", "moved")
    assert again.returncode == 0, again.stderr
    assert "movie-critic: exists: the tenant has it; not imported" in again.stdout
    assert httpx.get(f"{base}/prompts/movie-critic", headers=OPERATOR).json()["latest_version"] == 2


def test_a_file_that_is_not_an_export_is_refused(server: LiveServer, tmp_path: Path) -> None:
    key = server.tenant("not-moved", roles=("publisher",))["publisher"]
    for content, said in (
        ("not json at all {", "not JSON, nor JSON lines"),
        ('[{"title": "no name"}]', "not a Langfuse prompt"),
        ('[{"name": "x", "version": 1, "type": "text", "prompt": "a"},'
         ' {"name": "x", "version": 1, "type": "text", "prompt": "b"}]', "a version appears twice"),
    ):  # fmt: skip
        bad = tmp_path / "bad.json"
        bad.write_text(content)
        refused = run(server, key, "--from", "langfuse", str(bad), "--tenant", "not-moved")
        assert refused.returncode == 1 and said in refused.stderr, refused.stderr


def test_under_approvals_the_versions_land_and_the_label_waits(
    server: LiveServer, tmp_path: Path
) -> None:
    """A tenant whose production needs approvals: the versions are written, the label is not moved
    (the report says why and how), and the exit status says something did not land."""
    key = server.tenant("gated", roles=("admin", "publisher"))
    gated = httpx.patch(f"{server.url}/api/v1/tenants/gated", json={"approvals": {"production": 1}},
                        headers={"Authorization": f"Bearer {key['admin']}"})  # fmt: skip
    assert gated.status_code == 200, gated.text
    export = tmp_path / "one.json"
    export.write_text(
        json.dumps(
            [
                EXPORT[1],
                {**EXPORT[1], "version": 2, "prompt": "Rate {{movie}}.", "labels": ["production"]},
            ]
        )
    )
    done = run(server, key["publisher"], "--from", "langfuse", str(export), "--tenant", "gated")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "movie-critic: error: 2 version(s), labels: none; label production not moved" in done.stdout
    )
    held = httpx.get(f"{server.url}/api/v1/tenants/gated/prompts/movie-critic", headers=OPERATOR)
    assert held.json()["latest_version"] == 2 and "production" not in held.json()["labels"]
