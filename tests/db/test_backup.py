"""`registry backup` and `registry restore` on the embedded PostgreSQL: a backup taken while the
registry serves and takes writes restores into a fresh data directory with the same data (a full
export of every tenant compared), and a restore never overwrites a database unless told."""

from __future__ import annotations

import io
import stat
import tarfile
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import (
    free_port,
    registry_command,
    serve_embedded,
    stop_serving,
    wait_ready,
)

pytestmark = pytest.mark.slow


def export(base: str, key: str) -> dict[str, Any]:
    """Every version of every prompt of acme: name -> versions (their content) and labels."""
    response = httpx.get(
        f"{base}/api/v1/tenants/acme/export?versions=all",
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return {prompt["name"]: prompt for prompt in response.json()["prompts"]}


def test_backup_while_serving_restores_the_same_data(tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    backup_file = tmp_path / "registry.backup"
    env = {"REGISTRY_DATA_DIR": str(source)}
    port = free_port()
    process = serve_embedded(source, port, "--workers", "2")
    try:
        wait_ready(process, port)
        base = f"http://127.0.0.1:{port}"
        made = registry_command("tenant", "create", "acme", env=env)
        assert made.returncode == 0, made.stderr
        key = registry_command("key", "create", "--tenant", "acme", "--role", "publisher", env=env)
        assert key.returncode == 0, key.stderr
        secret = key.stdout.split()[-1]
        auth = {"Authorization": f"Bearer {secret}"}
        prompts = f"{base}/api/v1/tenants/acme/prompts"
        for index in range(20):
            body = {
                "name": f"p{index}",
                "labels": ["production"],
                "messages": [{"role": "user", "content": {"type": "text", "text": f"v{index}"}}],
            }
            assert httpx.post(prompts, json=body, headers=auth).status_code == 201

        # Writes go on while the backup runs: the backup is a consistent moment, whatever it is.
        stop = threading.Event()
        written: list[int] = []

        def keep_writing() -> None:
            while not stop.is_set() and len(written) < 500:
                text = f"during {len(written)}"
                body = {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
                reply = httpx.post(f"{prompts}/p0/versions", json=body, headers=auth, timeout=60)
                assert reply.status_code == 201, reply.text
                written.append(1)

        writer = threading.Thread(target=keep_writing)
        writer.start()
        try:
            taken = registry_command("backup", str(backup_file), env=env, timeout=300)
        finally:
            stop.set()
            writer.join()
        assert taken.returncode == 0, taken.stderr
        assert stat.S_IMODE(backup_file.stat().st_mode) == 0o600  # it holds every secret
        # After the backup: no more writes, so the source's export is final.
        original = export(base, secret)
    finally:
        assert stop_serving(process) == 0

    restored = registry_command("restore", str(backup_file), env={"REGISTRY_DATA_DIR": str(target)})
    assert restored.returncode == 0, restored.stderr
    port = free_port()
    process = serve_embedded(target, port, "--workers", "1")
    try:
        wait_ready(process, port)
        copy = export(f"http://127.0.0.1:{port}", secret)  # the key came back with the data
    finally:
        assert stop_serving(process) == 0
    # The copy is the source at the moment of the backup: every other prompt whole, and p0's
    # versions a prefix of the source's (the writes that came after are not in it).
    assert {name: copy[name] for name in copy if name != "p0"} == {
        name: original[name] for name in original if name != "p0"
    }
    assert len(copy) == 20
    versions = copy["p0"]["versions"]
    assert versions == original["p0"]["versions"][: len(versions)]
    assert copy["p0"]["labels"]["production"] == 1
    assert len(original["p0"]["versions"]) == 1 + len(written)  # every write acknowledged is there

    # The restored directory now holds a database: a restore into it is refused unless forced, and
    # a forced one replaces what was there (a tenant made after the backup is gone).
    env = {"REGISTRY_DATA_DIR": str(target)}
    assert registry_command("tenant", "create", "after", env=env).returncode == 0
    refused = registry_command("restore", str(backup_file), env=env)
    assert refused.returncode == 1
    assert "already holds a database" in refused.stderr and "--force" in refused.stderr
    assert "after" in registry_command("tenant", "list", env=env).stdout  # untouched
    forced = registry_command("restore", "--force", str(backup_file), env=env)
    assert forced.returncode == 0, forced.stderr
    listing = registry_command("tenant", "list", env=env).stdout.split()
    assert "acme" in listing and "after" not in listing

    # A backup that does not verify (its manifest changed) is refused after it was unpacked: a
    # forced restore leaves the database it found, and one into an empty directory leaves nothing,
    # so the next restore needs no --force.
    tampered = _tampered(backup_file, tmp_path / "tampered.backup")
    refused = registry_command("restore", "--force", str(tampered), env=env)
    assert refused.returncode == 1 and "pg_verifybackup failed" in refused.stderr, refused.stderr
    assert "acme" in registry_command("tenant", "list", env=env).stdout.split()
    empty = tmp_path / "empty"
    refused = registry_command("restore", str(tampered), env={"REGISTRY_DATA_DIR": str(empty)})
    assert refused.returncode == 1 and "pg_verifybackup failed" in refused.stderr, refused.stderr
    assert not any(p.is_dir() and any(p.iterdir()) for p in empty.glob("*")), list(empty.rglob("*"))
    again = registry_command("restore", str(backup_file), env={"REGISTRY_DATA_DIR": str(empty)})
    assert again.returncode == 0, again.stderr


def test_restore_and_backup_refuse_what_they_cannot_do(tmp_path: Path) -> None:
    junk = tmp_path / "junk.backup"
    junk.write_bytes(b"not a backup")
    bad = registry_command("restore", str(junk), env={"REGISTRY_DATA_DIR": str(tmp_path / "x")})
    assert bad.returncode == 1 and "is not a registry backup" in bad.stderr
    external = registry_command(
        "backup", str(tmp_path / "y"), env={"REGISTRY_DATABASE_URL": "postgresql://u@h/db"}
    )
    assert external.returncode == 1 and "pg_dump" in external.stderr


def _tampered(source: Path, target: Path) -> Path:
    """``source`` with one character of its manifest's own checksum changed."""
    with tarfile.open(source, "r") as archive, tarfile.open(target, "w") as out:
        for member in archive.getmembers():
            data = archive.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
            if member.name == "backup_manifest":
                at = data.rindex(b'"Manifest-Checksum": "') + len(b'"Manifest-Checksum": "')
                data = data[:at] + (b"0" if data[at : at + 1] != b"0" else b"1") + data[at + 1 :]
                member.size = len(data)
            out.addfile(member, io.BytesIO(data))
    return target
