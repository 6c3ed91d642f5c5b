"""``registry rollout`` against a live registry: start, show, pause, resume, promote; a refusal in
one line; ``--release`` where the label needs approvals. And ``PromptClient.report``: one line
reports an outcome with the signed receipt of the record a rollout chose for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from registry import signing
from registry.client import ClientError, PromptClient
from tests.conftest import (
    OPERATOR_TOKEN,
    SIMPLE,
    LiveServer,
    PgServer,
    module_server,
    registry_command,
)


@pytest.fixture(scope="module")
async def server(
    pg_server: PgServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    key = tmp_path_factory.mktemp("rollout-cli") / "signing-key.pem"
    signing.make_key_file(key)
    async with module_server(pg_server, template_db, REGISTRY_SNAPSHOT_KEY_FILE=str(key)) as live:
        yield live


def cli(server: LiveServer, key: str, *args: str) -> Any:
    return registry_command(
        "rollout",
        *args,
        "--tenant",
        "roll",
        env={"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key},
    )


def test_registry_rollout(server: LiveServer) -> None:
    keys = server.tenant("roll", roles=("publisher",), prompts=[SIMPLE])
    second = {
        "arguments": SIMPLE["arguments"],
        "messages": [{"role": "user", "text": "Hi {{who}}"}],
    }
    added = httpx.post(f"{server.url}/api/v1/tenants/roll/prompts/greet/versions", json=second,
                       headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})  # fmt: skip
    assert added.status_code == 201, added.text
    key = keys["publisher"]
    started = cli(server, key, "start", "greet@production", "--version", "2", "--steps", "10,100")
    assert started.returncode == 0, started.stderr
    assert "running, step 1 of 2 (10 % of callers on v2)" in started.stdout
    assert "paused" in cli(server, key, "pause", "greet@production", "--reason", "a look").stdout
    assert "running" in cli(server, key, "resume", "greet@production").stdout
    shown = cli(server, key, "show", "greet@production")
    assert shown.returncode == 0 and "answers v1 0, v2 0" in shown.stdout
    promoted = cli(server, key, "promote", "greet@production")
    assert promoted.returncode == 0 and "promoted" in promoted.stdout
    refused = cli(server, key, "rollback", "greet@production")
    assert refused.returncode == 1 and "has no live rollout" in refused.stderr
    bad = cli(server, key, "start", "greet", "--version", "2")
    assert bad.returncode != 0 and "NAME@LABEL" in bad.stderr
    # Where the label needs approvals: the refusal says how, and --release opens the request.
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    gated = httpx.patch(f"{server.url}/api/v1/tenants/roll", headers=operator,
                        json={"approvals": {"production": 1}})  # fmt: skip
    assert gated.status_code == 200, gated.text
    third = {**second, "messages": [{"role": "user", "text": "Hey {{who}}"}]}
    added = httpx.post(f"{server.url}/api/v1/tenants/roll/prompts/greet/versions", json=third,
                       headers=operator)  # fmt: skip
    assert added.status_code == 201, added.text
    needs = cli(server, key, "start", "greet@production", "--version", "3")
    assert needs.returncode == 1 and "--release" in needs.stderr
    opened = cli(server, key, "start", "greet@production", "--version", "3", "--release", "v3")
    assert opened.returncode == 0, opened.stderr
    assert "the rollout starts once approved (1 approval(s))" in opened.stdout


def test_the_prompt_client_reports_an_outcome_in_one_line(server: LiveServer) -> None:
    keys = server.tenant("told", roles=("reader", "publisher"), prompts=[SIMPLE])
    base = f"{server.url}/api/v1/tenants/told"
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    second = {
        "arguments": SIMPLE["arguments"],
        "messages": [{"role": "user", "text": "Hi {{who}}"}],
    }
    added = httpx.post(f"{base}/prompts/greet/versions", json=second, headers=operator)
    assert added.status_code == 201, added.text
    with PromptClient(server.url, "told", keys["reader"]) as client:
        with pytest.raises(ClientError, match="not in a rollout"):
            client.report("greet", "good")
        started = httpx.put(f"{base}/prompts/greet/labels/production/rollout",
                            json={"version": 2, "steps": [50, 100]},
                            headers={"Authorization": f"Bearer {keys['publisher']}"})  # fmt: skip
        assert started.status_code == 201, started.text
        client.wait_until(lambda: client.get("greet").receipt is not None, timeout=10)
        held = client.get("greet")
        assert held.receipt is not None and held.receipt["version"] == held.version
        counted = client.report("greet", "bad", score=0.2)
        assert counted["counted"] is True and counted["side"] == held.receipt["rollout"]["side"]
        with pytest.raises(ClientError, match="reported already"):
            client.report("greet", "good")
    shown = httpx.get(f"{base}/prompts/greet/labels/production/rollout", headers=operator).json()
    side = shown[counted["side"]]
    assert (side["good"], side["bad"], side["version"]) == (0, 1, held.version)
