"""A version as the console's editor shows it: one YAML document (the fields of a prompt file:
title, description, arguments, messages, config, icons, and the prompt's test cases), and back, with
every problem named at its place (the YAML's line and column, or the field)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar

import yaml
from pydantic import TypeAdapter, ValidationError

from registry.content.kinds import KINDS
from registry.errors import InvalidInput
from registry.inputs import load_yaml
from registry.prompts.schemas import VersionIn, VersionOut
from registry.templates.mustache import TemplateError
from registry.templates.mustache import parse as parse_template
from registry.testcases import TestCase, TestCases

T = TypeVar("T")
_VERSION: TypeAdapter[VersionIn] = TypeAdapter(VersionIn)
_TESTS: TypeAdapter[list[TestCase]] = TypeAdapter(TestCases)

TEMPLATE = """\
title: A short title
description: What this prompt is for
arguments:
  - name: topic
    description: What to write about
    required: true
messages:
  - role: user
    text: |
      Write three sentences about {{topic}}.
"""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # Lists indented under their key ("messages:\n  - role: user"), as people write them
        # and as an uploaded image's message is appended.
        super().increase_indent(flow, False)


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_Dumper.add_representer(str, _text)


def dump(version: VersionOut, tests: list[TestCase] | None = None) -> str:
    document: dict[str, Any] = {}
    for key in ("title", "description"):
        if getattr(version, key):
            document[key] = getattr(version, key)
    if version.icons:
        document["icons"] = version.icons
    if version.config:
        document["config"] = version.config
    if version.arguments:
        document["arguments"] = [
            {
                k: v
                for k, v in a.model_dump().items()
                if v is not None and not (k == "required" and v is False)
            }
            for a in version.arguments
        ]
    messages = []
    for message in version.messages:
        content = message.content
        if content.get("type") == "text" and set(content) == {"type", "text"}:
            messages.append({"role": message.role, "text": content["text"]})
        else:
            messages.append({"role": message.role, "content": content})
    if version.partials:  # the children this version locks: kept unless the person edits them
        document["partials"] = [lock.model_dump() for lock in version.partials]
    if tests:  # the prompt's, not the version's: saved with the prompt
        document["tests"] = [
            t.model_dump(mode="json", by_alias=True, exclude_defaults=True) for t in tests
        ]
    document["messages"] = messages  # last, so an uploaded image's message can be appended
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


@dataclass(frozen=True)
class Problem:
    """One problem of the editor's document, where the person sees it: the field as written in the
    editor (``messages[0].text``) and the editor's line and column when known."""

    message: str
    field: str | None = None
    line: int | None = None
    column: int | None = None

    def shown(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


def problems(text: str) -> list[Problem]:
    """Every problem the document itself has (its YAML, each field, each message's template), at
    the editor's lines; empty when it is a version the registry can check further."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error)
        if mark is None:
            return [Problem(f"invalid YAML: {problem}")]
        return [Problem(f"invalid YAML: {problem}", None, mark.line + 1, mark.column + 1)]
    if not isinstance(data, dict):
        return [Problem("the document must be a mapping of fields (title, arguments, messages…)")]
    found = []
    tests = data.pop("tests", None)
    parts: list[tuple[TypeAdapter[Any], Any, tuple[str, ...]]] = [
        (_VERSION, {**data, "commit_message": None}, ())
    ]
    if tests is not None:
        parts.append((_TESTS, tests, ("tests",)))
    for adapter, value, prefix in parts:
        try:
            adapter.validate_python(value)
        except ValidationError as error:
            for each in error.errors():
                field = _field((*prefix, *each.get("loc", ())))
                found.append(Problem(f"{field}: {each.get('msg', 'invalid')}", field))
    for index, message in enumerate(data.get("messages") or []):
        for key, source in _templates(message):
            try:
                parse_template(source)
            except TemplateError as error:
                field = f"messages[{index}].{key}"
                line, column = at_editor(text, index, key, error.line, error.column)
                why = error.message.rsplit(" at line ", 1)[0]
                found.append(Problem(f"{field}: {why}", field, line, column))
    return found


def _field(loc: Any) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "document"


def _templates(message: Any) -> list[tuple[str, str]]:
    """(the key path as written, the template) of one message of the document."""
    if not isinstance(message, dict):
        return []
    if isinstance(message.get("text"), str):
        return [("text", message["text"])]
    content = message.get("content")
    if not isinstance(content, dict) or content.get("type") not in KINDS:
        return []
    source = KINDS[content["type"]].template(content)
    return [(f"content.{source[0]}", source[1])] if source and isinstance(source[1], str) else []


def at_editor(text: str, index: int, key: str, line: int, column: int) -> tuple[int, int]:
    """The editor's line and column of a template's ``line`` and ``column`` (1-based), for the
    template at ``key`` of message ``index``; the template's own place when it cannot be found."""
    steps: list[str | int] = ["messages", index, *key.split(".")]
    try:  # called on a document load_yaml read: no aliases, a bounded number of nodes
        node: Any = yaml.compose(text, Loader=yaml.SafeLoader)
        for step in steps:
            node = _child(node, step)
    except (yaml.YAMLError, LookupError, TypeError):
        return line, column
    start = node.start_mark
    if node.style in ("|", ">"):  # a block: its lines start on the line below, indented
        first = text.splitlines()[start.line + 1] if start.line + 1 < len(text.splitlines()) else ""
        indent = len(first) - len(first.lstrip(" "))
        return start.line + 1 + line, indent + column
    quoted = 1 if node.style in ("'", '"') else 0
    if line == 1:
        return start.line + 1, start.column + quoted + column
    return start.line + line, column


def _child(node: Any, step: str | int) -> Any:
    if isinstance(step, int):
        if not isinstance(node, yaml.SequenceNode):
            raise LookupError(step)
        return node.value[step]
    if not isinstance(node, yaml.MappingNode):
        raise LookupError(step)
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == step:
            return value
    raise LookupError(step)


_TEMPLATE_FIELD = re.compile(r"^messages\[(\d+)\]\.content\.(\w+)$")


def as_written(text: str, field: str, line: int | None, column: int | None) -> Problem | None:
    """A template problem the registry found (at ``messages[i].content.text``, a template's line
    and column) as the editor shows it: the field as written and the editor's line and column."""
    found = _TEMPLATE_FIELD.match(field)
    if found is None or line is None or column is None:
        return None
    index = int(found.group(1))
    try:
        message = load_yaml(text)["messages"][index]
    except (yaml.YAMLError, LookupError, TypeError):
        return None
    key = "text" if isinstance(message, dict) and "text" in message else f"content.{found.group(2)}"
    where = at_editor(text, index, key, line, column)
    return Problem("", f"messages[{index}].{key}", *where)


@dataclass(frozen=True)
class Edited:
    """What the editor's text describes: a version, and the prompt's test cases (None: the
    document does not mention them, and they stay as they are)."""

    version: VersionIn
    tests: list[TestCase] | None


def parse(text: str, *, commit_message: str | None) -> Edited:
    """The version (and test cases) the editor's text describes; InvalidInput naming the first
    problem."""
    try:
        data = load_yaml(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = {"line": mark.line + 1, "column": mark.column + 1} if mark else {}
        raise InvalidInput(
            f"invalid YAML: {getattr(error, 'problem', None) or error}", **where
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput("the document must be a mapping of fields (title, arguments, messages…)")
    if "commit_message" in data or "labels" in data:
        raise InvalidInput(
            "give the commit message below the editor; move labels on the prompt's page"
        )
    tests = data.pop("tests", None)
    checked = None if tests is None else _checked(_TESTS, tests, ("tests",))
    version = _checked(_VERSION, {**data, "commit_message": commit_message}, ())
    return Edited(version, checked)


def _checked(adapter: TypeAdapter[T], value: Any, prefix: tuple[str, ...]) -> T:
    """``value`` validated; InvalidInput naming the first problem's field."""
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in (*prefix, *first.get("loc", ()))) or "document"
        raise InvalidInput(f"{field}: {first.get('msg', 'invalid')}", field=field) from None


def blob_snippet(sha256: str, mime_type: str) -> str:
    kind = "audio" if mime_type.startswith("audio/") else "image"
    return f"  - role: user\n    content: {{type: {kind}, blob: {sha256}, mimeType: {mime_type}}}\n"
