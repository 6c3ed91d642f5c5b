"""``registry library`` against a live registry: a library offers, a tenant subscribes, pins,
follows again, lists, and ends; a refusal is one line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import LiveServer, PgServer, module_server, registry_command


@pytest.fixture(scope="module")
async def server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    async with module_server(pg_server, template_db) as live:
        yield live


def cli(server: LiveServer, key: str, tenant: str, *args: str) -> Any:
    return registry_command(
        "library", *args, "--tenant", tenant,
        env={"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key},
    )  # fmt: skip


def test_registry_library(server: LiveServer) -> None:
    platform = server.tenant("platform", roles=("admin",))["admin"]
    acme = server.tenant("acme", roles=("admin", "reader"))
    refused = cli(server, acme["admin"], "acme", "subscribe", "platform")
    assert refused.returncode == 1 and "offers nothing to this tenant" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    offered = cli(server, platform, "platform", "offer", "acme", "--label", "production")
    assert offered.returncode == 0, offered.stderr
    subscribed = cli(server, acme["admin"], "acme", "subscribe", "platform")
    assert subscribed.returncode == 0, subscribed.stderr
    assert "platform@production: active, follows" in subscribed.stdout
    pinned = cli(server, acme["admin"], "acme", "pin", "platform", "greet@2", "tone@1")
    assert "pins greet@2, tone@1" in pinned.stdout, pinned.stderr
    bad = cli(server, acme["admin"], "acme", "pin", "platform", "greet")
    assert bad.returncode != 0 and "NAME@VERSION" in bad.stderr
    assert "follows" in cli(server, acme["admin"], "acme", "follow", "platform").stdout
    listed = cli(server, platform, "platform", "list")
    assert listed.returncode == 0, listed.stderr
    assert "acme" in listed.stdout and "OFFERED TO" in listed.stdout
    reader = cli(server, acme["reader"], "acme", "list")
    assert reader.returncode == 1 and "admin" in reader.stderr
    ended = cli(server, acme["admin"], "acme", "end", "platform")
    assert ended.returncode == 0 and "reads nothing of platform" in ended.stdout
    withdrawn = cli(server, platform, "platform", "withdraw", "acme")
    assert withdrawn.returncode == 0, withdrawn.stderr
