"""uvicorn's lines about the server read as what they are (issue 67: INFO lines showed as
``uvicorn.error``)."""

from __future__ import annotations

import json
import logging

from registry.logs import JsonFormatter, TextFormatter


def _record(level: int) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", level, __file__, 1, "Started server process [%d]",
                             (42,), None)  # fmt: skip


def test_uvicorns_lines_below_error_are_not_named_error() -> None:
    text = TextFormatter("%(levelname)s %(name)s %(message)s")
    assert text.format(_record(logging.INFO)) == "INFO uvicorn Started server process [42]"
    assert text.format(_record(logging.ERROR)).startswith("ERROR uvicorn.error ")
    lines = JsonFormatter()
    assert json.loads(lines.format(_record(logging.INFO)))["logger"] == "uvicorn"
    assert json.loads(lines.format(_record(logging.ERROR)))["logger"] == "uvicorn.error"
