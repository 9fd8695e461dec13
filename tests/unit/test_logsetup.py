"""The JSON log line (pure: a record in, a line out) and the run / event-id context."""

from __future__ import annotations

import json
import logging
import sys
import threading

from trainwarden.core.logcontext import ContextFilter, log_context
from trainwarden.core.redact import MASK

from trainwarden.logsetup import JsonFormatter, library_level, log_format, log_level

SECRET = "xoxb-1111111111-2222222222-abcdefghijklmnopqrstuvwx"


def line(record: logging.LogRecord) -> dict[str, object]:
    ContextFilter().filter(record)
    text = JsonFormatter("worker").format(record)
    assert "\n" not in text  # one object per line, a traceback included
    parsed: dict[str, object] = json.loads(text)
    return parsed


def record(msg: str, *args: object, exc_info: object = None, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("trainwarden.test", logging.ERROR, __file__, 1, msg, args, exc_info)  # type: ignore[arg-type]
    rec.__dict__.update(extra)
    return rec


def test_a_record_in_the_context_of_a_run_and_event_carries_both() -> None:
    with log_context(run="exp-1", event_id="01ABC"):
        with log_context(event_id="01DEF"):  # an inner event; the run stays
            inner = line(record("stopping %s", "exp-1"))
        outer = line(record("done"))
    after = line(record("idle"))
    assert (inner["run"], inner["event_id"], inner["message"]) == ("exp-1", "01DEF", "stopping exp-1")
    assert (outer["run"], outer["event_id"]) == ("exp-1", "01ABC")
    assert (after["run"], after["event_id"]) == (None, None)
    assert (inner["daemon"], inner["level"], inner["logger"]) == ("worker", "ERROR", "trainwarden.test")


def test_extra_wins_over_the_context_and_another_thread_has_its_own() -> None:
    seen: list[object] = []
    with log_context(run="exp-1"):
        assert line(record("x", run="exp-2"))["run"] == "exp-2"
        thread = threading.Thread(target=lambda: seen.append(line(record("y"))["run"]))
        thread.start()
        thread.join()
    assert seen == [None]


def test_the_exception_and_every_field_are_masked() -> None:
    try:
        raise RuntimeError(f"Slack said no to token={SECRET}")
    except RuntimeError:
        out = line(record("posting with %s failed", SECRET, exc_info=sys.exc_info(), run=f"run-{SECRET}"))
    text = json.dumps(out)
    assert SECRET not in text
    assert out["message"] == f"posting with {MASK} failed"
    assert isinstance(out["exception"], str) and out["exception"].startswith("Traceback (most recent call last)")
    assert "RuntimeError: Slack said no to token=" in out["exception"]
    assert out["run"] == f"run-{MASK}"


def test_levels_and_formats_in_any_case() -> None:
    assert [log_level(v) for v in ("info", "Info", " WARNING ", "debug")] == ["INFO", "INFO", "WARNING", "DEBUG"]
    assert [log_format(v) for v in ("JSON", "Text")] == ["json", "text"]
    assert library_level("INFO") == "WARNING" and library_level("DEBUG") == "DEBUG"
