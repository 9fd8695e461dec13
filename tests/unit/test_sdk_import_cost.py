"""The training-side SDK (`trainwarden.sdk`) runs inside every training process: importing it must load none
of the central processes' dependencies nor our packages that use them, so `import trainwarden` costs a
training script next to nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("redis", "rq", "slack_bolt", "slack_sdk", "yaml", "asyncssh", "pynvml", "wandb")
OURS = ("trainwarden.events", "trainwarden.bot", "trainwarden.workers")

CODE = (
    "import sys\n"
    "import trainwarden\n"
    "import trainwarden.sdk.log\n"
    f"heavy, ours = {HEAVY!r}, {OURS!r}\n"
    "print(sorted(n for n in sys.modules if n.split('.')[0] in heavy or n.startswith(ours)))\n"
)


def cumulative_us(importtime: str) -> int:
    """The cumulative microseconds of `import trainwarden` in `-X importtime` output (0 if not listed)."""
    for line in importtime.splitlines():
        fields = [f.strip() for f in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == "trainwarden" and fields[1].isdigit():
            return int(fields[1])
    return 0


def test_importing_the_sdk_loads_nothing_heavy(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", CODE], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    loaded = done.stdout.strip()
    cost = cumulative_us(done.stderr)
    assert loaded == "[]", f"import trainwarden.sdk.log loaded {loaded} (import trainwarden: {cost} us cumulative)"


def test_the_cost_is_read_from_importtime() -> None:
    sample = (
        "import time: self [us] | cumulative | imported package\nimport time:       120 |        345 | trainwarden\n"
    )
    assert cumulative_us(sample) == 345
