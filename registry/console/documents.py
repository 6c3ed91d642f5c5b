"""A version as the console's editor shows it: one YAML document (the fields of a prompt file:
title, description, arguments, messages, config, icons), and back, with every problem named at its
place (the YAML's line and column, or the field)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from registry.errors import InvalidInput
from registry.inputs import load_yaml
from registry.prompts.schemas import VersionIn, VersionOut

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


def dump(version: VersionOut) -> str:
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
            {k: v for k, v in a.model_dump().items()
             if v is not None and not (k == "required" and v is False)}
            for a in version.arguments
        ]  # fmt: skip
    messages = []
    for message in version.messages:
        content = message.content
        if content.get("type") == "text" and set(content) == {"type", "text"}:
            messages.append({"role": message.role, "text": content["text"]})
        else:
            messages.append({"role": message.role, "content": content})
    if version.partials:  # the children this version locks: kept unless the person edits them
        document["partials"] = [lock.model_dump() for lock in version.partials]
    document["messages"] = messages  # last, so an uploaded image's message can be appended
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def parse(text: str, *, commit_message: str | None) -> VersionIn:
    """The version the editor's text describes; InvalidInput naming the first problem."""
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
    try:
        return VersionIn.model_validate({**data, "commit_message": commit_message})
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ())) or "document"
        raise InvalidInput(f"{field}: {first.get('msg', 'invalid')}", field=field) from None


def blob_snippet(sha256: str, mime_type: str) -> str:
    kind = "audio" if mime_type.startswith("audio/") else "image"
    return f"  - role: user\n    content: {{type: {kind}, blob: {sha256}, mimeType: {mime_type}}}\n"
