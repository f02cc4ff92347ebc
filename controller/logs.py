"""How the services log: readable lines, or one JSON object per line for a log pipeline.

``--log-format json`` on ``flowlane controller``, ``api`` and ``up`` gives
every record as ``{"time", "level", "logger", "message"}`` (plus
``"exception"`` with its traceback), uvicorn's records included, so Loki,
Elasticsearch or journald's JSON export can index them without parsing.
"""

from __future__ import annotations

import datetime
import json
import logging
from enum import StrEnum
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogFormat(StrEnum):
    text = "text"
    json = "json"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format is LogFormat.json else logging.Formatter(TEXT_FORMAT)


def setup_logging(level: str, log_format: LogFormat) -> None:
    """The root logger to stderr in ``log_format``; replaces any handler set before."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def uvicorn_log_config(level: str, log_format: LogFormat, access_log: bool) -> dict[str, Any]:
    """uvicorn's ``log_config``: its loggers in our format (its default is its own)."""
    factory = (
        {"()": "controller.logs.JsonFormatter"}
        if log_format is LogFormat.json
        else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"flowlane": factory},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "flowlane",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            "uvicorn": {"level": level.upper()},
            "uvicorn.access": {"level": "INFO" if access_log else "WARNING"},
        },
    }
