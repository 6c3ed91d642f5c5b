"""The checks of answers hold without the schema files: against the official types of mcp-types."""

from __future__ import annotations

from typing import Any

import jsonschema
import pydantic
import pytest

from tests.mcp import schema

GOOD: dict[str, Any] = {
    "jsonrpc": "2.0", "id": 1,
    "result": {
        "description": "d",
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
    },
}  # fmt: skip
FAULTS = (AssertionError, pydantic.ValidationError, jsonschema.ValidationError)


@pytest.fixture(params=["schema files", "mcp-types"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "mcp-types":
        monkeypatch.setattr(schema, "have_schema_files", lambda: False)
    elif not schema.have_schema_files():
        pytest.skip("the schema files are not beside this checkout (the other mode runs)")
    return str(request.param)


def _with(**result: Any) -> dict[str, Any]:
    return {**GOOD, "result": {**GOOD["result"], **result}}


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-06-18", "2025-11-25"])
def test_a_good_answer_passes_and_each_fault_is_caught(mode: str, revision: str) -> None:
    schema.check_response(revision, "prompts/get", GOOD)
    faults = [
        _with(messages=[{"role": "robot", "content": {"type": "text", "text": "hi"}}]),
        _with(messages=[{"role": "user", "content": {"type": "text", "text": 1}}]),
        {**GOOD, "result": {"description": "no messages"}},
        _with(surprise=True),  # a field no revision defines
        _with(messages=[{"role": "user", "content": {"type": "text", "text": "x", "y": 1}}]),
    ]
    for fault in faults:
        with pytest.raises(FAULTS):
            schema.check_response(revision, "prompts/get", fault)


def test_the_2026_revision_has_its_own_types(mode: str) -> None:
    """2026-07-28 requires resultType on a result: its own types say so, not 2025-11-25's."""
    with pytest.raises(FAULTS):
        schema.check_response("2026-07-28", "prompts/get", GOOD)
    schema.check_response("2026-07-28", "prompts/get", _with(resultType="complete"))
