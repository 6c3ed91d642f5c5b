"""Provenance beyond digests: a served skill version is signed (Ed25519, the key snapshots use) over
what it is: its tenant, its name, its version and its manifest (every file's path, digest and size).
The extension's digests say a file is the one the entry names; the signature says the entry is the
one this registry served. ``verify_folder`` checks a downloaded folder against an entry, for
``registry verify-skill`` and any host: the signature first, then every file, none missing or extra.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from registry.signing import (
    Keys,
    SignatureRefused,
    canonical,
    key_file,
    key_id,
    pick,
    private_key,
    sign,
    verify,
)
from registry.skills.folder import MAX_BYTES, MAX_FILES, manifest

SCHEME = "skill://"
META_KEY = "dev.prompt-registry/skill"
_CACHE_SIZE = 10_000


class Signer:
    """Signs served versions with one key, remembering each signature (a version never changes)."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self.key = key
        self.key_id = key_id(key.public_key())
        self._signed: OrderedDict[bytes, str] = OrderedDict()

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        return cls(private_key(path.read_bytes()))

    def signature(self, document: dict[str, Any]) -> str:
        """The signature of ``document``, remembered by its digest: a version deleted and written
        again under the same number is another document, never served the old one's signature."""
        key = hashlib.sha256(canonical(document)).digest()
        found = self._signed.get(key)
        if found is None:
            found = str(sign(document, self.key)["signature"])
            self._signed[key] = found
            if len(self._signed) > _CACHE_SIZE:
                self._signed.popitem(last=False)
        return found


@functools.lru_cache(maxsize=4)
def signer_of(key: Ed25519PrivateKey, key_id: str) -> Signer:
    """The worker's signer of one key (a rotated key gets a signer of its own)."""
    del key_id  # part of the cache's key only
    return Signer(key)


def signed(
    key_path: Path | None,
    tenant: str,
    skill: str,
    version: int,
    files: Iterable[tuple[str, str, int]],
) -> dict[str, str]:
    """``{alg, keyId, signature}`` over a version's document with the key signing now, what a
    skill entry's provenance and a version read over REST carry; empty without a key."""
    if key_path is None:
        return {}
    signer = signer_of(*key_file(key_path).current())
    found = signer.signature(document(tenant, skill, version, files))
    return {"alg": "Ed25519", "keyId": signer.key_id, "signature": found}


def document(
    tenant: str, skill: str, version: int, files: Iterable[tuple[str, str, int]]
) -> dict[str, Any]:
    """What a signature covers (``files``: path, sha256 hex, size). A label is not in it: labels
    move, a version never changes."""
    return {"tenant": tenant, "skill": skill, "version": version, "files": manifest(files)}


def manifest_digest(document: dict[str, Any]) -> str:
    """The digest of a served version's signed document (``document``): ``sha256:`` and the hex
    SHA-256 of its canonical JSON. What a skill's event names, so that a host compares it with the
    entry it holds (``entry_document``) and refreshes only what changed."""
    return "sha256:" + hashlib.sha256(canonical(document)).hexdigest()


def entry_document(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the signed document, the provenance) of a skill entry as skills/list or skills/get
    answer it; SignatureRefused when the entry does not carry what is needed."""
    try:
        meta = entry["_meta"][META_KEY]
        name = entry["frontmatter"]["name"]
        files = []
        for resource in entry["resources"]:
            uri, digest, size = resource["uri"], resource["digest"], resource["size"]
            prefix = f"{SCHEME}{name}/"
            if not uri.startswith(prefix) or not digest.startswith("sha256:"):
                raise SignatureRefused(f"the entry names a file outside the skill: {uri!r}")
            files.append((uri[len(prefix) :], digest.removeprefix("sha256:"), int(size)))
        if "signature" not in meta:
            raise SignatureRefused(
                "the entry carries no signature (the registry has no signing key)"
            )
        return document(meta["tenant"], name, int(meta["version"]), files), meta
    except (KeyError, TypeError, ValueError) as error:
        raise SignatureRefused(f"not a skill entry of this registry: {error}") from None


def verify_folder(
    folder: Path, entry: dict[str, Any], keys: Keys, *, tenant: str | None = None
) -> list[str]:
    """Check a downloaded folder against the entry it was downloaded by: the entry's signature
    with ``key`` (and its tenant, when given), then each file's digest and size, and that the
    folder holds exactly the entry's files. The problems found (none: the folder is what this
    registry served); SignatureRefused when the entry itself does not verify."""
    signed, meta = entry_document(entry)
    verify({"document": signed, "signature": meta["signature"]}, pick(keys, meta.get("keyId")))
    if tenant is not None and signed["tenant"] != tenant:
        raise SignatureRefused(f"the skill is tenant {signed['tenant']!r}'s, not {tenant!r}'s")
    return differences(folder, signed)


def differences(folder: Path, signed: dict[str, Any]) -> list[str]:
    """How ``folder`` differs from a version's signed document (``document``): each file missing,
    extra, or not the manifest's (none: the folder is that version, byte for byte)."""
    expected = {f["path"]: f for f in signed["files"]}
    problems = []
    present = _files(folder)
    for path in sorted(expected.keys() - present.keys()):
        problems.append(f"{path}: missing")
    for path in sorted(present.keys() - expected.keys()):
        problems.append(f"{path}: not in the skill's manifest")
    for path in sorted(expected.keys() & present.keys()):
        data = present[path].read_bytes()
        if len(data) != expected[path]["size"]:
            problems.append(
                f"{path}: {len(data)} bytes, the manifest says {expected[path]['size']}"
            )
        elif f"sha256:{hashlib.sha256(data).hexdigest()}" != expected[path]["digest"]:
            problems.append(f"{path}: its digest is not the manifest's (the file was changed)")
    return problems


def _files(folder: Path) -> dict[str, Path]:
    """Every file under ``folder`` by its path in the skill (bounded as a skill is)."""
    found: dict[str, Path] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file():
            continue
        total += path.stat().st_size
        if len(found) >= MAX_FILES or total > MAX_BYTES:
            raise SignatureRefused(
                f"{folder} holds more than a skill can ({MAX_FILES} files, 16 MiB)"
            )
        found[path.relative_to(folder).as_posix()] = path
    return found
