"""The JSON Schema of `trainwarden policy backtest --json`: one run (`--run`, `--log`, `--wandb-dir`)
or a scorecard (`--corpus`). Written by hand next to the code that fills it (policy_commands.py,
scorecard.py); a test checks real output of every form against the committed copy."""

from __future__ import annotations

from typing import Any

from trainwarden.tools.corpus import DEV, TEST
from trainwarden.tools.scorecard import CRITERIA

Schema = dict[str, Any]

_ANY_NUMBER: Schema = {"type": ["number", "null"]}
_NUMBER: Schema = {"type": "number", "minimum": 0}
_COUNT: Schema = {"type": "integer", "minimum": 0}
_TEXT: Schema = {"type": "string"}
_TOTAL_COUNTS = ("runs", "doomed", "stopped_in_time", "stopped_late", "healthy", "healthy_stopped",
                 "healthy_confirm_stops", "healthy_anomalies",
                 "healthy_critical", "faults", "faults_named", "no_metrics", "episodes", "messages",
                 "episodes_over_one", "failing")  # fmt: skip


def _object(properties: dict[str, Schema], *, optional: tuple[str, ...] = ()) -> Schema:
    required = sorted(set(properties) - set(optional))
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


MOMENT = _object(
    {
        "after_s": {**_NUMBER, "description": "seconds after the first event (a log: metric lines --interval apart)"},
        "step": {"description": "the training step, or null"},
        "epoch": {"description": "the latest epoch a metric said, or null"},
        "line": {"type": "integer", "minimum": 1, "description": "the log line that caused it (scorecard STOPs)"},
        "rule": {"type": ["string", "null"]},
        "what": {**_TEXT, "description": "a decision (STOP, WAIT, CONTINUE) or a firing's severity"},
        "reason": _TEXT,
        "confirm_s": {**_NUMBER, "description": "a confirm-STOP: the seconds it waits for a person (Keep running)"},
    },
    optional=("line", "confirm_s"),
)
POLICY = _object({"name": _TEXT, "hash": _TEXT})
SAVED = _object({"steps": {"type": ["integer", "null"]}, "minutes": _NUMBER, "gpu_hours": _NUMBER, "gpus": _NUMBER})
RUN_SCORE = _object(
    {
        "file": _TEXT,
        "label": {"type": "string", "pattern": "^(STOP|NOSTOP|ANOMALY:[a-z0-9_-]+)$"},
        "part": {"enum": [DEV, TEST], "description": "the manifest's part: dev (tuned on) or test (held out)"},
        "metrics": _COUNT,
        "stop": {"anyOf": [MOMENT, {"type": "null"}], "description": "the first STOP decision"},
        "stop_by": {"type": ["string", "null"], "description": "the manifest's useful stop point (STOP runs)"},
        "in_time": {"type": ["boolean", "null"], "description": "STOP runs: stopped no later than stop_by"},
        "anomalies": _COUNT,
        "critical": _COUNT,
        "fault_named": {"type": ["boolean", "null"], "description": "ANOMALY runs: a rule or message names it"},
        "episodes": _COUNT,
        "messages": {**_COUNT, "description": "messages the bot would post for the episodes (not STOPs, RESOLVED)"},
        "worst_episode": {**_COUNT, "description": "the most messages one episode got"},
        "gpu_hours_saved": {"type": ["number", "null"], "minimum": 0},
        "problems": {"type": "array", "items": _TEXT, "description": "the criteria the run fails; empty when right"},
        "failed": {"type": "array", "items": {"enum": list(CRITERIA)}, "description": "the same, as criteria keys"},
    }
)
TOTALS = _object(
    {
        **{name: _COUNT for name in _TOTAL_COUNTS},
        "gpu_hours_saved": _NUMBER,
        "false_alarms_per_healthy_run": _NUMBER,
        "meets_bar": {"type": "boolean", "description": "every run judged right (the exit status is 0)"},
    }
)
SINGLE = {
    "policy": POLICY,
    "source": _TEXT,
    "events": _COUNT,
    "metrics": _COUNT,
    "first_step": _ANY_NUMBER,
    "last_step": _ANY_NUMBER,
    "span_s": _NUMBER,
    "firings": {"type": "array", "items": MOMENT, "description": "anomalies the rules would have opened"},
    "timeline": {"type": "array", "items": MOMENT, "description": "the policy's decisions"},
    "stop": {"anyOf": [MOMENT, {"type": "null"}]},
    "saved": {"anyOf": [SAVED, {"type": "null"}], "description": "from the STOP to the run's end"},
}
PARTS = {**_object({DEV: TOTALS, TEST: TOTALS}), "description": "the same totals for each part of the corpus"}
CORPUS = {"policy": POLICY, "corpus": _TEXT, "runs": {"type": "array", "items": RUN_SCORE}, "totals": TOTALS,
          "parts": PARTS}  # fmt: skip


def backtest_schema() -> Schema:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "trainwarden policy backtest --json",
        "description": "One run's backtest (--run, --log, --wandb-dir) or a corpus scorecard (--corpus).",
        "type": "object",
        "properties": {**SINGLE, **CORPUS},
        "additionalProperties": False,
        "oneOf": [
            {"required": sorted(SINGLE)},
            {"required": sorted(CORPUS)},
        ],
    }
