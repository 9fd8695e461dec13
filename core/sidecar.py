"""The sidecar metrics file: what the training process, the launch and the agent agree on (stdlib only).

A training process that calls `trainwarden.log(step=..., **metrics)` (or runs one of the callbacks in
`trainwarden.sdk.integrations`) appends one JSON object per line to its run's sidecar file:
`{"step": 100, "loss": 2.3, "lr": 0.0003}`; NaN and Infinity are written as Python's JSON writes
them (`NaN`, `Infinity`), which the agent reads as the values they are. `trainwarden launch` puts
the file beside the run's log (`<log>.metrics.jsonl`, as the exit code goes to `<log>.exit`) and
tells the process where through `TRAINWARDEN_METRICS`; the agent follows the same path.

This module is a leaf open to every package (like `trainwarden.core.errors`): the writer runs inside
training processes, where importing the event store (redis) would cost time for nothing.
"""

from __future__ import annotations

METRICS_ENV = "TRAINWARDEN_METRICS"  # the sidecar path a launch gives the training process
METRICS_SUFFIX = ".metrics.jsonl"


def metrics_path(log: str) -> str:
    """The sidecar file of the run whose training log is `log`."""
    return f"{log}{METRICS_SUFFIX}"
