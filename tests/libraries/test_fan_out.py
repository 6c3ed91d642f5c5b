"""A library's publish reaches the open MCP streams of the tenants that follow it, in every worker
(one notification, fanned out by each worker), and not those of tenants that pinned versions: their
first word after it is their own next change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from registry.client import PromptClient
from tests.conftest import LiveServer, PgServer, free_port, module_server, registry_command
from tests.mcp.events_client import EventsClient, EventsError
from tests.mcp.test_stateless import Stateless
from tests.mcp.test_stateless_live import stream_events
from tests.streams import seq_of, streams, write
from tests.test_client import keypair

pytestmark = pytest.mark.slow

V1 = "/api/v1/tenants"
ROLES = ("admin", "publisher", "reader")


@pytest.fixture(scope="module")
async def server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    async with module_server(pg_server, template_db, workers=2) as server:
        yield server


def call(server: LiveServer, method: str, path: str, key: str, body: object) -> None:
    answer = httpx.request(method, f"{server.url}{V1}{path}", json=body,
                           headers={"Authorization": f"Bearer {key}"}, timeout=30)  # fmt: skip
    assert answer.status_code < 300, answer.text


async def test_a_publish_reaches_followers_streams_and_not_pinners(
    server: LiveServer, pg_server: PgServer
) -> None:
    platform = server.tenant("platform", roles=ROLES)
    acme = server.tenant("acme", roles=ROLES)
    beta = server.tenant("beta", roles=ROLES)
    write(server, "platform", platform["publisher"], "tone")
    for tenant in ("acme", "beta"):
        call(server, "POST", "/platform/subscribers", platform["admin"],
             {"tenant": tenant, "label": "production"})  # fmt: skip
    call(server, "POST", "/acme/libraries", acme["admin"],
         {"library": "platform", "label": "production"})  # fmt: skip
    call(server, "POST", "/beta/libraries", beta["admin"],
         {"library": "platform", "label": "production", "pins": {"tone": 1}})  # fmt: skip

    async with (
        streams(server, "acme", acme["reader"], 4) as followers,
        streams(server, "beta", beta["reader"], 4) as pinners,
    ):
        started = time.monotonic()
        write(server, "platform", platform["publisher"], "style")  # a publish on the label
        told = [await stream.next() for stream in followers]
        took = time.monotonic() - started
        assert len(told) == 4
        write(server, "beta", beta["publisher"], "sentinel")  # beta's own next change
        heard = [await stream.next() for stream in pinners]
        assert server.database is not None
        inspect = await pg_server.connect(server.database)
        try:
            own = await seq_of(inspect, "beta")
        finally:
            await inspect.close()
        # Each pinner's first word is the sentinel's own sequence number: the library's publish
        # told them nothing.
        assert heard == [own] * 4, (heard, own)
    print(f"fan-out: a library publish reached 4 followers' streams in {took:.3f} s")


def text(client: PromptClient, name: str) -> str:
    return str(client.render(name).messages[0]["content"]["text"])


def test_the_prompt_client_serves_the_merged_view_and_follows_a_publish(
    server: LiveServer, pg_server: PgServer, tmp_path: Path
) -> None:
    library = server.tenant("shared", roles=ROLES)
    team = server.tenant("team", roles=ROLES)
    write(server, "shared", library["publisher"], "tone")
    write(server, "team", team["publisher"], "own")
    call(server, "POST", "/shared/subscribers", library["admin"],
         {"tenant": "team", "label": "production"})  # fmt: skip
    call(server, "POST", "/team/libraries", team["admin"],
         {"library": "shared", "label": "production"})  # fmt: skip
    page = httpx.get(f"{server.url}{V1}/team/served",
                     headers={"Authorization": f"Bearer {team['reader']}"})  # fmt: skip
    assert page.status_code == 200, page.text
    records = {r["name"]: r for r in page.json()["prompts"]}
    assert set(records) == {"own", "tone"} and records["tone"]["library"] == "shared"
    one = httpx.get(f"{server.url}{V1}/team/served/tone",
                    headers={"Authorization": f"Bearer {team['reader']}"})  # fmt: skip
    assert one.status_code == 200 and one.json()["prompt"]["library"] == "shared", one.text

    # A signed snapshot holds the merged view too: a client started from it alone has both.
    private, public = keypair(tmp_path)
    snapshot = tmp_path / "team.snapshot"
    env = {"REGISTRY_DATABASE_URL": pg_server.plain_url(str(server.database)),
           "REGISTRY_SNAPSHOT_KEY_FILE": str(private)}  # fmt: skip
    written = registry_command("snapshot", str(snapshot), "--tenant", "team", env=env)
    assert written.returncode == 0 and "wrote 2 prompt(s) of team@production" in written.stderr
    away = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = {"snapshot": snapshot, "snapshot_public_key": public, "timeout": 2}
    with PromptClient(away, "team", team["reader"], **options) as cold:
        assert cold.source == "snapshot" and sorted(cold.names()) == ["own", "tone"]
        assert text(cold, "tone") == "I am tone"

    with PromptClient(server.url, "team", team["reader"], label="production") as client:
        assert sorted(client.names()) == ["own", "tone"]
        assert text(client, "tone") == "I am tone"
        again = {"messages": [{"role": "user", "content": {"type": "text", "text": "tone, again"}}],
                 "labels": ["production"]}  # fmt: skip
        call(server, "POST", "/shared/prompts/tone/versions", library["publisher"], again)
        client.wait_until(lambda: text(client, "tone") == "tone, again", timeout=60)


async def test_a_publish_is_a_library_changed_event_on_followers_event_streams(
    server: LiveServer,
) -> None:
    """The Events extension's ``library.changed`` (push only): a follower's events/stream hears its
    library's publish, naming the library, with no cursor; it is not polled or sent to webhooks."""
    platform = server.tenant("platform-ev", roles=ROLES)
    acme = server.tenant("acme-ev", roles=ROLES)
    write(server, "platform-ev", platform["publisher"], "tone")
    call(server, "POST", "/platform-ev/subscribers", platform["admin"],
         {"tenant": "acme-ev", "label": "production"})  # fmt: skip
    call(server, "POST", "/acme-ev/libraries", acme["admin"],
         {"library": "platform-ev", "label": "production"})  # fmt: skip
    headers = {"Authorization": f"Bearer {acme['reader']}"}
    async with httpx.AsyncClient(base_url=server.url, timeout=30, headers=headers) as client:
        events = EventsClient(Stateless(client, "/mcp/acme-ev", headers))
        assert (await events.types())["library.changed"]["delivery"] == ["push"]
        with pytest.raises(EventsError) as polled:
            await events.call("events/poll", {"name": "library.changed", "arguments": {}})
        assert polled.value.code == -32026
        frames = stream_events(client, "/mcp/acme-ev", {"name": "library.changed",
                                                         "arguments": {"name": "platform-ev"}})  # fmt: skip
        active = await asyncio.wait_for(anext(frames), 10)
        assert active["method"] == "notifications/events/active"
        assert active["params"]["cursor"] is None
        write(server, "platform-ev", platform["publisher"], "style")  # a publish on the label
        event = await asyncio.wait_for(anext(frames), 10)
        while event["method"] == "notifications/events/heartbeat":
            event = await asyncio.wait_for(anext(frames), 10)
        assert event["method"] == "notifications/events/event", event
        assert event["params"]["data"]["library"] == "platform-ev"
        assert event["params"]["cursor"] is None
        await frames.aclose()
