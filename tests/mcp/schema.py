"""Validation of every message the server sends against the official schema of its revision."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from tests.conftest import ROOT, unavailable

SCHEMA_DIR = Path(os.environ.get("REGISTRY_MCP_SCHEMA_DIR", ROOT.parent / "shared" / "mcp-schema"))


def require_schemas() -> None:
    if (SCHEMA_DIR / "2025-11-25" / "schema.json").is_file():
        return
    unavailable(f"MCP schemas not found in {SCHEMA_DIR} (set REGISTRY_MCP_SCHEMA_DIR)")


def _root(revision: str) -> dict[str, Any]:
    require_schemas()  # every reading of a schema goes through here: skipped (or failed) first
    return _load(revision)


@lru_cache(maxsize=8)
def _load(revision: str) -> dict[str, Any]:
    return dict(json.loads((SCHEMA_DIR / revision / "schema.json").read_text()))


def _defs(revision: str) -> dict[str, Any]:
    root = _root(revision)
    return dict(root.get("$defs") or root["definitions"])


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
    require_schemas()
    _validator(revision, name).validate(instance)


def no_unknown_fields(revision: str, name: str, instance: dict[str, Any]) -> None:
    """Stricter than the schema (which allows extra properties): only fields the revision defines."""
    require_schemas()
    known = set(_defs(revision)[name].get("properties", {}))
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
            "JSONRPCErrorResponse" if "JSONRPCErrorResponse" in _defs(revision) else "JSONRPCError"
        )
        validate(revision, name, message)
        return
    name = (
        "JSONRPCResultResponse" if "JSONRPCResultResponse" in _defs(revision) else "JSONRPCResponse"
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
