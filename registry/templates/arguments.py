"""Typed prompt arguments: validated when declared, and again for every value a caller sends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from registry.errors import InvalidInput

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the author's error, reported to them, not logged


class InvalidArgument(InvalidInput):
    """A value a caller sent for a prompt argument (or the lack of one) is not acceptable."""

    code = "invalid_argument"


@dataclass(frozen=True)
class ArgumentSpec:
    name: str
    required: bool = False
    default: str | None = None
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    max_length: int | None = None


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Any:
    """RE2: linear-time matching whatever the pattern, so no author can make a render slow."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as error:
        reason = (
            error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else error
        )
        raise InvalidInput(f"invalid pattern {pattern!r}: {reason}") from None


def check_value(spec: ArgumentSpec, value: str) -> None:
    if spec.max_length is not None and len(value) > spec.max_length:
        raise InvalidArgument(
            f"argument {spec.name!r} is {len(value)} characters long; the most is {spec.max_length}",
            argument=spec.name,
        )
    if spec.enum is not None and value not in spec.enum:
        shown = ", ".join(repr(v) for v in spec.enum[:10]) + (", …" if len(spec.enum) > 10 else "")
        raise InvalidArgument(f"argument {spec.name!r} must be one of {shown}", argument=spec.name)
    if spec.pattern is not None and compile_pattern(spec.pattern).fullmatch(value) is None:
        raise InvalidArgument(
            f"argument {spec.name!r} does not match the pattern {spec.pattern!r}",
            argument=spec.name,
        )


def resolve_arguments(
    specs: Sequence[ArgumentSpec], given: Mapping[str, Any] | None, *, max_value_length: int
) -> dict[str, str]:
    """The values to render with: checked, defaults filled, missing optional ones empty.

    Raises InvalidArgument naming the argument for an unknown name, a non-string value, a missing
    required one or a value that breaks a constraint.
    """
    given = dict(given or {})
    declared = {spec.name: spec for spec in specs}
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(repr(n) for n in declared) or "none"
        raise InvalidArgument(
            f"unknown argument {unknown[0]!r} (this prompt takes: {known})", argument=unknown[0]
        )
    missing = [s.name for s in specs if s.required and given.get(s.name) is None]
    if missing:
        raise InvalidArgument(
            f"missing required argument {missing[0]!r}"
            + (
                f" (also missing: {', '.join(repr(m) for m in missing[1:])})" if missing[1:] else ""
            ),
            argument=missing[0],
            missing=missing,
        )
    values: dict[str, str] = {}
    for spec in specs:
        value = given.get(spec.name)
        if value is None:
            values[spec.name] = spec.default if spec.default is not None else ""
            continue
        if not isinstance(value, str):
            raise InvalidArgument(
                f"argument {spec.name!r} must be a string, not {type(value).__name__}",
                argument=spec.name,
            )
        if len(value) > max_value_length:
            raise InvalidArgument(
                f"argument {spec.name!r} is longer than the server's limit of {max_value_length}",
                argument=spec.name,
            )
        check_value(spec, value)
        values[spec.name] = value
    return values
