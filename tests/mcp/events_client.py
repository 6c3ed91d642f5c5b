"""A client of the Events extension written from its draft (SEP-3415, ``events/list`` and
``events/poll``), not from this server: it checks the capability in ``server/discover``, reads the
event types, and runs one poll loop per subscription as the draft's client SDK does (persist the
cursor each response carries, poll again at once while ``hasMore``, deduplicate by ``eventId``,
note ``truncated`` as a possible gap). It knows nothing of change logs or sequence numbers: a
cursor is opaque to it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.mcp.test_stateless import Stateless, meta

EXTENSION = "io.modelcontextprotocol/events"
MIN_POLL_MS = 1000  # the draft's default floor on nextPollMs
MAX_DRAIN = 50  # polls in a row while hasMore, before the client stops and reports


class EventsError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code, self.data = error.get("code"), error.get("data")


@dataclass
class Subscription:
    name: str
    arguments: dict[str, Any]
    cursor: str | None = None
    seen: set[str] = field(default_factory=set)
    gaps: int = 0  # responses that said truncated


class EventsClient:
    def __init__(self, mcp: Stateless) -> None:
        self.mcp = mcp

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await self.mcp.post(method, {"_meta": meta(), **params})
        body = answer.json()
        if "error" in body:
            raise EventsError(body["error"])
        assert answer.status_code == 200, answer.text
        result = body["result"]
        assert result.get("resultType") == "complete", result
        return dict(result)

    async def offered(self) -> bool:
        found = await self.call("server/discover", {})
        return EXTENSION in (found.get("capabilities", {}).get("extensions") or {})

    async def types(self) -> dict[str, dict[str, Any]]:
        listed = await self.call("events/list", {})
        types = {}
        for one in listed["events"]:
            assert set(one["delivery"]) <= {"poll", "push", "webhook"} and one["delivery"], one
            assert one["inputSchema"]["type"] == "object" and isinstance(one["payloadSchema"], dict)
            types[one["name"]] = one
        return types

    async def poll(self, subscription: Subscription, **options: Any) -> list[dict[str, Any]]:
        """Every new event of ``subscription``: polls until ``hasMore`` is false (draining a
        backlog at once), returning events not seen before, in the order delivered."""
        delivered = []
        for _ in range(MAX_DRAIN):
            params = {"name": subscription.name, "arguments": subscription.arguments,
                      "cursor": subscription.cursor, **options}  # fmt: skip
            result = await self.call("events/poll", params)
            for event in result["events"]:
                assert set(event) >= {"eventId", "name", "timestamp", "data"}, event
                assert event["name"] == subscription.name
                datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
                json.dumps(event["data"])
                if event["eventId"] not in subscription.seen:
                    subscription.seen.add(event["eventId"])
                    delivered.append(event)
            subscription.cursor = result.get("cursor")  # absent means null
            subscription.gaps += bool(result.get("truncated"))
            assert isinstance(result["hasMore"], bool)
            assert max(MIN_POLL_MS, int(result["nextPollMs"])) >= MIN_POLL_MS
            if not result["hasMore"]:
                return delivered
        raise AssertionError("the server kept saying hasMore")
