"""A run's final metrics from W&B (the procedure's Step 6 `wandb pull`), behind one small interface.

`collect` asks a `FinalMetrics` source for each launch that names a W&B run; the metrics the log gave
stay the fallback. The W&B public API needs network access and WANDB_API_KEY: when either is missing
the source raises `WandbUnreachable` with the cause, and the entry says so. The other source, the run
files a local `wandb/` directory holds, is trainwarden/wandb_files.py (it uses the agent's reader).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from trainwarden.remote.errors import WandbUnreachable

NEEDS = "needs network and WANDB_API_KEY"


class FinalMetrics(Protocol):
    name: str  # what the entry's metrics_source says when these metrics are used

    def final(self, wandb: dict[str, Any]) -> dict[str, float | int]:
        """The run's final metrics (`wandb`: the launch's project, group, run_name, entity)."""
        ...


def numeric(values: dict[str, Any]) -> dict[str, float | int]:
    return {k: v for k, v in values.items() if not k.startswith("_") and type(v) in (int, float)
            and not (type(v) is float and math.isnan(v))}  # fmt: skip


class WandbApi:
    """The W&B public API: the run found by its display name in its project, its summary (else the
    last row of `scan_history`)."""

    name = "wandb"

    def __init__(self, *, api_key: str | None, base_url: str | None = None, timeout_s: float = 10.0) -> None:
        self.api_key, self.base_url, self.timeout_s = api_key, base_url, timeout_s
        self._api: Any = None
        self._failed: WandbUnreachable | None = None  # W&B did not answer once: not asked again for every launch

    def _client(self) -> Any:
        if self._failed is not None:
            raise self._failed
        try:
            return self._connect()
        except WandbUnreachable as exc:
            self._failed = exc
            raise

    def _connect(self) -> Any:
        if self._api is None:
            if not self.api_key:
                raise WandbUnreachable("WANDB_API_KEY is not set")
            try:
                import wandb
            except ImportError as exc:
                msg = f"the wandb package is not installed ({exc}): pip install 'trainwarden[wandb]'"
                raise WandbUnreachable(msg) from None
            overrides = {"base_url": self.base_url} if self.base_url else {}
            try:
                self._api = wandb.Api(overrides=overrides, api_key=self.api_key, timeout=int(self.timeout_s))
            except Exception as exc:  # wandb raises its own CommError/UsageError, and requests' errors
                raise WandbUnreachable(f"{type(exc).__name__}: {exc}") from None
        return self._api

    def final(self, wandb: dict[str, Any]) -> dict[str, float | int]:
        api = self._client()
        project, name = wandb.get("project"), wandb.get("run_name")
        if not project or not name:
            raise WandbUnreachable("the launch recorded no W&B project and run name")
        path = f"{wandb['entity']}/{project}" if wandb.get("entity") else str(project)
        try:
            found = list(api.runs(path, filters={"display_name": name}))
            if not found:
                raise WandbUnreachable(f"no run named {name!r} in W&B project {path}")
            run = found[-1]
            metrics = numeric(dict(run.summary))
            if not metrics:
                rows = list(run.scan_history(page_size=1000))
                metrics = numeric(rows[-1]) if rows else {}
        except WandbUnreachable:
            raise
        except Exception as exc:
            raise WandbUnreachable(f"{type(exc).__name__}: {exc}") from None
        return metrics
