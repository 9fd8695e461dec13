"""The `agent.heartbeat` event: sent to every watched run that has not ended, so a run's own log tells "agent
alive, run silent" from "agent dead" (no heartbeat for a few intervals). An ended run gets none: its end is told
(run.finished / run.failed), and heartbeats after it would make it look alive; a new launch of the name is a new
watch, and gets them again."""

from __future__ import annotations

import platform
from functools import cache
from importlib import metadata
from typing import Any


@cache
def versions() -> dict[str, str | None]:
    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "trainwarden": version("trainwarden"),
        "python": platform.python_version(),
        "wandb": version("wandb"),
        "nvidia-ml-py": version("nvidia-ml-py"),
    }


def heartbeat_data(*, interval_s: float, gpu: dict[str, Any], run_sources: dict[str, Any], spool: dict[str, Any],
                   runs: int, errors: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """`errors`: the agent's source failures so far (agent.isolation.SourceErrors.heartbeat)."""
    return {
        **(errors or {}),
        "interval_s": interval_s,
        "versions": versions(),
        "gpu": gpu,
        "sources": run_sources,
        "spool": spool,
        "runs_watched": runs,
    }
