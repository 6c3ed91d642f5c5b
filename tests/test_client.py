"""registry.client against live servers: answers from memory, a publish applied from the change
stream, the server stopped and started again while the client keeps answering and then catches up,
a cold start from a signed snapshot, and snapshots that are tampered with or not this client's
refused. Waits are woken by the client's own notifications, each bounded."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from registry.client import (
    InvalidArgument,
    PromptClient,
    PromptNotFound,
    RegistryUnavailable,
    SnapshotRefused,
)
from tests.conftest import (
    OPERATOR_TOKEN,
    LiveServer,
    PgServer,
    free_port,
    registry_command,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.slow
WAIT = 60

GREET = {
    "arguments": [{"name": "who", "required": True, "max_length": 20}],
    "messages": [{"role": "user", "content": {"type": "text", "text": "Hello {{who}}!"}}],
    "config": {"model": "m-1", "temperature": 0.1},
}


def publish(server: LiveServer, key: str, text: str, *, create: bool = False) -> None:
    body = {**GREET, "labels": ["production"]}
    body["messages"] = [{"role": "user", "content": {"type": "text", "text": text}}]
    url = f"{server.url}/api/v1/tenants/acme/prompts"
    if create:
        answer = httpx.post(url, json={"name": "greet", **body}, headers=_auth(key))
    else:
        answer = httpx.post(f"{url}/greet/versions", json=body, headers=_auth(key))
    assert answer.status_code == 201, answer.text


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def keypair(folder: Path) -> tuple[Path, Path]:
    private = Ed25519PrivateKey.generate()
    private_file, public_file = folder / "snapshot.pem", folder / "snapshot.pub"
    private_file.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public_file.write_bytes(
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_file, public_file


@pytest.fixture
def servers(pg_server: PgServer, db_name: str) -> Any:
    """A writer server and, on a port of its own that can be stopped and started again, the
    server the client talks to; both on one database."""
    env = {
        "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
        "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
    }
    writer = start_server(env)
    port = free_port()
    state: dict[str, Any] = {"env": env, "writer": writer, "port": port, "reader": None}

    def up() -> LiveServer:
        reader = start_server(env, port=port)
        state["reader"] = reader
        return reader

    def down() -> None:
        stop_server(state["reader"])
        state["reader"] = None

    state["up"], state["down"] = up, down
    yield state
    if state["reader"] is not None:
        stop_server(state["reader"])
    stop_server(writer)


def test_memory_answers_publishes_and_an_outage(servers: Any) -> None:
    writer: LiveServer = servers["writer"]
    keys = writer.tenant("acme", roles=("reader", "publisher"))
    publish(writer, keys["publisher"], "Hello {{who}}!", create=True)
    reader = servers["up"]()
    threads_before = {t.name for t in threading.enumerate()}
    with PromptClient(reader.url, "acme", keys["reader"], timeout=5) as client:
        assert client.source == "registry"
        assert client.get("greet").version == 1
        assert client.get("greet").config == {"model": "m-1", "temperature": 0.1}
        rendered = client.render("greet", {"who": "Ann"})
        assert rendered.messages[0]["content"]["text"] == "Hello Ann!"
        with pytest.raises(InvalidArgument, match="'who'"):
            client.render("greet", {})
        with pytest.raises(InvalidArgument, match="20"):
            client.render("greet", {"who": "x" * 21})
        with pytest.raises(PromptNotFound):
            client.get("nobody")
        client.wait_until(lambda: client.connected, WAIT)

        started = time.monotonic()
        publish(writer, keys["publisher"], "Hi {{who}}.")
        client.wait_until(lambda: client.get("greet").version == 2, WAIT)
        seen_after = time.monotonic() - started
        assert client.render("greet", {"who": "Bo"}).messages[0]["content"]["text"] == "Hi Bo."
        print(f"publish seen by the client after {seen_after:.3f} s")

        servers["down"]()
        client.wait_until(lambda: not client.connected, WAIT)
        assert client.render("greet", {"who": "Cy"}).messages[0]["content"]["text"] == "Hi Cy."
        publish(writer, keys["publisher"], "Hey {{who}}!")  # while the client cannot hear it
        assert client.get("greet").version == 2
        servers["up"]()
        client.wait_until(lambda: client.get("greet").version == 3, WAIT)  # caught up
        assert client.render("greet", {"who": "Di"}).messages[0]["content"]["text"] == "Hey Di!"
    assert {t.name for t in threading.enumerate()} - threads_before == set()


def test_cold_start_from_a_signed_snapshot_then_catch_up(servers: Any, tmp_path: Path) -> None:
    writer: LiveServer = servers["writer"]
    keys = writer.tenant("acme", roles=("reader", "publisher"))
    publish(writer, keys["publisher"], "Hello {{who}}!", create=True)
    private, public = keypair(tmp_path)
    snapshot = tmp_path / "acme.snapshot"
    env = {**servers["env"], "REGISTRY_SNAPSHOT_KEY_FILE": str(private)}
    written = registry_command(
        "snapshot", str(snapshot), "--tenant", "acme", "--label", "production", env=env
    )
    assert written.returncode == 0, written.stderr
    assert "wrote 1 prompt(s) of acme@production" in written.stderr
    publish(writer, keys["publisher"], "Later {{who}}.")  # after the snapshot

    url = f"http://127.0.0.1:{servers['port']}"  # nothing listens there yet
    with pytest.raises(RegistryUnavailable):
        PromptClient(url, "acme", keys["reader"], timeout=2)
    options = {"snapshot": snapshot, "snapshot_public_key": public, "timeout": 2}
    with PromptClient(url, "acme", keys["reader"], **options) as client:
        assert client.source == "snapshot"
        assert client.render("greet", {"who": "Ann"}).messages[0]["content"]["text"] == "Hello Ann!"
        servers["up"]()
        client.wait_until(lambda: client.get("greet").version == 2, WAIT)
        assert client.render("greet", {"who": "Bo"}).messages[0]["content"]["text"] == "Later Bo."

    signed = orjson.loads(snapshot.read_bytes())
    tampered = tmp_path / "tampered.snapshot"
    signed["document"]["prompts"][0]["messages"][0]["content"]["text"] = "Obey {{who}}."
    tampered.write_bytes(orjson.dumps(signed))
    other = tmp_path / "other"
    other.mkdir()
    foreign_key = keypair(other)[1]
    dead = f"http://127.0.0.1:{free_port()}"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"snapshot": tampered, "snapshot_public_key": public}, "does not verify"),
        ({"snapshot": snapshot, "snapshot_public_key": foreign_key}, "does not verify"),
        (
            {"snapshot": snapshot, "snapshot_public_key": public, "label": "staging"},
            "not acme@staging",
        ),
    ]
    for given, message in cases:
        with pytest.raises(SnapshotRefused, match=message):
            PromptClient(dead, "acme", keys["reader"], timeout=1, **given)


def test_snapshot_needs_a_signing_key(servers: Any, tmp_path: Path) -> None:
    writer: LiveServer = servers["writer"]
    writer.tenant("acme", roles=("reader",))
    refused = registry_command(
        "snapshot", str(tmp_path / "never.snapshot"), "--tenant", "acme", env=servers["env"]
    )
    assert refused.returncode == 1 and "REGISTRY_SNAPSHOT_KEY_FILE" in refused.stderr


async def test_reconnect_delays_stay_short_by_default() -> None:
    """The follower's delays double from the first and stop at the most: 5 s by default, so a
    client is back within about that of the registry (it was 30 s: a 27 s outage took 20 s)."""
    from registry.client import AsyncPromptClient

    default = AsyncPromptClient("http://127.0.0.1:9", "acme", "pr_unused")
    chosen = AsyncPromptClient("http://127.0.0.1:9", "acme", "pr_unused", backoff=(1, 2))
    try:
        first, most = default.backoff
        assert first <= 0.25 and most <= 5.0
        assert chosen.backoff == (1, 2)
    finally:
        await default.close()
        await chosen.close()
