"""The serve ledger's opt-in export: each flush pushes its counts as OpenTelemetry metrics over
OTLP/HTTP, to a receiver that decodes them as a collector would (the protobuf messages of
opentelemetry-proto), with the tenant, name, version and label as attributes and no caller."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import SIMPLE, Api, auth
from tests.mcp.test_stateless import Stateless

pytest.importorskip("opentelemetry.proto")  # the `otlp` extra (installed with `test`)


class Receiver:
    """An OTLP/HTTP metrics endpoint on a thread: every request it got, decoded."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        self.requests: list[Any] = []
        self.arrived = threading.Event()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = ExportMetricsServiceRequest()
                message.ParseFromString(body)
                received.requests.append((self.path, self.headers["Content-Type"], message))
                received.arrived.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/metrics"

    def points(self) -> list[tuple[dict[str, Any], int]]:
        """Every data point of registry.usage.answers received: its attributes and value."""
        found = []
        for _path, _kind, message in self.requests:
            for resource in message.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name != "registry.usage.answers":
                            continue
                        for point in metric.sum.data_points:
                            attributes = {a.key: _value(a.value) for a in point.attributes}
                            found.append((attributes, point.as_int))
        return found


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value"))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    thread = threading.Thread(target=made.server.serve_forever, daemon=True)
    thread.start()
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.fixture
def settings_overrides(receiver: Receiver) -> dict[str, object]:
    return {"usage_otlp_endpoint": receiver.url}


async def test_each_flush_pushes_its_counts(api: Api, receiver: Receiver) -> None:
    keys = await api.tenant("acme")
    made = await api.client.post(
        "/api/v1/tenants/acme/prompts", json={**SIMPLE, "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )  # fmt: skip
    assert made.status_code == 201, made.text
    mcp = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    for _ in range(3):
        await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    assert await api.app.state.ledger.flush() == 1
    assert receiver.arrived.is_set()  # pushed by the flush itself, before it returned
    path, content_type, _ = receiver.requests[0]
    assert (path, content_type) == ("/v1/metrics", "application/x-protobuf")
    ((attributes, value),) = receiver.points()
    assert value == 3
    # No caller, no client: the cardinality stays bounded.
    assert attributes == {
        "registry.tenant": "acme",
        "registry.kind": "prompt",
        "registry.name": "greet",
        "registry.version": 1,
        "registry.label": "production",
        "registry.surface": "prompts/get",
    }  # fmt: skip
    await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Bo"}})
    await api.app.state.ledger.flush()
    assert [value for _, value in receiver.points()] == [3, 1]  # deltas, not running totals
