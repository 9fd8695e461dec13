"""Final metrics from the run files a local `wandb/` directory holds (`collect --wandb-dir`): what W&B
recorded, read with the agent's reader of `.wandb` transaction logs, for a project without network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainwarden.agent.wandb_file import RunFile
from trainwarden.agent.wandb_source import run_dirs, run_file
from trainwarden.remote.errors import WandbUnreachable
from trainwarden.remote.final_metrics import numeric


class WandbRunFiles:
    """The `run-<id>.wandb` files under a `wandb/` directory: the last value of each metric of the run
    with that project and name, as W&B recorded it."""

    name = "wandb"

    def __init__(self, root: Path) -> None:
        self.root = root

    def final(self, wandb: dict[str, Any]) -> dict[str, float | int]:
        for run_dir in reversed(run_dirs(self.root)):
            path = run_file(run_dir)
            if path is None:
                continue
            decoded = RunFile(path).poll(max_bytes=1 << 22)
            info = decoded.info
            if info is None or info.name != wandb.get("run_name") or info.project != wandb.get("project"):
                continue
            last: dict[str, float | int] = {}
            for row in decoded.history:
                last.update(row.metrics)
            return numeric(last)
        raise WandbUnreachable(f"no W&B run file for {wandb.get('project')}/{wandb.get('run_name')} under {self.root}")
