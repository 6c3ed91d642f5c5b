"""The one codec for the opaque tokens the registry hands out and takes back: MCP list cursors,
2026-07-28 ``requestState``, REST page cursors, and the Events extension's poll cursors.

A token is ``<payload>.<tag>`` (both base64url): the payload is JSON ``[format, issued_at, ...]``,
the tag an HMAC-SHA256 (the standard library's, truncated to 128 bits) keyed with a key derived from
the server-wide secret for the token's purpose and format, over the token's context (tenant, label,
caller...) and the payload. The context is signed but not carried, so a token shown elsewhere, or
used for another purpose, fails the check. A format that changes takes a new number; tokens of the
old one are refused as invalid. Tokens are opaque to clients but not secret: never put in one what
the caller may not read.

Hand-written on ``hmac`` rather than itsdangerous: measured on the prompts/list path, itsdangerous
took 34 µs to issue and 18 µs to open a cursor against 6 and 8 µs here (it derives its key and
builds a serializer per call), about 15% of a cached list page.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import time
from collections.abc import Sequence
from typing import Any, Literal

Purpose = Literal["mcp-cursor", "request-state", "rest-cursor", "console-login", "events-cursor"]
FORMATS: dict[Purpose, int] = {
    "mcp-cursor": 1,
    "request-state": 1,
    "rest-cursor": 1,
    "console-login": 1,  # the console's sign-in in flight: tenant, issuer, state, PKCE verifier
    "events-cursor": 1,  # an events/poll position: tenant, event type, arguments; the change seq
}
MAX_TOKEN_LENGTH = 4096
CLOCK_SKEW_SECONDS = 60  # a token "issued" further in the future than this is not one of ours
_TAG_BYTES = 16


class InvalidToken(Exception):
    """Not a token this server issued for this purpose and context (forged, altered, misplaced)."""


class ExpiredToken(InvalidToken):
    """A genuine token, older than its purpose allows."""


def now() -> float:
    """The clock tokens are stamped and checked with (one place to move it in tests)."""
    return time.time()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _context(context: Sequence[Any]) -> bytes:
    # repr of a tuple of strings and numbers is unambiguous (quotes escaped), and cheap.
    return repr(tuple(context)).encode()


class TokenCodec:
    def __init__(self, key: bytes) -> None:
        # One key per purpose and format, so no token of one can ever pass for another.
        self._keys = {
            purpose: hmac.digest(key, f"registry/{purpose}/v{number}".encode(), "sha256")
            for purpose, number in FORMATS.items()
        }

    def _tag(self, purpose: Purpose, context: Sequence[Any], payload: bytes) -> bytes:
        message = _context(context) + b"\x00" + payload
        return hmac.digest(self._keys[purpose], message, "sha256")[:_TAG_BYTES]

    def issue(self, purpose: Purpose, context: Sequence[Any], payload: list[Any]) -> str:
        """A token carrying ``payload`` (JSON values), valid only for ``purpose`` and ``context``."""
        body = json.dumps(
            [FORMATS[purpose], int(now()), *payload], separators=(",", ":"), ensure_ascii=False
        ).encode()
        return f"{_b64(body)}.{_b64(self._tag(purpose, context, body))}"

    def open(
        self, purpose: Purpose, context: Sequence[Any], token: object, *, max_age: int
    ) -> list[Any]:
        """The payload of a token issued for ``purpose`` and ``context`` at most ``max_age`` seconds
        ago; InvalidToken or ExpiredToken otherwise."""
        return self.open_dated(purpose, context, token, max_age=max_age)[1]

    def open_dated(
        self, purpose: Purpose, context: Sequence[Any], token: object, *, max_age: int
    ) -> tuple[int, list[Any]]:
        """``open``, with the time the token was issued (the clock of ``now``, whole seconds)."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_LENGTH:
            raise InvalidToken
        encoded, dot, tag = token.partition(".")
        if not dot:
            raise InvalidToken
        try:
            body, given = _unb64(encoded), _unb64(tag)
        except (binascii.Error, ValueError):
            raise InvalidToken from None
        if not hmac.compare_digest(given, self._tag(purpose, context, body)):
            raise InvalidToken
        try:
            fields = json.loads(body)
        except ValueError:
            raise InvalidToken from None
        match fields:
            case [int(number), int(issued), *payload] if number == FORMATS[purpose]:
                pass
            case _:
                raise InvalidToken
        age = now() - issued
        if age < -CLOCK_SKEW_SECONDS:
            raise InvalidToken
        if age > max_age:
            raise ExpiredToken
        return issued, list(payload)
