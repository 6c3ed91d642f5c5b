"""JSON Schemas tenants write (a test case's json_schema, a version's response_format): no reference
leaves the document, and what one costs is bounded (Hardening IV, findings 1 and 2)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from registry import jsonschemas
from tests.api.conftest import SIMPLE, Api, auth

P = "/api/v1/tenants/acme/prompts"


@contextlib.contextmanager
def _listener() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that answers a JSON schema and records every request it gets."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = b'{"type": "string", "description": "SECRET-FROM-THE-TARGET"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _doubling(levels: int) -> dict[str, Any]:
    """allOf of two references to the level below, ``levels`` deep: each level doubles the work."""
    defs: dict[str, Any] = {"l0": {"type": "string"}}
    for i in range(1, levels):
        defs[f"l{i}"] = {"allOf": [{"$ref": f"#/$defs/l{i - 1}"}, {"$ref": f"#/$defs/l{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/l{levels - 1}"}


def _case(schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": "shape", "arguments": {"who": "Ann"}, "expect": {"json_schema": schema}}


REMOTE = ["{base}/schema.json", "http://localhost:{port}/s", "http://[::ffff:127.0.0.1]:{port}/s",
          "file:///etc/passwd", "other.json", "https://json-schema.org/draft/2020-12/schema"]  # fmt: skip


@pytest.mark.parametrize("spelling", REMOTE)
def test_a_reference_that_leaves_the_document_is_refused_and_never_fetched(spelling: str) -> None:
    with _listener() as (base, seen):
        port = base.rsplit(":", 1)[1]
        ref = spelling.format(base=base, port=port)
        for schema in ({"$ref": ref}, {"properties": {"a": {"$dynamicRef": ref}}},
                       {"$id": f"{base}/root.json", "items": {"$ref": ref}}):  # fmt: skip
            with pytest.raises(jsonschemas.SchemaRefused, match="leaves the document"):
                jsonschemas.check(schema)
            with pytest.raises(jsonschemas.SchemaRefused):
                jsonschemas.errors(schema, "text")
        assert seen == []


def test_a_local_reference_is_resolved_and_a_missing_one_is_named() -> None:
    schema = {"$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert [e.message for e in jsonschemas.errors(schema, {"a": "x"})] == [
        "'x' is not of type 'integer'"
    ]
    assert jsonschemas.errors(schema, {"a": 1}) == []
    with pytest.raises(jsonschemas.SchemaRefused, match="not in the schema"):
        jsonschemas.errors({"$ref": "#/$defs/absent"}, 1)


def test_a_schema_that_doubles_its_work_at_every_level_is_refused_when_written() -> None:
    jsonschemas.check(_doubling(8))  # 255 subschemas written out: fine
    with pytest.raises(jsonschemas.SchemaRefused, match="too costly"):
        jsonschemas.check(_doubling(16))
    with pytest.raises(jsonschemas.SchemaRefused, match="references"):
        jsonschemas.check({"anyOf": [{"$ref": "#"} for _ in range(jsonschemas.MAX_REFERENCES + 1)]})


def test_a_recursive_schema_stops_at_its_step_budget() -> None:
    """A schema whose cost grows with the document's depth: stopped, said in words."""
    schema = {"$defs": {"a": {"items": {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}}},
              "$ref": "#/$defs/a"}  # fmt: skip
    jsonschemas.check(schema)  # a reference back into its own path counts once
    document: list[Any] = []
    inner = document
    for _ in range(40):
        inner.append([])
        inner = inner[0]
    with pytest.raises(jsonschemas.SchemaTooCostly, match="10,000 steps"):
        jsonschemas.errors(schema, document)
    with jsonschemas.budget():  # one budget for many validations: each uses it up
        for _ in range(3):
            jsonschemas.errors({"items": {"type": "integer"}}, list(range(2_000)))
        with pytest.raises(jsonschemas.SchemaTooCostly):
            jsonschemas.errors({"items": {"type": "integer"}}, list(range(5_000)))


def test_patterns_run_on_re2() -> None:
    evil = {"pattern": "^(a+)+$"}  # catastrophic for a backtracking engine
    assert len(jsonschemas.errors(evil, "a" * 40 + "!")) == 1
    with pytest.raises(jsonschemas.SchemaRefused, match="RE2"):
        jsonschemas.errors({"pattern": "(?<=x)a"}, "a")


async def test_the_rest_api_refuses_remote_and_costly_schemas_with_a_422(api: Api) -> None:
    keys = await api.tenant("acme")
    editor, reader = auth(keys["editor"]), auth(keys["reader"])
    made = await api.client.post(P, json=SIMPLE, headers=editor)
    assert made.status_code == 201, made.text

    async def test_case(schema: dict[str, Any]) -> httpx.Response:
        return await api.client.post(
            f"{P}/greet/test", json={"tests": [_case(schema)]}, headers=reader
        )

    async def stored_case(schema: dict[str, Any]) -> httpx.Response:
        return await api.client.patch(f"{P}/greet", json={"tests": [_case(schema)]}, headers=editor)

    async def response_format(schema: dict[str, Any]) -> httpx.Response:
        version = {k: SIMPLE[k] for k in ("arguments", "messages")}
        return await api.client.post(
            f"{P}/greet/versions", json={**version, "config": {"response_format": schema}},
            headers=editor,
        )  # fmt: skip

    with _listener() as (base, seen):
        for call in (test_case, stored_case, response_format):
            remote = await call({"$ref": f"{base}/schema.json"})
            assert remote.status_code == 422, remote.text
            assert f"{base}/schema.json" in remote.text and "leaves the document" in remote.text
            costly = await call(_doubling(16))
            assert costly.status_code == 422, costly.text
            assert "too costly" in costly.text
        assert seen == []


async def test_a_stored_recursive_schema_fails_its_case_in_words(api: Api) -> None:
    keys = await api.tenant("acme")
    editor = auth(keys["editor"])
    deep = "[" * 40 + "]" * 40
    body = {**SIMPLE, "messages": [{"role": "user", "content": {"type": "text", "text": deep}}],
            "arguments": []}  # fmt: skip
    assert (await api.client.post(P, json=body, headers=editor)).status_code == 201
    schema = {"$defs": {"a": {"items": {"allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/a"}]}}},
              "$ref": "#/$defs/a"}  # fmt: skip
    tests = [{"name": f"c{i}", "expect": {"json_schema": schema}} for i in range(3)]
    patched = await api.client.patch(f"{P}/greet", json={"tests": tests}, headers=editor)
    assert patched.status_code == 200, patched.text
    run = await api.client.post(f"{P}/greet/test", json={}, headers=editor)
    assert run.status_code == 200, run.text
    assert run.json()["failed"] == 3
    assert "takes more than 10,000 steps" in run.json()["cases"][0]["failures"][0]
