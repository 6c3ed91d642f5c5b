"""What every input must be: for models, unknown fields refused and no NUL characters anywhere
(PostgreSQL text cannot hold them, and they have no business in a prompt); for every JSON document
the registry accepts (REST bodies, MCP messages), a bounded nesting depth and no lone surrogates
(text that cannot be stored or sent back as UTF-8), and in free-form values (model config, content
_meta) only numbers that can be sent back as they came; for every YAML document (prompt files, the
console's editor), no anchors or aliases and a bounded number of nodes, checked while it is read,
so a few hundred bytes cannot expand into gigabytes.

jsonschema and PyYAML are imported where they are first used: the commands that read neither (such
as ``registry tenant list``) do not load them, about a tenth of a second each."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import orjson
from pydantic import BaseModel, ConfigDict, model_validator

from registry.naming import find_nul

if TYPE_CHECKING:
    import yaml


class StrictInput(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        where = find_nul(data)
        if where:
            raise ValueError(f"{where}: text may not contain NUL (\\u0000) characters")
        return data


# A whole document (an export bundle nests a prompt's content some ten levels down) and one
# free-form value inside it (content _meta): far below what the encoders refuse (orjson: 255).
MAX_JSON_DEPTH = 128
MAX_VALUE_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonRefused(ValueError):
    """A JSON document the registry does not accept; the message says why and where."""


def check_json(
    value: Any, max_depth: int = MAX_JSON_DEPTH, *, numbers: bool = False, path: str = ""
) -> None:
    """Refuse a parsed document nested deeper than ``max_depth`` or holding a lone surrogate
    (in a string or a key); with ``numbers``, also a number it could not be sent back as
    (``number_refused``). ``path`` names the value in what is refused. Iterative: linear in the
    document, whatever its shape."""
    pending: list[tuple[Any, int, str]] = [(value, 1, path)]
    while pending:
        item, depth, path = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise JsonRefused(
                    f"{path or 'the document'}: text holds a lone surrogate (not UTF-8)"
                )
            continue
        if numbers and isinstance(item, int | float) and (why := number_refused(item)):
            raise JsonRefused(f"{path or 'the value'}: {why}")
        if not isinstance(item, dict | list):
            continue
        if depth > max_depth:
            raise JsonRefused(f"{path or 'the document'}: nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                if _SURROGATE.search(key):
                    raise JsonRefused(f"{path or 'the document'}: a key holds a lone surrogate")
                pending.append((child, depth + 1, f"{path}.{key}" if path else key))
        else:
            pending.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(item))


# What a stored value is sent back with (orjson): integers of 64 bits, signed or not.
_SMALLEST_INT, _LARGEST_INT = -(2**63), 2**64 - 1


def number_refused(number: int | float) -> str | None:
    """Why a number read from a body (Python's parser takes any integer, NaN and Infinity, and
    reads a number past a double's range as Infinity) cannot be kept and sent back as it came; None
    when it can."""
    if isinstance(number, bool) or (isinstance(number, float) and math.isfinite(number)):
        return None
    if isinstance(number, float):
        return f"{number} is not a JSON number (NaN, Infinity, or past a 64-bit float's range)"
    if _SMALLEST_INT <= number <= _LARGEST_INT:
        return None
    return (
        f"an integer of {number.bit_length()} bits, past the 64 bits a number is kept to here: "
        "send it as a string"
    )


def bounded_value(value: Any) -> Any:
    """A pydantic after-validator for free-form JSON fields: at most MAX_VALUE_DEPTH deep, and only
    numbers that are sent back as they came (a 100-bit integer would otherwise be stored, and fail
    every answer that carries it)."""
    check_json(value, MAX_VALUE_DEPTH, numbers=True)
    return value


def _too_deep(value: Any, max_depth: int) -> bool:
    """Whether a document nests deeper than ``max_depth`` (iterative, no paths built)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        items: Iterable[Any]
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list):
            items = item
        else:
            continue
        if depth > max_depth:
            return True
        pending.extend((child, depth + 1) for child in items if isinstance(child, dict | list))
    return False


def _brackets(raw: bytes | str) -> int:
    if isinstance(raw, str):
        return raw.count("{") + raw.count("[")
    return raw.count(b"{") + raw.count(b"[")


def loads(raw: bytes | str) -> Any:
    """Parse and check a JSON document; JsonRefused (with ValueError's message) when not accepted.

    The hot path (MCP messages) parses with orjson, which refuses lone surrogates itself, and only
    measures the depth; whatever orjson refuses is parsed again by the standard library, so that
    what is refused is refused with a message naming the problem (measured: 1.0 µs instead of 8.3 µs
    for a typical prompts/get message)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # refused, or merely outside orjson (big integers, NaN): the standard library says
    else:
        # A document cannot nest deeper than it has brackets: counting them (in C) spares the walk
        # for every message of ordinary size (0.3 µs instead of 3.1 µs for a prompts/get).
        if _brackets(raw) > MAX_JSON_DEPTH and _too_deep(value, MAX_JSON_DEPTH):
            check_json(value)  # names where
        return value
    try:
        value = json.loads(raw)
    except RecursionError:
        raise JsonRefused(f"the document is nested deeper than {MAX_JSON_DEPTH} levels") from None
    check_json(value)
    return value


MAX_YAML_NODES = 20_000  # scalars, sequences and mappings in one document (a prompt file: hundreds)


@cache
def _loader() -> type[yaml.SafeLoader]:
    """libyaml's parser and loader where the wheel has them (about 30 times faster than pure
    Python)."""
    import yaml

    return cast(type[yaml.SafeLoader], getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_yaml(
    text: str, *, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """One YAML document, read safely and boundedly: its events are scanned first, refusing
    anchors and aliases (an alias repeats a node without copying it in the text: billions of
    values from one line), more than ``max_nodes`` nodes and collections nested deeper than
    ``max_depth`` (the loader builds them recursively), before anything is built. yaml.YAMLError
    (with its problem and mark) when it cannot be read, a number Python would not build (an
    integer of thousands of digits) included."""
    import yaml

    loader, nodes, depth = _loader(), 0, 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _refused("anchors and aliases (&name, *name) are not accepted", event)
        if isinstance(event, yaml.NodeEvent):
            nodes += 1
            if nodes > max_nodes:
                raise _refused(f"the document holds more than {max_nodes:,} values", event)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                raise _refused(f"the document is nested deeper than {max_depth} levels", event)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader, aliases refused above
    except (ValueError, OverflowError) as error:  # int() past its digit limit, a float's range
        raise yaml.YAMLError(f"a value cannot be read: {str(error)[:200]}") from None


def _refused(problem: str, event: yaml.Event) -> yaml.MarkedYAMLError:
    """A refusal read like the parser's own errors: its problem, and where (line and column)."""
    import yaml

    mark = cast(yaml.Mark, event.start_mark)  # libyaml's marks have the same line and column
    return yaml.composer.ComposerError(None, None, problem, mark)


def json_schema(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """``value`` if it is a valid JSON Schema (of the draft it names) that the registry will evaluate
    (``registry.jsonschemas``: every reference inside it, its cost bounded); a ValueError naming the
    problem otherwise. A validator of every input field that holds one."""
    if value is not None:
        from registry import jsonschemas

        jsonschemas.check(value)
    return value
