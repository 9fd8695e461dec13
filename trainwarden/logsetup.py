"""How a trainwarden process logs: `--log-level` and `--log-format text|json` (or their env vars).

`text` is one human line per record. `json` is one JSON object per line, for the log pipelines
operators already run (journald, Loki, Elasticsearch, `jq`): `time` (ISO 8601, UTC), `level`,
`daemon` (the subcommand: agent, dispatcher, worker, bot, up, ...), `run` and `event_id` (what the
daemon was handling, from core/logcontext.py; null when it was handling no run or event),
`logger`, `message`, and `exception` when the record has one. Secrets are masked in both formats
(core/redact.py): the message and the traceback, as in the text format.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
from typing import Any

from trainwarden.core.logcontext import ContextFilter
from trainwarden.core.redact import MaskingFilter, redact_text

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")
LEVEL_ENV = "TRAINWARDEN_LOG_LEVEL"
FORMAT_ENV = "TRAINWARDEN_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
CHATTY = ("rq", "asyncssh")  # libraries whose INFO lines are per job / per connection: see library_level


def log_level(text: str) -> str:
    """argparse type: a level in any case (`info`, `Info`), as its upper-case name."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a log level: use one of {', '.join(LOG_LEVELS)} (any case; also ${LEVEL_ENV})"
        )
    return level


def log_format(text: str) -> str:
    """argparse type: `text` or `json`, in any case."""
    fmt = text.strip().lower()
    if fmt not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log format: use text or json (also ${FORMAT_ENV})")
    return fmt


def default_level() -> str:
    return os.environ.get(LEVEL_ENV) or "INFO"


def default_format() -> str:
    return os.environ.get(FORMAT_ENV) or "text"


def library_level(level: str) -> str:
    """RQ's and asyncssh's level: RQ logs ~4 INFO lines per job (thousands an hour), asyncssh each connection,
    channel and remote command (~25 a preflight, a launch's shell snippet), so INFO is WARNING for them."""
    return "WARNING" if level == "INFO" else level


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback's newlines are escaped inside `exception`)."""

    def __init__(self, daemon: str) -> None:
        super().__init__()
        self.daemon = daemon

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        out: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "daemon": self.daemon,
            "run": _masked(getattr(record, "run", None)),
            "event_id": _masked(getattr(record, "event_id", None)),
            "logger": record.name,
            "message": redact_text(record.getMessage()),  # masked here too: a handler may lack the MaskingFilter
        }
        exc_text = record.exc_text or (self.formatException(record.exc_info) if record.exc_info else None)
        if exc_text:
            out["exception"] = redact_text(exc_text)
        if record.stack_info:
            out["stack"] = redact_text(self.formatStack(record.stack_info))
        return json.dumps(out, ensure_ascii=False, default=str)


def json_line(daemon: str, message: str, *, logger: str, level: int = logging.INFO) -> str:
    """One JSON log line written outside logging (`up`'s line at the head of a daemon's log file)."""
    record = logging.makeLogRecord({"name": logger, "levelno": level, "levelname": logging.getLevelName(level),
                                    "msg": message})  # fmt: skip
    return JsonFormatter(daemon).format(record)


def _masked(value: object) -> str | None:
    return None if value is None else redact_text(str(value))


def configure(*, level: str, fmt: str, daemon: str) -> None:
    """Set up the root logger once per process: stderr, the format, masking, and the run/event context."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(daemon) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])  # a no-op where the root logger has handlers already
    for chatty in CHATTY:
        logging.getLogger(chatty).setLevel(library_level(level))
    for each in logging.getLogger().handlers:
        for kind in (ContextFilter, MaskingFilter):  # MaskingFilter: daemon logs never hold a secret, tracebacks too
            if not any(isinstance(f, kind) for f in each.filters):
                each.addFilter(kind())
