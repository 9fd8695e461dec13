"""Real W&B run files, written by the real wandb library in offline mode (in a child process, with
every wandb directory under the test's tmp_path; nothing reaches the network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = """
import json, sys
import wandb
rows = json.loads(sys.argv[1])
run = wandb.init(project="tw-test", name=sys.argv[2], config={"lr": 3e-4})
for row in rows:
    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    run.log({k: float(v) if v in ("nan", "inf") else v for k, v in row.items()})
run.finish()
"""


def wandb_env(root: Path) -> dict[str, str]:
    """Environment for a process that may import wandb: offline, silent, every directory in `root`."""
    root.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(root),
        "WANDB_CACHE_DIR": str(root / ".cache"),
        "WANDB_CONFIG_DIR": str(root / ".config"),
        "WANDB_DATA_DIR": str(root / ".data"),
        "WANDB_DISABLE_GIT": "true",
    }


def write_offline_run(root: Path, rows: list[dict[str, Any]], *, name: str = "exp01") -> Path:
    """Run the script; returns the run directory (`root/wandb/offline-run-...`)."""
    subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(rows), name], env=wandb_env(root), check=True,
                   capture_output=True, timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    (run_dir,) = (root / "wandb").glob("offline-run-*")
    return run_dir
