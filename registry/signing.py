"""Ed25519 signatures over JSON documents that leave the server and come back (prompt snapshots):
the document is signed as canonical JSON (sorted keys, no spaces, UTF-8), so any change to it, even
of a space, fails verification; receipts use the JSON Canonicalization Scheme (RFC 8785, ``jcs``),
which a verifier in any language has. Keys are PEM files, as ``openssl genpkey -algorithm ed25519``
writes them; the cryptography is the ``cryptography`` package's. ``KeyFile`` is the server's key:
read again when its file is replaced, so a rotation needs no restart."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class SignatureRefused(ValueError):
    """A document whose signature does not verify, or a key that is not an Ed25519 key."""


def canonical(document: Any) -> bytes:
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)


def jcs(value: Any) -> bytes:
    """``value`` in the JSON Canonicalization Scheme (RFC 8785). orjson writes the same bytes for
    every value but floats (RFC 8785 writes them as JavaScript does) and keys that order otherwise
    by UTF-16 code units than by code points (only beside characters past U+FFFF): floats are put
    in as RFC 8785's text, and a key past U+FFFF takes the pure-Python library for the whole value.
    Hand-written beside the library: 2-7 us for a rendered prompt against its 140 us, the same
    bytes (tests/test_signing.py compares the two on generated values)."""
    try:
        prepared = _prepared(value)
    except _Astral:
        return bytes(rfc8785.dumps(value))
    return orjson.dumps(prepared, option=orjson.OPT_SORT_KEYS)


class _Astral(Exception):
    pass


def _prepared(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        out = {}
        for key, item in value.items():
            if not key.isascii() and max(key) > "\uffff":
                raise _Astral
            out[key] = _prepared(item)
        return out
    if kind is list:
        return [_prepared(item) for item in value]
    if kind is float:
        return orjson.Fragment(rfc8785.dumps(value))
    return value


def private_key(pem: bytes) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise SignatureRefused(f"not a PEM private key without a password: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureRefused("the signing key must be an Ed25519 key")
    return key


def public_key(pem: bytes) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as error:
        raise SignatureRefused(f"not a PEM public key: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureRefused("the verifying key must be an Ed25519 key")
    return key


# What a verifier is given: one public key, or a key set by id (what /signing-keys publishes).
Keys = Ed25519PublicKey | Mapping[str, Ed25519PublicKey]


def public_keys(data: bytes) -> dict[str, Ed25519PublicKey]:
    """The keys of a PEM file (one key) or of a key set as ``/.well-known/prompt-registry/
    signing-keys`` answers it (``{"keys": [{"keyId", "publicKey"}]}``), by id; each id checked
    against its key. SignatureRefused when it is neither."""
    if data.lstrip().startswith(b"-----BEGIN"):
        key = public_key(data)
        return {key_id(key): key}
    try:
        listed = orjson.loads(data)["keys"]
        found = {}
        for entry in listed:
            key = public_key(entry["publicKey"].encode())
            if key_id(key) != entry["keyId"]:
                raise SignatureRefused(
                    f"the key set names a key {entry['keyId']!r} it does not hold"
                )
            found[entry["keyId"]] = key
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise SignatureRefused("not a PEM public key, nor a key set of the registry") from None
    if not found:
        raise SignatureRefused("the key set holds no key")
    return found


def pick(keys: Keys, named: Any) -> Ed25519PublicKey:
    """The key of ``keys`` that signed a document naming ``named`` as its keyId (one key: that
    key, whatever the name)."""
    if isinstance(keys, Ed25519PublicKey):
        return keys
    found = keys.get(named) if isinstance(named, str) else None
    if found is None:
        raise SignatureRefused(
            f"signed with the key {str(named)[:40]!r}, which the keys given do not hold "
            "(GET /.well-known/prompt-registry/signing-keys has every key the registry used)"
        )
    return found


def key_id(key: Ed25519PublicKey) -> str:
    """A short name of a public key (what a snapshot says it was signed with)."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def sign(document: Any, key: Ed25519PrivateKey) -> dict[str, Any]:
    """``{"document", "key_id", "signature"}``: the document and its signature (base64)."""
    signature = key.sign(canonical(document))
    return {
        "document": document,
        "key_id": key_id(key.public_key()),
        "signature": base64.b64encode(signature).decode(),
    }


def verify(signed: Any, key: Ed25519PublicKey) -> Any:
    """The document of ``signed`` once its signature verifies with ``key``; SignatureRefused else."""
    if not isinstance(signed, dict) or not {"document", "signature"} <= signed.keys():
        raise SignatureRefused("not a signed document (document and signature expected)")
    try:
        signature = base64.b64decode(signed["signature"], validate=True)
        key.verify(signature, canonical(signed["document"]))
    except (InvalidSignature, ValueError, TypeError):
        raise SignatureRefused(
            "the signature does not verify: the document was changed, or signed with another key"
        ) from None
    return signed["document"]


def sign_bytes(data: bytes, key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.sign(data)).decode()


def verify_bytes(data: bytes, signature: Any, key: Ed25519PublicKey) -> None:
    try:
        key.verify(base64.b64decode(signature, validate=True), data)
    except (InvalidSignature, ValueError, TypeError):
        raise SignatureRefused(
            "the signature does not verify: the document was changed, or signed with another key"
        ) from None


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


class KeyFile:
    """The server's signing key, from its file (``REGISTRY_SNAPSHOT_KEY_FILE``), read again when the
    file changes (its size, time or inode, looked at most once a second): replacing the file rotates
    the key in every worker without a restart. A file that cannot be read as a key (replaced half
    written) leaves the previous key in use. ``on_new_key`` callbacks hear of every key it loads."""

    CHECK_SECONDS = 1.0

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stat: tuple[int, int, int] | None = None
        self._checked = float("-inf")
        self._key: Ed25519PrivateKey | None = None
        self._key_id = ""
        self.on_new_key: list[Callable[[Ed25519PublicKey], None]] = []

    def current(self) -> tuple[Ed25519PrivateKey, str]:
        """The key to sign with now, and its id."""
        now = time.monotonic()
        if self._key is None or now - self._checked >= self.CHECK_SECONDS:
            with self._lock:
                self._checked = now
                self._reload()
        assert self._key is not None
        return self._key, self._key_id

    def _reload(self) -> None:
        try:
            found = os.stat(self.path)
        except OSError:
            if self._key is None:
                raise
            return
        stat = (found.st_ino, found.st_size, found.st_mtime_ns)
        if stat == self._stat:
            return
        try:
            key = private_key(self.path.read_bytes())
        except (OSError, SignatureRefused):
            if self._key is None:
                raise
            return
        self._stat, self._key = stat, key
        self._key_id = key_id(key.public_key())
        for heard in self.on_new_key:
            heard(key.public_key())


def make_key_file(path: Path) -> bool:
    """A new Ed25519 key in ``path`` (PEM, PKCS #8, readable by its owner only) unless one is there
    already; whether it was made. Written whole or not at all (a file beside it, renamed)."""
    if path.exists():
        return False
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(pem)
    os.replace(partial, path)
    return True


_KEY_FILES: dict[Path, KeyFile] = {}


def key_file(path: Path) -> KeyFile:
    """The one KeyFile of ``path`` in this process."""
    found = _KEY_FILES.get(path)
    if found is None:
        found = _KEY_FILES.setdefault(path, KeyFile(path))
    return found
