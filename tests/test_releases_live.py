"""Change requests against live servers: two instances of two workers each on one database. A
release of three prompts reaches an open MCP stream (on the other instance) as one list_changed, and
a request scheduled for later is applied once, by whichever worker gets there first, across a
restart of the instance that approved it. Every wait is bounded and waits on an event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    Instances,
    LiveServer,
    PgServer,
    fresh_slug,
    module_instances,
    start_server,
    stop_server,
)
from tests.streams import follow, seq_of, streams

pytestmark = pytest.mark.slow

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture(scope="module")
async def shared(pg_server: PgServer, template_db: str) -> AsyncIterator[Instances]:
    """Two instances of two workers each on one database, shared by the module's tests (each keeps
    to a tenant of its own)."""
    async with module_instances(pg_server, template_db, (2, 2)) as both:
        yield both


@pytest.fixture
def instances(shared: Instances) -> list[LiveServer]:
    return shared.servers  # the list itself: a test that restarts an instance puts it back there


@pytest.fixture
def superuser(shared: Instances) -> asyncpg.Connection:
    return shared.superuser


def _call(server: LiveServer, slug: str, method: str, path: str, key: str, **kwargs: Any) -> Any:
    answer = httpx.request(
        method, f"{server.url}/api/v1/tenants/{slug}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30,
        **kwargs,
    )  # fmt: skip
    assert answer.status_code < 300, answer.text
    return answer.json()


def _team(server: LiveServer, slug: str) -> dict[str, str]:
    """Tenant ``slug``: prompts a, b, c at production version 1, each with a version 2; production needs two
    approvals; keys: an author (editor), two publishers, a reader."""
    keys = server.tenant(
        slug, roles=("editor", "publisher", "reader"),
        prompts=[{"name": n, "messages": [{"role": "user", "content": {"type": "text",
                  "text": f"{n} one"}}]} for n in "abc"],
    )  # fmt: skip
    base = f"{server.url}/api/v1/tenants/{slug}"
    made = httpx.post(f"{base}/keys", json={"role": "publisher"}, headers=OPERATOR)
    keys["publisher2"] = made.json()["secret"]
    for name in "abc":
        body = {"messages": [{"role": "user", "content": {"type": "text", "text": f"{name} two"}}]}
        _call(server, slug, "POST", f"/prompts/{name}/versions", keys["editor"], json=body)
    gated = httpx.patch(base, json={"approvals": {"production": 2}}, headers=OPERATOR)
    assert gated.status_code == 200, gated.text
    return keys


async def test_a_release_reaches_an_open_stream_as_one_list_changed(
    instances: list[LiveServer], superuser: asyncpg.Connection
) -> None:
    one, other = instances
    acme = fresh_slug("acme")
    keys = _team(one, acme)
    moves = [{"prompt": n, "label": "production", "version": 2} for n in "abc"]
    async with streams(other, acme, keys["reader"], 1, label="production") as (stream,):
        opened = _call(one, acme, "POST", "/change-requests", keys["editor"],
                       json={"description": "v2 of a, b, c", "moves": moves})  # fmt: skip
        path = f"/change-requests/{opened['id']}/approve"
        assert _call(one, acme, "POST", path, keys["publisher"], json={})["state"] == "open"
        assert _call(other, acme, "POST", path, keys["publisher2"], json={})["state"] == "applied"
        applied = await superuser.fetchval(
            "SELECT seq FROM change_log WHERE kind = 'change_request.applied' "
            "AND tenant_id = (SELECT id FROM tenants WHERE slug = $1)",
            acme,
        )
        # The stream hears the release, not the request's opening or approvals before it.
        assert await stream.next() == applied
        marker = {"version": 1, "reason": "roll a back"}  # break-glass, as the operator
        _call(one, acme, "PUT", "/prompts/a/labels/production", OPERATOR_TOKEN, json=marker)
        # The next event is the next change: nothing came between the two.
        assert await stream.next() == await seq_of(superuser, acme)
    for name in "bc":
        assert (
            _call(other, acme, "GET", f"/prompts/{name}/labels", keys["reader"])["production"] == 2
        )


async def test_a_scheduled_release_applies_once_across_a_restart(
    instances: list[LiveServer], superuser: asyncpg.Connection, shared: Instances
) -> None:
    one, other = instances
    acme = fresh_slug("acme")
    keys = _team(one, acme)
    at = datetime.now(UTC) + timedelta(seconds=8)
    moves = [{"prompt": n, "label": "production", "version": 2} for n in "ab"]
    opened = _call(one, acme, "POST", "/change-requests", keys["editor"],
                   json={"description": "at eight", "moves": moves, "apply_at": at.isoformat()})  # fmt: skip
    path = f"/change-requests/{opened['id']}/approve"
    _call(one, acme, "POST", path, keys["publisher"], json={})
    approved = _call(one, acme, "POST", path, keys["publisher2"], json={})
    assert approved["state"] == "approved"  # not yet: it has a time

    async with follow(other, keys["reader"], slug=acme) as changes:
        await changes.next("ready")
        # The instance whose worker was told of the time restarts before it comes: the request
        # lives in the database, so a worker of either instance applies it.
        stop_server(one)
        instances[0] = start_server(shared.env, workers=2)
        while True:
            _, _, data = await changes.next("change")
            if data["kind"] == "change_request.applied":
                break
    assert data["change_request"]["id"] == opened["id"]
    assert data["change_request"]["state"] == "applied"
    rows = await superuser.fetch(
        "SELECT actor FROM audit_log WHERE action = 'change_request.apply' "
        "AND tenant_id = (SELECT id FROM tenants WHERE slug = $1)",
        acme,
    )
    assert [row["actor"] for row in rows] == ["scheduler"]  # once, across four workers
    assert (
        await superuser.fetchval(
            "SELECT count(*) FROM change_log WHERE kind = 'change_request.applied' "
            "AND tenant_id = (SELECT id FROM tenants WHERE slug = $1)",
            acme,
        )
        == 1
    )
    shown = _call(other, acme, "GET", f"/change-requests/{opened['id']}", keys["reader"])
    assert (shown["state"], shown["applied_by"]) == ("applied", "scheduler")
    assert datetime.fromisoformat(shown["applied_at"]) >= at
