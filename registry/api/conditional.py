"""Conditional fetch for the read answers (a prompt, a version, a render): each carries a strong
``ETag`` computed from the exact bytes it sends (so it changes with the version served, the labels,
anything in the answer, and nothing else), and ``If-None-Match`` with a matching tag answers 304 with
no body. A render is a safe read sent as POST (its arguments are the body); it answers 304 as a GET
would, which is what a client polling a rendered prompt needs.

A prompt's tag starts with its latest version number (``"7.k3J…"``), so the tag a client read can be
sent back in ``If-Match`` on the next write, which compares version numbers.
"""

from __future__ import annotations

import base64
import hashlib

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

MAX_TAGS = 64  # tags considered in one If-None-Match header


def tag_of(body: bytes, prefix: str = "") -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()[:18]).decode()
    return f'"{prefix}{digest}"'


def _matches(header: str | None, tag: str) -> bool:
    """RFC 9110 If-None-Match: ``*`` or any listed tag equal by weak comparison."""
    if header is None:
        return False
    if header.strip() == "*":
        return True
    candidates = [c.strip() for c in header.split(",", MAX_TAGS)[:MAX_TAGS]]
    return any(c.removeprefix("W/") == tag for c in candidates)


def answer(
    request: Request,
    model: BaseModel,
    *,
    prefix: str = "",
    exclude_none: bool = False,
    by_alias: bool = False,
) -> Response:
    """``model`` as JSON with its ETag, or 304 when the client already holds exactly that."""
    body = model.model_dump_json(exclude_none=exclude_none, by_alias=by_alias).encode()
    tag = tag_of(body, prefix)
    headers = {"ETag": tag, "Cache-Control": "private, no-cache"}
    if _matches(request.headers.get("if-none-match"), tag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
