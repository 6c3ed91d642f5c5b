"""The one codec for the opaque tokens the registry hands out and takes back: MCP list cursors,
2026-07-28 ``requestState``, and REST page cursors.

A token is signed (HMAC-SHA256 through itsdangerous, keyed with the server-wide secret every worker
and instance shares), stamped with its issue time, and bound to a purpose and its context (tenant,
label, caller...): the context is part of what is signed but is not carried, so a token shown
elsewhere, or used for another purpose, fails the signature. Each purpose names its format version;
a format that changes takes a new version, and tokens of the old one are refused as invalid.
Tokens are opaque to clients but not secret: never put in one what the caller may not read.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any, Literal

from itsdangerous import BadSignature, SignatureExpired, TimestampSigner, URLSafeTimedSerializer

Purpose = Literal["mcp-cursor", "request-state", "rest-cursor"]
FORMATS: dict[Purpose, int] = {"mcp-cursor": 1, "request-state": 1, "rest-cursor": 1}
MAX_TOKEN_LENGTH = 4096


class InvalidToken(Exception):
    """Not a token this server issued for this purpose and context (forged, altered, misplaced)."""


class ExpiredToken(InvalidToken):
    """A genuine token, older than its purpose allows."""


def now() -> float:
    """The clock tokens are stamped and checked with (one place to move it in tests)."""
    return time.time()


class _ClockSigner(TimestampSigner):
    """itsdangerous's timestamp signer on ``now()`` (stamping and checking alike)."""

    def get_timestamp(self) -> int:
        return int(now())


class TokenCodec:
    def __init__(self, key: bytes) -> None:
        self.key = key

    def _serializer(self, purpose: Purpose, context: Sequence[Any]) -> URLSafeTimedSerializer:
        salt = json.dumps(
            ["registry", purpose, FORMATS[purpose], *context], separators=(",", ":"), default=str
        )
        return URLSafeTimedSerializer(
            self.key,
            salt=salt,
            signer=_ClockSigner,
            signer_kwargs={"digest_method": hashlib.sha256},
        )

    def issue(self, purpose: Purpose, context: Sequence[Any], payload: list[Any]) -> str:
        """A token carrying ``payload`` (JSON values), valid only for ``purpose`` and ``context``."""
        return str(self._serializer(purpose, context).dumps(payload))

    def open(
        self, purpose: Purpose, context: Sequence[Any], token: object, *, max_age: int
    ) -> list[Any]:
        """The payload of a token issued for ``purpose`` and ``context`` at most ``max_age`` seconds
        ago; InvalidToken or ExpiredToken otherwise."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken
        serializer = self._serializer(purpose, context)
        try:
            payload = serializer.loads(token, max_age=max_age)
        except SignatureExpired:
            raise ExpiredToken from None
        except BadSignature:
            raise InvalidToken from None
        if not isinstance(payload, list):
            raise InvalidToken
        return payload
