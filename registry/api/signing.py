"""The registry's public signing key, at a well-known address: what a host or a CI job verifies
signed skills (``_meta`` of every skill entry) and snapshots against (``registry verify-skill``,
``PromptClient``). Served to anyone: a public key is no secret."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from registry import signing
from registry.errors import NotFound

router = APIRouter(tags=["signing"])
PATH = "/.well-known/prompt-registry/signing-key"


@router.get(
    PATH,
    response_class=Response,
    responses={200: {"content": {"application/x-pem-file": {}}}},
    summary="The public key skills and snapshots are signed with (PEM)",
)
async def signing_key(request: Request) -> Response:
    key_file = request.app.state.settings.snapshot_key_file
    if key_file is None:
        raise NotFound("this registry has no signing key (REGISTRY_SNAPSHOT_KEY_FILE is not set)")
    key, _ = signing.key_file(key_file).current()
    pem = signing.public_pem(key.public_key())
    return Response(
        pem, media_type="application/x-pem-file", headers={"Cache-Control": "max-age=300"}
    )
