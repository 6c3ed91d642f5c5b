"""Receipts: what exactly an answer served (tenant, prompt, version, the label it was reached
through, the partial versions locked into it, a digest of the arguments and one of the whole result
the client was given), signed with the registry's key (the one snapshots and skills are signed
with), so an application or an auditor can later prove which text a model was given.

A receipt (``"v": 2``) covers every byte of the result a client can hand to a model: the whole
result object but the receipt's own ``_meta`` entry, in the JSON Canonicalization Scheme (RFC 8785),
hashed with SHA-256 (docs/receipts.md says it for a verifier in another language). It describes the
answer, not the request (no time, no caller): an answer kept and sent again keeps its receipt.

An answer's handler names what it served (``pending``); the protocol core seals the finished
result (``seal``), after everything it adds. ``check_answer`` verifies a receipt against the answer
beside it and refuses any it does not cover whole."""

from __future__ import annotations

import hashlib
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from registry.signing import Keys, SignatureRefused, jcs, pick, sign_bytes, verify_bytes

META_KEY = "dev.prompt-registry/receipt"
VERSION = 2  # what a receipt covers: the whole result but its own _meta entry (docs/receipts.md)
SIGNATURE_FIELDS = ("alg", "keyId", "signature")
_PENDING = "pending"  # a receipt not sealed yet: the result it will cover is not finished


def digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(jcs(value)).hexdigest()


def covered(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as its receipt covers it: everything but the receipt's own entry of ``_meta``
    (``_meta`` itself stays, empty when the receipt was all it held)."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or META_KEY not in meta:
        return result
    return {**result, "_meta": {k: v for k, v in meta.items() if k != META_KEY}}


def pending(
    *, tenant: str, served: dict[str, Any], label: str | None, arguments: dict[str, Any]
) -> dict[str, Any]:
    """What a handler puts at ``_meta[META_KEY]`` of its result: what it served (a prompt:
    ``{"prompt", "version", "partials"}``; a skill's file: ``{"skill", "version", "file"}``), the
    label and the arguments' digest; ``seal`` completes it once the result is finished."""
    return {
        "v": VERSION,
        "tenant": tenant,
        **served,
        "label": label,
        "arguments": digest(arguments),
        _PENDING: True,
    }


def seal(result: dict[str, Any], key: Ed25519PrivateKey | None, key_id: str | None) -> None:
    """Complete the pending receipt of ``result`` in place (none: nothing to do): the digest of
    the result it covers, and the signature when the server has a key."""
    meta = result.get("_meta")
    if not isinstance(meta, dict):
        return
    receipt = meta.get(META_KEY)
    if not isinstance(receipt, dict) or not receipt.get(_PENDING):
        return
    document = {k: v for k, v in receipt.items() if k != _PENDING}
    document["result"] = digest(covered(result))
    if key is not None and key_id is not None:
        document.update(alg="Ed25519", keyId=key_id)
        document["signature"] = sign_bytes(jcs(document), key)
    meta[META_KEY] = document


def check(receipt: Any, keys: Keys) -> dict[str, Any]:
    """The receipt's document once its signature verifies with ``keys`` (one key, or a key set:
    the one its keyId names); SignatureRefused else."""
    if not isinstance(receipt, dict) or not isinstance(receipt.get("signature"), str):
        raise SignatureRefused("not a signed receipt (the registry that made it has no key)")
    if receipt.get("v") != VERSION:
        raise SignatureRefused(
            f"a receipt of another format (v {receipt.get('v')!r}): this verifier checks v "
            f"{VERSION}, which covers the whole result; an earlier receipt covered only part of it"
        )
    document = {k: v for k, v in receipt.items() if k != "signature"}
    verify_bytes(jcs(document), receipt["signature"], pick(keys, receipt.get("keyId")))
    return {k: v for k, v in document.items() if k not in SIGNATURE_FIELDS}


def check_answer(answer: Any, keys: Keys) -> dict[str, Any]:
    """Check the receipt an answer carries against the whole answer: a prompts/get result, a tool
    call, the REST render, a skill file read; a whole JSON-RPC response is taken too. The receipt's
    document; SignatureRefused when it does not verify or the result is not the one it covers."""
    if isinstance(answer, dict) and isinstance(answer.get("result"), dict):
        if not set(answer) <= {"jsonrpc", "id", "result"}:
            raise SignatureRefused(
                "the response holds members beside its result, which no receipt covers"
            )
        answer = answer["result"]
    if not isinstance(answer, dict):
        raise SignatureRefused("not an answer of the registry (a JSON object expected)")
    meta = answer.get("_meta")
    if not isinstance(meta, dict) or META_KEY not in meta:
        raise SignatureRefused("the answer carries no receipt (_meta holds none)")
    document = check(meta[META_KEY], keys)
    if digest(covered(answer)) != document.get("result"):
        raise SignatureRefused("the answer is not the one this receipt covers (it was changed)")
    return document
