"""An in-process app on a fresh database, an operator client, and a tenant with a key per role."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from registry.app import create_app
from registry.config import load_settings
from tests.conftest import OPERATOR_TOKEN, PgServer


@dataclass
class Api:
    client: httpx.AsyncClient

    def as_key(self, secret: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"} if secret else {}

    @property
    def operator(self) -> dict[str, str]:
        return self.as_key(OPERATOR_TOKEN)

    async def tenant(self, slug: str, **body: object) -> dict[str, str]:
        """Create a tenant and one key per role; returns role -> Authorization headers."""
        created = await self.client.post(
            "/api/v1/tenants", json={"slug": slug, **body}, headers=self.operator
        )
        assert created.status_code == 201, created.text
        keys = {}
        for role in ("reader", "editor", "publisher", "admin"):
            response = await self.client.post(
                f"/api/v1/tenants/{slug}/keys",
                json={"role": role, "name": role},
                headers=self.operator,
            )
            assert response.status_code == 201, response.text
            keys[role] = response.json()["secret"]
        return {role: f"Bearer {secret}" for role, secret in keys.items()}


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {}


@pytest.fixture
async def api(
    pg_server: PgServer, db_name: str, settings_overrides: dict[str, object]
) -> AsyncIterator[Api]:
    settings = load_settings(
        database_url=pg_server.url(db_name), operator_token=OPERATOR_TOKEN, **settings_overrides
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Api(client)


def auth(header: str) -> dict[str, str]:
    return {"Authorization": header}


SIMPLE = {
    "name": "greet",
    "title": "Greeting",
    "description": "Says hello",
    "arguments": [{"name": "who", "required": True, "description": "whom to greet"}],
    "messages": [{"role": "user", "content": {"type": "text", "text": "Hello {{who}}!"}}],
}
