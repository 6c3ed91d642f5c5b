"""Ed25519 signatures over JSON documents that leave the server and come back (prompt snapshots):
the document is signed as canonical JSON (sorted keys, no spaces, UTF-8), so any change to it, even
of a space, fails verification. Keys are PEM files, as ``openssl genpkey -algorithm ed25519`` writes
them; the cryptography is the ``cryptography`` package's."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class SignatureRefused(ValueError):
    """A document whose signature does not verify, or a key that is not an Ed25519 key."""


def canonical(document: Any) -> bytes:
    return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)


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
