"""Validation of every message the server sends against the official schema of its revision.

The schema files (``../shared/mcp-schema/<revision>/schema.json``, or ``REGISTRY_MCP_SCHEMA_DIR``) are
the reference. Without them (a fresh clone), every check runs against the official wire types of the
``mcp-types`` package instead: the revision's own types where the package has them (2025-11-25,
2026-07-28), else the oldest it has (2025-11-25), which every older revision's answer must also fit.
That fallback is weaker in one way only, said where it applies: an older revision's answer is checked
for fields of 2025-11-25, not for fields its own revision did not yet define.
"""

from __future__ import annotations

import importlib
import json
import os
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pydantic

from tests.conftest import ROOT

SCHEMA_DIR = Path(os.environ.get("REGISTRY_MCP_SCHEMA_DIR", ROOT.parent / "shared" / "mcp-schema"))
TYPED_REVISIONS = ("2025-11-25", "2026-07-28")  # the revisions mcp-types carries wire types of


def have_schema_files() -> bool:
    return (SCHEMA_DIR / "2025-11-25" / "schema.json").is_file()


@lru_cache(maxsize=8)
def _types(revision: str) -> ModuleType:
    """The mcp-types wire module a revision is checked against without the schema files."""
    typed = revision if revision in TYPED_REVISIONS else TYPED_REVISIONS[0]
    return importlib.import_module("mcp_types._v" + typed.replace("-", "_"))


@lru_cache(maxsize=256)
def _adapter(revision: str, name: str) -> pydantic.TypeAdapter[Any]:
    kind = getattr(_types(revision), name, None)
    if kind is None:
        raise KeyError(f"{revision} defines no {name} (mcp-types)")
    return pydantic.TypeAdapter(kind)


def _typed_fields(revision: str, name: str) -> set[str]:
    kind = getattr(_types(revision), name)
    return {field.alias or key for key, field in kind.model_fields.items()}


def _typed_names(revision: str) -> set[str]:
    return set(vars(_types(revision)))


def _root(revision: str) -> dict[str, Any]:
    return _load(revision)


@lru_cache(maxsize=8)
def _load(revision: str) -> dict[str, Any]:
    return dict(json.loads((SCHEMA_DIR / revision / "schema.json").read_text()))


def _defs(revision: str) -> dict[str, Any]:
    root = _root(revision)
    return dict(root.get("$defs") or root["definitions"])


def _names(revision: str) -> set[str]:
    return set(_defs(revision)) if have_schema_files() else _typed_names(revision)


@lru_cache(maxsize=128)
def _validator(revision: str, name: str) -> Any:
    root = _root(revision)
    key = "$defs" if "$defs" in root else "definitions"
    if name not in root[key]:
        raise KeyError(f"{revision} defines no {name}")
    schema = {**root, "$ref": f"#/{key}/{name}"}
    cls = jsonschema.validators.validator_for(root)
    return cls(schema)


def validate(revision: str, name: str, instance: Any) -> None:
    if have_schema_files():
        _validator(revision, name).validate(instance)
        return
    # JSON mode and strict: no coercion a schema would not allow ("1" is not an integer)
    _adapter(revision, name).validate_json(json.dumps(instance), strict=True)


def no_unknown_fields(revision: str, name: str, instance: dict[str, Any]) -> None:
    """Stricter than the schema (which allows extra properties): only fields the revision defines."""
    if have_schema_files():
        known = set(_defs(revision)[name].get("properties", {}))
    else:
        known = _typed_fields(revision, name)
    extra = set(instance) - known
    assert not extra, (
        f"{name} at {revision} has fields the revision does not define: {sorted(extra)}"
    )


CONTENT_TYPES = {
    "text": "TextContent", "image": "ImageContent", "audio": "AudioContent",
    "resource": "EmbeddedResource", "resource_link": "ResourceLink",
}  # fmt: skip
RESULT_TYPES = {
    "initialize": "InitializeResult", "ping": "EmptyResult", "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult", "completion/complete": "CompleteResult",
    "logging/setLevel": "EmptyResult", "server/discover": "DiscoverResult",
    "tools/list": "ListToolsResult", "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult", "resources/read": "ReadResourceResult",
}  # fmt: skip


def check_response(revision: str, method: str, message: dict[str, Any]) -> None:
    """A response message: the envelope, the result for ``method``, and no unknown fields."""
    if "error" in message:
        name = (
            "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in _names(revision) else "JSONRPCError"
        )
        validate(revision, name, message)
        return
    name = (
        "JSONRPCResultResponse"
        if "JSONRPCResultResponse" in _names(revision)
        else "JSONRPCResponse"
    )
    validate(revision, name, message)
    result = message["result"]
    result_type = RESULT_TYPES[method]
    if result_type == "EmptyResult":
        assert result == {}
        return
    validate(revision, result_type, result)
    no_unknown_fields(revision, result_type, result)
    if method == "initialize":
        no_unknown_fields(revision, "Implementation", result["serverInfo"])
        no_unknown_fields(revision, "ServerCapabilities", result["capabilities"])
    for prompt in result.get("prompts", []):
        no_unknown_fields(revision, "Prompt", prompt)
        for argument in prompt.get("arguments", []):
            no_unknown_fields(revision, "PromptArgument", argument)
    for prompt_message in result.get("messages", []):
        no_unknown_fields(revision, "PromptMessage", prompt_message)
        content = prompt_message["content"]
        no_unknown_fields(revision, CONTENT_TYPES[content["type"]], content)


def check_notification(revision: str, name: str, message: dict[str, Any]) -> None:
    validate(revision, "JSONRPCNotification", message)
    validate(revision, name, message)
