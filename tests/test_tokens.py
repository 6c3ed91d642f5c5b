"""The one codec of opaque tokens: bound to purpose and context, tamper-evident, expiring."""

from __future__ import annotations

import pytest

from registry import tokens
from registry.tokens import ExpiredToken, InvalidToken, TokenCodec

KEY = b"k" * 32


def test_a_token_opens_only_for_its_purpose_context_and_key() -> None:
    codec = TokenCodec(KEY)
    token = codec.issue("mcp-cursor", ["tenant-a", "production"], ["greet", 100])
    assert codec.open("mcp-cursor", ["tenant-a", "production"], token, max_age=60) == ["greet", 100]
    for purpose, context in [
        ("mcp-cursor", ["tenant-b", "production"]),
        ("mcp-cursor", ["tenant-a", "staging"]),
        ("rest-cursor", ["tenant-a", "production"]),
    ]:
        with pytest.raises(InvalidToken):
            codec.open(purpose, context, token, max_age=60)  # type: ignore[arg-type]
    with pytest.raises(InvalidToken):
        TokenCodec(b"x" * 32).open("mcp-cursor", ["tenant-a", "production"], token, max_age=60)


def test_altered_or_malformed_tokens_are_invalid() -> None:
    codec = TokenCodec(KEY)
    token = codec.issue("rest-cursor", ["t"], ["name"])
    body, _, rest = token.partition(".")
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + rest
    for bad in [flipped, token + "x", "", "no-dots", "a.b.c", None, 42, "x" * 5000]:
        with pytest.raises(InvalidToken):
            codec.open("rest-cursor", ["t"], bad, max_age=60)


def test_tokens_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = TokenCodec(KEY)
    issued = tokens.now()
    token = codec.issue("request-state", ["t"], [])
    monkeypatch.setattr("registry.tokens.now", lambda: issued + 601)
    with pytest.raises(ExpiredToken):
        codec.open("request-state", ["t"], token, max_age=600)
    assert codec.open("request-state", ["t"], token, max_age=700) == []


def test_a_token_opens_with_the_time_it_was_issued(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a kept answer that opened a cursor needs: when the cursor stops opening."""
    codec = TokenCodec(KEY)
    monkeypatch.setattr("registry.tokens.now", lambda: 1_800_000_000.7)
    token = codec.issue("mcp-cursor", ["t", "production"], ["p", 2])
    monkeypatch.setattr("registry.tokens.now", lambda: 1_800_000_500.0)
    opened = codec.open_dated("mcp-cursor", ["t", "production"], token, max_age=600)
    assert opened == (1_800_000_000, ["p", 2])
