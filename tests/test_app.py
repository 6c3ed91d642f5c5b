"""The app factory and its health endpoints, in process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from registry.app import create_app
from registry.config import SettingsError, load_settings
from tests.conftest import PgServer


@asynccontextmanager
async def client_for(url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(load_settings(database_url=url, gc_freeze=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


async def test_ready_at_head(pg_server: PgServer, db_name: str) -> None:
    async with client_for(pg_server.url(db_name)) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready"


async def test_not_ready_when_schema_is_behind(pg_server: PgServer, empty_db_name: str) -> None:
    async with client_for(pg_server.url(empty_db_name)) as client:
        assert (await client.get("/healthz")).status_code == 200
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert "run `registry migrate`" in ready.json()["reason"]


async def test_not_ready_when_database_is_unreachable() -> None:
    async with client_for("postgresql://nobody:pw@127.0.0.1:1/none") as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["reason"].startswith("database unreachable")
        assert "pw" not in ready.text


async def test_unknown_route_is_problem_json(pg_server: PgServer, db_name: str) -> None:
    async with client_for(pg_server.url(db_name)) as client:
        response = await client.get("/nope")
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "not_found"


def test_settings_errors_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGISTRY_WORKERS", "zero")
    with pytest.raises(SettingsError, match=r"^invalid setting REGISTRY_WORKERS: "):
        load_settings()
    monkeypatch.delenv("REGISTRY_WORKERS")
    monkeypatch.setenv("REGISTRY_LOG_LEVEL", "loud")
    with pytest.raises(SettingsError, match="REGISTRY_LOG_LEVEL"):
        load_settings()


def test_a_listen_url_that_would_not_follow_a_failover_is_refused() -> None:
    several = "postgresql://registry@db1:5432,db2:5432/registry?target_session_attrs=read-write"
    with pytest.raises(SettingsError, match="listener would stay on the old primary"):
        load_settings(database_url=several, listen_url="postgresql://registry@db1:5432/registry")
    kept = load_settings(
        database_url=several,
        listen_url="postgresql://registry@/registry?host=db2:5432&host=db1:5432"
        "&target_session_attrs=read-write",
    )
    assert kept.listen_url is not None
    # Behind a pooler: the database URL names the pooler, the listen URL PostgreSQL itself.
    pooled = load_settings(
        database_url="postgresql://registry@pgbouncer:6432/registry",
        listen_url="postgresql://registry@db1:5432/registry",
    )
    assert pooled.listen_url is not None


def test_settings_defaults_and_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REGISTRY_DATABASE_URL", "REGISTRY_ALLOWED_ORIGINS", "REGISTRY_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.embedded
    assert settings.page_size == 100
    monkeypatch.setenv("REGISTRY_ALLOWED_ORIGINS", "https://a.example, https://b.example/")
    monkeypatch.setenv("REGISTRY_DATABASE_URL", "postgres://u:p@h/d")
    monkeypatch.setenv("REGISTRY_LOG_LEVEL", "debug")
    settings = load_settings()
    assert settings.allowed_origins == ["https://a.example", "https://b.example"]
    assert settings.database_dsn() == "postgresql+asyncpg://u:p@h/d"
    assert settings.log_level == "DEBUG"
    assert "u:p@" not in repr(settings)
