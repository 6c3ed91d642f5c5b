"""Receipts: what exactly an answer served (tenant, prompt, version, the label it was reached
through, the partial versions locked into it, a digest of the arguments and one of the rendered
result), signed with the registry's key (the one snapshots and skills are signed with), so an
application or an auditor can later prove which text a model was given.

A receipt describes the answer, not the request (no time, no caller): an answer kept and sent again
keeps its receipt. ``check`` verifies one, and that it is the receipt of the result beside it."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from registry.signing import SignatureRefused, canonical, private_key, sign, verify

META_KEY = "dev.prompt-registry/receipt"
SIGNATURE_FIELDS = ("alg", "keyId", "signature")


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


@functools.lru_cache(maxsize=4)
def signing_key(path: Path) -> Ed25519PrivateKey:
    """The key of ``REGISTRY_SNAPSHOT_KEY_FILE``, read once per worker."""
    return private_key(path.read_bytes())


def make(
    *,
    tenant: str,
    served: dict[str, Any],
    label: str | None,
    arguments: dict[str, Any],
    result: Any,
    key: Ed25519PrivateKey | None,
) -> dict[str, Any]:
    """The receipt of one answer, signed when there is a key. ``served``: what was served (a
    prompt: ``{"prompt", "version", "partials"}``; a skill's file: ``{"skill", "version",
    "file"}``); ``result``: what the answer holds of it (the rendered messages; the file's
    contents)."""
    document: dict[str, Any] = {
        "tenant": tenant,
        **served,
        "label": label,
        "arguments": digest(arguments),
        "result": digest(result),
    }
    if key is None:
        return document
    signed = sign(document, key)
    return {
        **document,
        "alg": "Ed25519",
        "keyId": signed["key_id"],
        "signature": signed["signature"],
    }


def check(receipt: Any, key: Ed25519PublicKey, *, result: Any = None) -> dict[str, Any]:
    """The receipt's document once its signature verifies with ``key`` (and, given the
    ``result`` it came with, once that result is the one it names); SignatureRefused else."""
    if not isinstance(receipt, dict) or "signature" not in receipt:
        raise SignatureRefused("not a signed receipt (the registry that made it has no key)")
    document = {k: v for k, v in receipt.items() if k not in SIGNATURE_FIELDS}
    verify({"document": document, "signature": receipt["signature"]}, key)
    if result is not None and digest(result) != document.get("result"):
        raise SignatureRefused("the result is not the one this receipt names (it was changed)")
    return document


def check_answer(answer: Any, key: Ed25519PublicKey) -> dict[str, Any]:
    """Check the receipt an answer carries against the answer: a prompts/get result or the REST
    render (its messages), a tool call (its structured messages), a skill file read (its
    contents); a whole JSON-RPC response is taken too. The receipt's document; SignatureRefused
    when it does not verify or names another result."""
    if isinstance(answer, dict) and isinstance(answer.get("result"), dict):
        answer = answer["result"]
    if not isinstance(answer, dict):
        raise SignatureRefused("not an answer of the registry (a JSON object expected)")
    receipt = (answer.get("_meta") or {}).get(META_KEY)
    if "messages" in answer:
        result = answer["messages"]
    elif isinstance(answer.get("structuredContent"), dict):
        result = answer["structuredContent"].get("messages")
    elif isinstance(answer.get("contents"), list) and answer["contents"]:
        first = answer["contents"][0]
        result = first.get("text", first.get("blob")) if isinstance(first, dict) else None
    else:
        result = None
    if receipt is None or result is None:
        raise SignatureRefused("the answer carries no receipt, or nothing a receipt names")
    return check(receipt, key, result=result)
