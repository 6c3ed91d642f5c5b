"""Logging set-up: short snake_case events with structured fields, as text or one JSON object a line.

Call sites log ``logger.info("event_name", extra={"fields": {...}})``. Secrets, prompt bodies and
argument values are never logged.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any


def logger_name(record: logging.LogRecord) -> str:
    """The name a line shows: uvicorn logs everything about the server (its start, its workers) as
    ``uvicorn.error``, which reads as an error at every level; below ERROR it is ``uvicorn``."""
    if record.name == "uvicorn.error" and record.levelno < logging.ERROR:
        return "uvicorn"
    return record.name


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": logger_name(record),
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        shown = logging.makeLogRecord({**record.__dict__, "name": logger_name(record)})
        line = super().format(shown)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


def logging_config(level: str, json_logs: bool) -> dict[str, Any]:
    """A dictConfig for the registry and uvicorn alike."""
    formatter: dict[str, Any] = (
        {"()": JsonFormatter}
        if json_logs
        else {"()": TextFormatter, "format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "registry": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        },
    }


def configure_logging(level: str, json_logs: bool) -> None:
    import logging.config

    logging.config.dictConfig(logging_config(level, json_logs))
