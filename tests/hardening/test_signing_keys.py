"""The signing key rotates without a restart, and every key the registry signed with stays published
(Hardening IV, finding 7): receipts and skill entries signed before a rotation still verify against
the key set, the new ones carry the new key's id, and a verifier given only the new key refuses the
old receipt, naming the key it lacks."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from registry import receipts, signing
from tests.conftest import LiveServer, PgServer, module_server, registry_command
from tests.mcp.test_stateless_live import META, REVISION
from tests.mcp.test_tools import REPLY

pytestmark = pytest.mark.slow
WELL_KNOWN = "/.well-known/prompt-registry"


def _write_key(path: Path) -> str:
    """A new key written over ``path`` as an operator rotates one (a whole file renamed in)."""
    key = Ed25519PrivateKey.generate()
    partial = path.with_suffix(".new")
    partial.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))  # fmt: skip
    os.replace(partial, path)
    return signing.key_id(key.public_key())


@pytest.fixture(scope="module")
async def rotating(
    pg_server: PgServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[LiveServer, Path]]:
    key_file = tmp_path_factory.mktemp("rotating") / "signing-key.pem"
    _write_key(key_file)
    async with module_server(
        pg_server, template_db, REGISTRY_SNAPSHOT_KEY_FILE=str(key_file), REGISTRY_WORKERS="2"
    ) as server:
        yield server, key_file


def _get(http: httpx.Client) -> dict[str, Any]:
    answer = http.post("/mcp/rot", json={
        "jsonrpc": "2.0", "id": 1, "method": "prompts/get",
        "params": {"_meta": META, "name": "support.reply", "arguments": {"topic": "billing"}}},
        headers={"MCP-Protocol-Version": REVISION, "Mcp-Method": "prompts/get",
                 "Mcp-Name": "support.reply"})  # fmt: skip
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _key_id(answer: dict[str, Any]) -> str:
    return str(answer["result"]["_meta"][receipts.META_KEY]["keyId"])


def _verify(tmp_path: Path, answer: Any, keys: bytes, name: str) -> Any:
    saved, key = tmp_path / f"{name}.json", tmp_path / f"{name}.keys"
    saved.write_text(json.dumps(answer))
    key.write_bytes(keys)
    return registry_command("verify-receipt", str(saved), "--public-key", str(key), env={})


def test_a_replaced_key_file_signs_at_once_and_the_old_receipts_still_verify(
    rotating: tuple[LiveServer, Path], tmp_path: Path
) -> None:
    server, key_file = rotating
    reader = server.tenant("rot", roles=("reader",), prompts=[REPLY])["reader"]
    with httpx.Client(base_url=server.url, timeout=30) as http:
        http.headers["Authorization"] = f"Bearer {reader}"
        before = _get(http)
        old_id = _key_id(before)
        old_pem = http.get(f"{WELL_KNOWN}/signing-key").content

        new_id = _write_key(key_file)
        # Each worker reads the file again within a second of its next signing: ask until both
        # have (bounded: a worker that never did fails the test).
        seen: set[str] = set()
        for _ in range(400):
            after = _get(http)  # a new key drops the answers kept with the old one
            seen.add(_key_id(after))
            published = http.get(f"{WELL_KNOWN}/signing-keys").json()
            ids = {k["keyId"]: k["current"] for k in published["keys"]}
            if _key_id(after) == new_id and ids.get(new_id) and old_id in ids:
                break
        else:
            pytest.fail(f"the new key never signed or was never published: {seen}, {ids}")
        key_set = http.get(f"{WELL_KNOWN}/signing-keys").content
        new_pem = http.get(f"{WELL_KNOWN}/signing-key").content
    assert new_pem != old_pem

    for name, answer in (("before", before), ("after", after)):
        done = _verify(tmp_path, answer, key_set, name)
        assert done.returncode == 0, (name, done.stderr)
    fresh = _verify(tmp_path, after, new_pem, "after-pem")
    assert fresh.returncode == 0, fresh.stderr
    stale = _verify(tmp_path, before, new_pem, "before-new-pem")
    assert stale.returncode == 1 and old_id in stale.stderr, stale.stderr
    partial = json.dumps({"keys": [k for k in json.loads(key_set)["keys"] if k["current"]]})
    lacking = _verify(tmp_path, before, partial.encode(), "before-partial-set")
    assert lacking.returncode == 1 and old_id in lacking.stderr, lacking.stderr


def test_a_key_file_replaced_half_written_keeps_the_previous_key(tmp_path: Path) -> None:
    path = tmp_path / "signing-key.pem"
    first = _write_key(path)
    keys = signing.KeyFile(path)
    keys.CHECK_SECONDS = 0  # look at the file on every use
    heard: list[str] = []
    keys.on_new_key.append(lambda public: heard.append(signing.key_id(public)))
    assert keys.current()[1] == first
    path.write_bytes(b"-----BEGIN PRIVATE KEY-----\nMC4CAQ")  # a copy cut short
    assert keys.current()[1] == first
    second = _write_key(path)
    assert keys.current()[1] == second
    assert heard == [first, second]
    assert not signing.make_key_file(path)  # never over a key that is there
    made = tmp_path / "new" / "key.pem"
    assert signing.make_key_file(made) and made.stat().st_mode & 0o777 == 0o600
