"""The one evaluator of the JSON Schemas tenants write (a test case's ``json_schema``, a version's
``response_format``): nothing a schema says may leave the document or cost more than a bound.

- A reference (``$ref``, ``$dynamicRef``, ``$recursiveRef``) must point inside the document (``#…``);
  any other is refused when the schema is written, and, if one is met anyway, resolution is refused
  by a registry that retrieves nothing (no network, no file).
- What a schema costs is bounded when it is written: at most ``MAX_REFERENCES`` references, and the
  schema with every reference written out in place (a reference back to a schema it is inside counted
  once) at most ``MAX_EXPANDED`` subschemas, so ``allOf`` of two references to the level below,
  nested, is refused at once instead of doubling the work at every level.
- A validation counts the keywords it evaluates and stops at ``MAX_STEPS`` (recursive schemas cost
  what the instance's depth makes them cost): ``SchemaTooCostly``, said in words by the caller.

Regular expressions (``pattern``, ``patternProperties``) run on RE2 (linear time), not Python's
backtracking ``re``. Every draft the library knows is served, as the schema's ``$schema`` names it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import jsonschema
import jsonschema.validators
import re2
import referencing
import referencing.exceptions
from jsonschema.protocols import Validator

MAX_REFERENCES = 256  # references in one schema
MAX_EXPANDED = 10_000  # subschemas of a schema with its references written out in place
MAX_STEPS = 10_000  # keywords evaluated by one validation, or by every validation of one budget()
_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.max_mem = 8 << 20


class SchemaRefused(ValueError):
    """A schema the registry will not evaluate, and why (a reference leaving the document, a cost
    over the bounds)."""


class SchemaTooCostly(SchemaRefused):
    """A validation stopped at ``MAX_STEPS``."""


def _refuse_retrieval(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


# A registry that retrieves nothing: a reference the document does not hold is unresolvable.
_NO_RETRIEVAL: referencing.Registry[Any] = referencing.Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
_steps: contextvars.ContextVar[list[int]] = contextvars.ContextVar("jsonschema_steps")


def check(schema: dict[str, Any]) -> None:
    """``schema`` is a valid JSON Schema of its draft, every reference local, within the bounds: a
    SchemaRefused naming the problem otherwise."""
    references = list(_references(schema, ""))
    for where, key, target in references:
        if not isinstance(target, str) or not target.startswith("#"):
            raise SchemaRefused(
                f"the {key} {str(target)[:200]!r} at {where or 'the top level'} leaves the document: "
                "only references inside the schema (starting with '#') are resolved"
            )
    if len(references) > MAX_REFERENCES:
        raise SchemaRefused(
            f"the schema holds {len(references):,} references; the most is {MAX_REFERENCES}"
        )
    expanded = _Expansion(schema).size(schema)
    if expanded > MAX_EXPANDED:
        raise SchemaRefused(
            f"the schema is too costly to evaluate: with its references written out in place it "
            f"holds more than {MAX_EXPANDED:,} subschemas"
        )
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise SchemaRefused(f"not a valid JSON Schema (at {where}): {error.message}") from None
    except RecursionError:
        raise SchemaRefused("the schema is nested too deeply") from None


def errors(
    schema: dict[str, Any], instance: Any, limit: int = 5
) -> list[jsonschema.ValidationError]:
    """The first ``limit`` errors of ``instance`` against ``schema`` (in path order; none: valid).
    SchemaRefused when the schema cannot be evaluated: a reference it does not hold, more than
    ``MAX_STEPS`` keywords (SchemaTooCostly), nesting deeper than the interpreter allows."""
    check(schema)
    validator = _validator_class(schema)(schema, registry=_NO_RETRIEVAL)
    token = _steps.set([0]) if _steps.get(None) is None else None
    try:
        found = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    except referencing.exceptions.Unresolvable as error:
        missing = str(getattr(error, "ref", error))[:200]
        raise SchemaRefused(f"the reference {missing!r} is not in the schema") from None
    except RecursionError:
        raise SchemaRefused("the schema and the document are nested too deeply to check") from None
    finally:
        if token is not None:
            _steps.reset(token)
    return found[:limit]


@contextlib.contextmanager
def budget() -> Iterator[None]:
    """Every validation inside shares one budget of ``MAX_STEPS`` (a run of many test cases costs
    what one may)."""
    token = _steps.set([0])
    try:
        yield
    finally:
        _steps.reset(token)


def _references(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _REFERENCE_KEYS:
                yield where, key, value
            else:
                yield from _references(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _references(item, f"{where}/{index}")


class _Expansion:
    """The number of subschemas of a schema with every local reference written out in place, each
    target counted once per path (memoised), a reference back into the path counted as one."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.sizes: dict[int, int] = {}
        self.open: set[int] = set()

    def size(self, node: Any) -> int:
        key = id(node)
        if key in self.sizes:
            return self.sizes[key]
        if key in self.open:
            return 1
        self.open.add(key)
        total = 1
        children: list[Any] = []
        if isinstance(node, dict):
            for name, value in node.items():
                target = self._target(value) if name in _REFERENCE_KEYS else None
                children.append(target if target is not None else value)
        elif isinstance(node, list):
            children = node
        for child in children:
            if isinstance(child, dict | list):
                total = min(total + self.size(child), MAX_EXPANDED + 1)
        self.open.discard(key)
        self.sizes[key] = total
        return total

    def _target(self, reference: Any) -> Any:
        """What a ``#/json/pointer`` reference names in the root (None: not a pointer, or absent)."""
        if not isinstance(reference, str) or not reference.startswith("#/"):
            return self.root if reference == "#" else None
        node: Any = self.root
        for part in reference[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node


def _pattern(pattern: str) -> Any:
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error:
        raise SchemaRefused(f"the pattern {pattern[:200]!r} is not one RE2 accepts") from None


def _re2_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if isinstance(instance, str) and not _pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance[:100]!r} does not match {pattern!r}")


def _re2_pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Any:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        compiled = _pattern(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _counted(keyword: Any) -> Any:
    def evaluate(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        steps = _steps.get(None)
        if steps is not None and (steps.__setitem__(0, steps[0] + 1) or steps[0] > MAX_STEPS):
            raise SchemaTooCostly(
                f"checking the document against the schema takes more than {MAX_STEPS:,} steps"
            )
        return keyword(validator, value, instance, schema) or ()

    return evaluate


_CLASSES: dict[type[Any], type[Validator]] = {}


def _validator_class(schema: dict[str, Any]) -> type[Validator]:
    """The schema's draft's validator, its keywords counted and its patterns run by RE2."""
    base = jsonschema.validators.validator_for(schema)
    found = _CLASSES.get(base)
    if found is None:
        keywords = dict(base.VALIDATORS)
        if "pattern" in keywords:
            keywords["pattern"] = _re2_pattern
        if "patternProperties" in keywords:
            keywords["patternProperties"] = _re2_pattern_properties
        counted = {name: _counted(function) for name, function in keywords.items()}
        found = jsonschema.validators.extend(base, counted)  # type: ignore[no-untyped-call]
        _CLASSES[base] = found
    return found
