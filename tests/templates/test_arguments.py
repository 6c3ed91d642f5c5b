"""Argument values: required, unknown, defaults, enum, pattern (RE2), length."""

from __future__ import annotations

import pytest

from registry.errors import InvalidInput
from registry.templates.arguments import (
    ArgumentSpec,
    InvalidArgument,
    compile_pattern,
    resolve_arguments,
)

SPECS = [
    ArgumentSpec("topic", required=True, max_length=20),
    ArgumentSpec("tone", enum=("formal", "casual"), default="casual"),
    ArgumentSpec("ticket", pattern=r"[A-Z]+-\d+"),
    ArgumentSpec("note"),
]


def resolve(given: dict[str, object]) -> dict[str, str]:
    return resolve_arguments(SPECS, given, max_value_length=1000)


def test_defaults_and_empty_optional_values() -> None:
    assert resolve({"topic": "t"}) == {"topic": "t", "tone": "casual", "ticket": "", "note": ""}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "missing required argument 'topic'"),
        ({"topic": "t", "colour": "red"}, "unknown argument 'colour'"),
        ({"topic": "x" * 21}, "argument 'topic' is 21 characters long; the most is 20"),
        ({"topic": "t", "tone": "rude"}, "argument 'tone' must be one of 'formal', 'casual'"),
        ({"topic": "t", "ticket": "abc"}, "argument 'ticket' does not match the pattern"),
        ({"topic": 3}, "argument 'topic' must be a string"),
        ({"topic": "t", "note": "n" * 1001}, "longer than the server's limit of 1000"),
    ],
)
def test_bad_values_name_the_argument(given: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        resolve(given)


def test_pattern_must_match_whole_value() -> None:
    assert resolve({"topic": "t", "ticket": "AB-12"})["ticket"] == "AB-12"
    with pytest.raises(InvalidArgument):
        resolve({"topic": "t", "ticket": "xAB-12x"})


def test_patterns_are_re2_linear_time() -> None:
    # Catastrophic for a backtracking engine; RE2 answers at once.
    assert compile_pattern(r"(a+)+$").fullmatch("a" * 100_000 + "b") is None
    with pytest.raises(InvalidInput, match="invalid pattern"):
        compile_pattern(r"(a)\1")
