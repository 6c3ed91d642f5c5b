"""The API description: /openapi.json loads (so /docs shows the API) and describes every route."""

from __future__ import annotations

from fastapi.routing import APIRoute

from registry.app import ROUTERS
from tests.conftest import Api


async def test_every_route_is_described(api: Api) -> None:
    answer = await api.client.get("/openapi.json")
    assert answer.status_code == 200, answer.text[:500]
    paths = answer.json()["paths"]
    routes = [
        route
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute) and route.include_in_schema
    ]
    assert routes, "no routes found: the test would prove nothing"
    for route in routes:
        described = paths.get(route.path_format)
        assert described is not None, f"{route.path_format} is not in /openapi.json"
        for method in (route.methods or set()) - {"HEAD"}:
            operation = described.get(method.lower())
            assert operation is not None, f"{method} {route.path_format} is not described"
            assert operation.get("responses"), f"{method} {route.path_format} has no responses"
    stream = paths["/api/v1/tenants/{tenant}/changes"]["get"]["responses"]["200"]
    assert "text/event-stream" in stream["content"]
    docs = await api.client.get("/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text
