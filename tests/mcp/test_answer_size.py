"""What every answer carries of the server (issue 75): the two fields the revision requires of
serverInfo in each result's _meta, the whole serverInfo in server/discover only."""

from __future__ import annotations

from tests.api.conftest import SIMPLE, Api, auth
from tests.mcp.test_stateless import Stateless

SERVER = "io.modelcontextprotocol/serverInfo"


async def test_answers_name_the_server_briefly_and_discovery_whole(api: Api) -> None:
    keys = await api.tenant("acme")
    made = await api.client.post("/api/v1/tenants/acme/prompts",
                                 json={**SIMPLE, "labels": ["production"]},
                                 headers=auth(keys["publisher"]))  # fmt: skip
    assert made.status_code == 201, made.text
    client = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    got = await client.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    assert set(got["_meta"][SERVER]) == {"name", "version"}, got["_meta"][SERVER]
    listed = await client.result("prompts/list")
    assert set(listed["_meta"][SERVER]) == {"name", "version"}
    found = await client.result("server/discover")
    assert {"name", "version", "title", "icons"} <= set(found["_meta"][SERVER]), found["_meta"]
