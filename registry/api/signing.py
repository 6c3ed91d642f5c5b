"""The registry's public signing keys, at well-known addresses: what a host or a CI job verifies
signed skills (``_meta`` of every skill entry), snapshots and receipts against (``registry
verify-skill``, ``registry verify-receipt``, ``PromptClient``). Served to anyone: a public key is no
secret. ``signing-key`` is the key signing now (PEM); ``signing-keys`` every key the registry has
signed with, by id, so what was signed before a rotation still verifies."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from registry import signing
from registry.db import repository as db_repository
from registry.errors import NotFound

router = APIRouter(tags=["signing"])
PATH = "/.well-known/prompt-registry/signing-key"
SET_PATH = "/.well-known/prompt-registry/signing-keys"


class PublishedKey(BaseModel):
    keyId: str = Field(description="what a receipt's or a skill entry's keyId names")
    alg: str = "Ed25519"
    publicKey: str = Field(description="PEM (SubjectPublicKeyInfo)")
    current: bool = Field(description="the key signing now")
    firstUsed: str | None = Field(default=None, description="when it first signed")


class KeySet(BaseModel):
    keys: list[PublishedKey]


def _current(request: Request) -> Any:
    key_file = request.app.state.settings.snapshot_key_file
    if key_file is None:
        raise NotFound("this registry has no signing key (REGISTRY_SNAPSHOT_KEY_FILE is not set)")
    key, _ = signing.key_file(key_file).current()
    return key.public_key()


@router.get(
    PATH,
    response_class=Response,
    responses={200: {"content": {"application/x-pem-file": {}}}},
    summary="The public key skills, snapshots and receipts are signed with now (PEM)",
)
async def signing_key(request: Request) -> Response:
    pem = signing.public_pem(_current(request))
    return Response(
        pem, media_type="application/x-pem-file", headers={"Cache-Control": "max-age=60"}
    )


@router.get(
    SET_PATH,
    response_model=KeySet,
    summary="Every public key the registry has signed with, the current one first",
)
async def signing_keys(request: Request, response: Response) -> KeySet:
    current = _current(request)
    current_id = signing.key_id(current)
    async with request.app.state.db.app_tx() as session:
        rows = await db_repository.signing_keys(session)
    keys = [
        PublishedKey(keyId=current_id, publicKey=signing.public_pem(current).decode(), current=True)
    ]
    for row in rows:
        if row.key_id == current_id:
            keys[0].firstUsed = row.first_used.isoformat()
        else:
            keys.append(
                PublishedKey(
                    keyId=row.key_id,
                    publicKey=row.public_key,
                    current=False,
                    firstUsed=row.first_used.isoformat(),
                )
            )
    response.headers["Cache-Control"] = "max-age=60"
    return KeySet(keys=keys)
