"""bench/floor's endpoint on a small seeded database: each request is its one select, answering the
prompt's first message as stored, so the floor the benchmark notes quote measures real work."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import orjson
import pytest

from bench.floor import floor_app
from bench.seed import seed
from tests.conftest import PgServer


async def test_the_floor_answers_each_prompt_with_one_select(
    pg_server: PgServer,
    db_name: str,
    superuser: asyncpg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await seed(pg_server.url(db_name), tenants=2, prompts=5, big=10, seed=3)
    slug, name, content = await superuser.fetchrow(
        "SELECT t.slug, l.prompt_name, m.content FROM labels l"
        " JOIN tenants t ON t.id = l.tenant_id JOIN prompt_messages m ON m.tenant_id = l.tenant_id"
        " AND m.prompt_id = l.prompt_id AND m.version = l.version AND m.position = 0"
        " WHERE l.label = 'production' ORDER BY t.slug, l.prompt_name LIMIT 1"
    )
    monkeypatch.setenv("REGISTRY_DATABASE_URL", pg_server.plain_url(db_name))
    app = floor_app()
    lifespan: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    started = asyncio.Event()

    async def receive_lifespan() -> dict[str, Any]:
        return await lifespan.get()

    async def send_lifespan(message: dict[str, Any]) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    running = asyncio.create_task(app({"type": "lifespan"}, receive_lifespan, send_lifespan))
    await lifespan.put({"type": "lifespan.startup"})
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        request = {"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": name}}
        return {"type": "http.request", "body": orjson.dumps(request), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await asyncio.wait_for(started.wait(), 60)  # started: the keys are read
    await app({"type": "http", "path": f"/mcp/{slug}"}, receive, send)
    await lifespan.put({"type": "lifespan.shutdown"})
    await running
    assert sent[0]["status"] == 200
    answer = orjson.loads(sent[1]["body"])
    assert answer["id"] == 7
    assert answer["result"]["messages"] == [{"role": "user", "content": orjson.loads(content)}]


async def test_the_page_floor_answers_the_registrys_page_bytes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.floor import page_floor_app

    page = b'{"jsonrpc":"2.0","id":1,"result":{"prompts":[]}}' * 1000
    (tmp_path / "page.json").write_bytes(page)
    monkeypatch.setenv("BENCH_FLOOR_PAGE", str(tmp_path / "page.json"))
    app = page_floor_app()
    parts = [{"type": "http.request", "body": b"{", "more_body": True},
             {"type": "http.request", "body": b"}", "more_body": False}]  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return parts.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app({"type": "http", "path": "/mcp/bench-big"}, receive, send)
    assert not parts  # the whole body was read before answering
    assert sent[0]["status"] == 200 and sent[1]["body"] == page
