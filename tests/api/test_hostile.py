"""Hostile input on the REST API: bounded work, nothing that queues other requests, never a 500."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg

from tests.api.conftest import SIMPLE, Api, auth

P = "/api/v1/tenants/acme/prompts"


def _text_version(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


async def test_a_key_in_use_elsewhere_never_makes_a_request_wait(
    api: Api, superuser: asyncpg.Connection
) -> None:
    """The key's last use is recorded outside the request's transaction, and skipped while another
    transaction holds the key's row: a slow request of a key never queues the others."""
    keys = await api.tenant("acme")
    secret = keys["reader"].removeprefix("Bearer ")
    key_id = await superuser.fetchval(
        "SELECT id FROM api_keys WHERE name = 'reader' AND tenant_id = "
        "(SELECT id FROM tenants WHERE slug = 'acme')"
    )
    async with superuser.transaction():
        await superuser.execute("SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE", key_id)
        answer = await asyncio.wait_for(
            api.client.get(P, headers={"Authorization": f"Bearer {secret}"}), 20
        )
        assert answer.status_code == 200, answer.text
    again = await api.client.get(P, headers={"Authorization": f"Bearer {secret}"})
    assert again.status_code == 200
    used = await superuser.fetchval("SELECT last_used_at FROM api_keys WHERE id = $1", key_id)
    assert used is not None  # recorded once the row was free


async def test_large_diffs_are_bounded_and_say_so(api: Api) -> None:
    keys = await api.tenant("acme")
    editor = auth(keys["editor"])
    first = "\n".join(f"line {i}" for i in range(15_000))
    second = "\n".join(f"changed {i}" if i % 7 == 0 else f"line {i}" for i in range(15_000))
    created = await api.client.post(P, json={"name": "big", **_text_version(first)}, headers=editor)
    assert created.status_code == 201, created.text
    written = await api.client.post(f"{P}/big/versions", json=_text_version(second), headers=editor)
    assert written.status_code == 201, written.text
    diff = await api.client.get(f"{P}/big/diff", params={"from": 1, "to": 2}, headers=editor)
    assert diff.status_code == 200, diff.text
    (message,) = diff.json()["messages"]
    assert message["status"] == "changed"
    assert message["diff"] == []
    assert "too large to diff line by line (15,000 and 15,000 lines" in message["note"]


async def test_templates_that_could_never_render_are_refused_when_written(api: Api) -> None:
    keys = await api.tenant("acme")
    deep = "{{#a}}" * 1500 + "x" + "{{/a}}" * 1500
    body = {**SIMPLE, "name": "deep", "arguments": [{"name": "a"}], **_text_version(deep)}
    refused = await api.client.post(P, json=body, headers=auth(keys["editor"]))
    assert refused.status_code == 422, refused.text
    assert "nest more than" in refused.json()["detail"]


async def test_numbers_out_of_range_or_not_ascii_are_refused_not_500(api: Api) -> None:
    keys = await api.tenant("acme")
    reader, editor = auth(keys["reader"]), auth(keys["publisher"])
    created = await api.client.post(P, json=SIMPLE, headers=editor)
    assert created.status_code == 201, created.text
    huge = 2**31
    for method, path, body, params in [
        ("GET", f"{P}/greet/versions/{huge}", None, None),
        ("GET", f"{P}/greet/versions/{2**70}", None, None),
        ("POST", f"{P}/greet/versions/{huge}/restore", None, None),
        ("GET", f"{P}/greet/diff", None, {"from": 1, "to": huge}),
        ("PUT", f"{P}/greet/labels/staging", {"version": huge}, None),
        ("POST", f"{P}/greet/render", {"arguments": {"who": "x"}, "version": huge}, None),
    ]:
        answer = await api.client.request(method, path, json=body, params=params, headers=editor)
        assert answer.status_code == 422, (path, answer.status_code, answer.text)
    version = {"messages": SIMPLE["messages"], "arguments": SIMPLE["arguments"]}
    for value in ('"²"', '"99999999999"', '"-1"', '"1_0"'):
        answer = await api.client.post(
            f"{P}/greet/versions",
            json=version,
            headers=[(k.encode(), v.encode()) for k, v in editor.items()]
            + [(b"If-Match", value.encode())],
        )
        assert answer.status_code == 422, (value, answer.text)
        assert "If-Match" in answer.json()["detail"]
    assert (await api.client.get(f"{P}/greet", headers=reader)).status_code == 200


async def test_numbers_a_value_could_not_be_sent_back_as_are_refused_not_500(api: Api) -> None:
    """Free-form values (model config, tool definitions, content _meta) are sent back with each
    answer: an integer past 64 bits, NaN or a number past a double's range (read as Infinity) is
    refused where it is written, naming where; the 64-bit extremes are kept exactly."""
    keys = await api.tenant("acme")
    editor = {**auth(keys["publisher"]), "Content-Type": "application/json"}
    text = '[{"role": "user", "content": {"type": "text", "text": "hi"META}}]'
    for config, meta, expected in [
        (
            '{"seed": 1180591620717411303424}',
            "",
            "config: Value error, seed: an integer of 71 bits",
        ),
        ('{"seed": -9223372036854775809}', "", "seed: an integer of 64 bits, past the 64 bits"),
        ('{"seed": NaN}', "", "seed: nan is not a JSON number"),
        ('{"seed": 1e400}', "", "seed: inf is not a JSON number"),
        ('{"tools": [{"n": [-Infinity]}]}', "", "config.tools.0.n: Value error, [0]: -inf is not"),
        ("null", ', "_meta": {"x": {"y": 2e1000}}', "_meta: Value error, x.y: inf is not a JSON"),
    ]:
        body = f'{{"name": "n", "config": {config}, "messages": {text.replace("META", meta)}}}'
        answer = await api.client.post(P, content=body.encode(), headers=editor)
        assert answer.status_code == 422, (config, meta, answer.text)
        assert expected in answer.json()["detail"], answer.text
    # PostgreSQL gives a large double back without its exponent (1e20 as 100000000000000000000):
    # an MCP answer still carries it, as the number it is.
    extremes = '{"seed": 18446744073709551615, "low": -9223372036854775808, "f": 1e20}'
    body = f'{{"name": "n", "labels": ["production"], "config": {extremes}, "messages": {text}}}'
    written = await api.client.post(P, content=body.replace("META", "").encode(), headers=editor)
    assert written.status_code == 201, written.text
    kept = (await api.client.get(f"{P}/n", headers=editor)).json()["latest"]["config"]
    assert kept["seed"] == 2**64 - 1 and kept["low"] == -(2**63) and float(kept["f"]) == 1e20
    mcp = {**editor, "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "n"}  # fmt: skip
    params = {"name": "n", "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}}  # fmt: skip
    message = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": params}
    answer = await api.client.post("/mcp/acme", json=message, headers=mcp)
    assert answer.status_code == 200, answer.text
    served = answer.json()["result"]["_meta"]["dev.prompt-registry/config"]
    assert served["seed"] == 2**64 - 1 and served["low"] == -(2**63) and served["f"] == 1e20
    # Every other way a stored version leaves: rendered, exported (each version checked again).
    rendered = await api.client.post(f"{P}/n/render", json={"arguments": {}}, headers=editor)
    assert rendered.status_code == 200 and rendered.json()["config"]["f"] == 1e20, rendered.text
    exported = await api.client.get("/api/v1/tenants/acme/export", headers=editor)
    assert exported.status_code == 200, exported.text
    assert exported.json()["prompts"][0]["versions"][0]["config"]["f"] == 1e20


async def test_an_oversized_chunked_body_is_413(api: Api) -> None:
    keys = await api.tenant("acme")

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"x" * (1024 * 1024)  # no Content-Length: 5 MiB past the 4 MiB limit

    answer = await api.client.post(P, content=chunks(), headers=auth(keys["editor"]))
    assert answer.status_code == 413, answer.text
    assert answer.json()["code"] == "payload_too_large"


async def test_a_key_cannot_be_born_expired(api: Api) -> None:
    keys = await api.tenant("acme")
    for expires_at in ("2001-01-01T00:00:00Z", "2099-01-01T00:00:00"):
        answer = await api.client.post(
            "/api/v1/tenants/acme/keys",
            json={"role": "reader", "expires_at": expires_at},
            headers=auth(keys["admin"]),
        )
        assert answer.status_code == 422, answer.text
        assert "expires_at" in answer.json()["detail"]


async def test_a_dry_run_says_nothing_was_saved_and_text_shorthand_is_taken(api: Api) -> None:
    keys = await api.tenant("acme")
    body = {
        "name": "short",
        "messages": [{"role": "user", "text": "Hi"}, {"role": "assistant", "content": "Hello"}],
    }
    dry = await api.client.post(
        P, params={"dry_run": "true"}, json=body, headers=auth(keys["editor"])
    )
    assert dry.status_code == 201, dry.text
    assert dry.json()["detail"] == "version 1 would be written (dry run: nothing saved)"
    assert (await api.client.get(f"{P}/short", headers=auth(keys["reader"]))).status_code == 404
    made = await api.client.post(P, json=body, headers=auth(keys["editor"]))
    assert made.status_code == 201, made.text
    contents = [m["content"] for m in made.json()["prompt"]["latest"]["messages"]]
    assert contents == [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Hello"}]


async def test_blobs_are_served_so_that_a_browser_never_runs_them(api: Api) -> None:
    keys = await api.tenant("acme")
    editor = auth(keys["editor"])
    page = b"<html><script>alert(1)</script></html>"
    uploaded = await api.client.post(
        "/api/v1/tenants/acme/blobs", content=page, headers={**editor, "Content-Type": "text/html"}
    )
    assert uploaded.status_code == 201, uploaded.text
    served = await api.client.get(
        f"/api/v1/tenants/acme/blobs/{uploaded.json()['sha256']}", headers=editor
    )
    assert served.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in served.headers["content-security-policy"]
    assert served.headers["content-disposition"].startswith("attachment")
    # Bytes declared as an image must be one.
    fake = await api.client.post(
        "/api/v1/tenants/acme/blobs", content=page, headers={**editor, "Content-Type": "image/png"}
    )
    assert fake.status_code == 422, fake.text
    assert "the bytes are not of type image/png" in fake.json()["detail"]
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    real = await api.client.post(
        "/api/v1/tenants/acme/blobs", content=png, headers={**editor, "Content-Type": "image/png"}
    )
    shown = await api.client.get(
        f"/api/v1/tenants/acme/blobs/{real.json()['sha256']}", headers=editor
    )
    assert shown.headers["content-disposition"] == "inline"
    # Every API answer carries the security headers; /docs works from local assets.
    listed = await api.client.get("/api/v1/tenants/acme/prompts", headers=editor)
    assert listed.headers["x-frame-options"] == "DENY"
    assert listed.headers["content-security-policy"].startswith("default-src 'none'")
    docs = await api.client.get("/docs")
    assert docs.status_code == 200
    assert "cdn" not in docs.text.lower() and "/docs/assets/swagger-ui-bundle.js" in docs.text
    asset = await api.client.get("/docs/assets/swagger-ui-bundle.js")
    assert asset.status_code == 200 and len(asset.content) > 100_000


async def test_concurrent_imports_of_one_bundle_all_succeed(api: Api) -> None:
    keys = await api.tenant("acme")
    bundle = {
        "prompts": [
            {
                "name": f"p{i}",
                "labels": {"staging": 1},
                "versions": [{"version": 1, **_text_version(f"prompt {i}")}],
            }
            for i in range(5)
        ]
    }
    answers = await asyncio.gather(
        *(
            api.client.post(
                "/api/v1/tenants/acme/import", json=bundle, headers=auth(keys["editor"])
            )
            for _ in range(10)
        )
    )
    assert [a.status_code for a in answers] == [200] * 10, [a.text for a in answers]
    assert sum(a.json()["prompts_created"] for a in answers) == 5
    assert sum(a.json()["versions_created"] for a in answers) == 5


async def test_export_is_streamed_piece_by_piece(api: Api) -> None:
    keys = await api.tenant("acme")
    for i in range(3):
        body = {"name": f"p{i}", **_text_version(f"prompt {i}")}
        assert (
            await api.client.post(P, json=body, headers=auth(keys["editor"]))
        ).status_code == 201
    exported = await api.client.get("/api/v1/tenants/acme/export", headers=auth(keys["reader"]))
    assert exported.status_code == 200
    assert "content-length" not in exported.headers  # streamed, never held whole
    bundle = exported.json()
    assert [p["name"] for p in bundle["prompts"]] == ["p0", "p1", "p2"]
    assert bundle["blobs"] == {} and bundle["tenant"] == "acme"
    again = await api.client.post(
        "/api/v1/tenants/acme/import", json=bundle, headers=auth(keys["editor"])
    )
    assert again.json()["versions_created"] == 0


async def test_bad_base64_in_an_import_is_named(api: Api) -> None:
    keys = await api.tenant("acme")
    bundle = {"blobs": {"a" * 64: {"mime_type": "image/png", "data": "%%% not base64"}}}
    answer = await api.client.post(
        "/api/v1/tenants/acme/import", json=bundle, headers=auth(keys["editor"])
    )
    assert answer.status_code == 422, answer.text
    assert "not valid base64" in answer.json()["detail"]


async def test_a_database_outage_is_503_with_retry_after() -> None:
    """A database that cannot be reached: REST and MCP both say 503 and when to retry."""
    import httpx

    from registry.app import create_app
    from registry.config import load_settings

    settings = load_settings(database_url="postgresql://nobody@127.0.0.1:9/nowhere")
    app = create_app(settings)  # not started: no listener, every request reads the database
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        rest = await client.get(P, headers={"Authorization": "Bearer prk_x"})
        assert rest.status_code == 503, rest.text
        assert rest.headers["retry-after"] == "5"
        assert rest.json()["code"] == "unavailable"
        mcp = await client.post(
            "/mcp/acme",
            json={"jsonrpc": "2.0", "id": 1, "method": "prompts/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}},
            headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/list",
                     "Accept": "application/json, text/event-stream"},
        )  # fmt: skip
        assert mcp.status_code == 503, mcp.text
        assert mcp.headers["retry-after"] == "5"
        assert mcp.json()["error"]["code"] == -32603
    await app.state.db.dispose()


async def test_text_that_is_not_utf8_and_values_too_deep_are_refused(api: Api) -> None:
    keys = await api.tenant("acme")
    editor = {**auth(keys["editor"]), "Content-Type": "application/json"}
    surrogate = b'{"name": "x\\ud800", "messages": [{"role": "user", "text": "hi"}]}'
    answer = await api.client.post(P, content=surrogate, headers=editor)
    assert answer.status_code == 422, answer.text
    assert "lone surrogate" in answer.json()["detail"]
    meta: dict[str, object] = {}
    for _ in range(40):
        meta = {"m": meta}
    deep = {"name": "deep", "messages": [{"role": "user", "content": {
        "type": "text", "text": "hi", "_meta": meta}}]}  # fmt: skip
    answer = await api.client.post(P, json=deep, headers=auth(keys["editor"]))
    assert answer.status_code == 422, answer.text
    assert "nested deeper than 32 levels" in answer.json()["detail"]


def test_a_data_error_without_a_message_is_still_named() -> None:
    from sqlalchemy.exc import DBAPIError

    from registry.db.errors import translate_db_error
    from registry.errors import InvalidInput

    class Cause(Exception):  # what asyncpg raises: a data exception, here with an empty message
        sqlstate = "22003"
        constraint_name = None
        message = ""

    translated = translate_db_error(DBAPIError("SELECT", {}, Cause()))
    assert isinstance(translated, InvalidInput)
    assert translated.message == "a value was refused by the database: invalid data"


def test_a_connection_that_died_under_a_transaction_is_unavailable_not_a_500() -> None:
    """Seen when the primary stops while a COMMIT is in flight: SQLAlchemy's rollback then finds
    the connection closed and raises InterfaceError, which carries no SQLSTATE."""
    from sqlalchemy.exc import InterfaceError

    from registry.db.errors import translate_db_error
    from registry.errors import Unavailable

    closed = InterfaceError(
        "ROLLBACK", {}, Exception("cannot call Transaction.rollback(): the connection is closed")
    )
    assert isinstance(translate_db_error(closed), Unavailable)


async def test_a_json_syntax_error_says_where_and_what_was_expected(api: Api) -> None:
    keys = await api.tenant("acme")
    broken = b'{\n  "name": "greet",\n  "messages": ]\n}'
    answer = await api.client.post(
        "/api/v1/tenants/acme/prompts", content=broken,
        headers={"Authorization": keys["editor"], "Content-Type": "application/json"},
    )  # fmt: skip
    assert answer.status_code == 422
    assert answer.json()["detail"] == "body: not valid JSON at line 3, column 15: Expecting value"


async def test_an_empty_body_for_a_skill_is_a_422(api: Api) -> None:
    """The skill routes validate the whole body themselves (JSON or multipart): an empty one is
    named, never a 500 (Hypothesis found it)."""
    keys = await api.tenant("acme")
    sent = await api.client.post(
        "/api/v1/tenants/acme/skills",
        content=b"",
        headers={**api.as_key(keys["publisher"].removeprefix("Bearer ")),
                 "Content-Type": "application/json"},
    )  # fmt: skip
    assert sent.status_code == 422, sent.text
