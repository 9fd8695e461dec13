"""What the agent watches for one run, and the control-stream message that registers it.

A run is registered by a launch writing to its host's control stream
(`tw:agent:{<host>}:control`, see `events.keys.Keys.agent_control`) or listed under
`agent.watch` in the settings file. A control message is a stream entry of flat string fields
(an empty string means "not given"):

| field | meaning |
|---|---|
| `op` | `watch` (start or update watching a run) or `unwatch` (stop) |
| `run` | the run name (required) |
| `log` | absolute path of its training log (required for `watch`) |
| `exit_file` | where the launch wrapper writes the exit code (default: `<log>.exit`) |
| `metrics` | its sidecar metrics file, written by `trainwarden.log` (default: `<log>.metrics.jsonl`) |
| `session`, `tmux_socket` | its tmux session (and `tmux -L` socket), to find its processes |
| `pid` | the pid of its wrapper process, when known |
| `workdir` | its working directory (W&B run directories are looked for in `<workdir>/wandb`) |
| `wandb_dir` | directory holding its `wandb/` folder, when not the workdir (WANDB_DIR) |
| `wandb_run_dir` | its exact W&B run directory, when known |
| `wandb_path` | `entity/project/run_id`, for the W&B API |
| `wandb` | `0`: the run does not use W&B (`launch --no-wandb`); `1`: it does; absent: agent.wandb_use tells |
| `gpus` | comma-separated GPU indexes it uses, when NVML cannot see its processes |
| `launch` | the id of its `run.launched` event: its seq numbers the run's exit event |
| `launched_at` | unix time of the launch: older exit files and W&B runs are ignored |

Example: `XADD tw:agent:{gpu1}:control * op watch run exp01 log /data/exp01/train.log session train-exp01`
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from trainwarden.agent.errors import ControlMessageError
from trainwarden.events.envelope import check_run_name
from trainwarden.events.errors import EnvelopeError

from trainwarden.sidecar import metrics_path

WATCH = "watch"
UNWATCH = "unwatch"
PATH_FIELDS = ("log", "exit_file", "metrics", "workdir", "wandb_dir", "wandb_run_dir")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunWatch:
    run: str
    log: Path
    exit_file: Path | None = None
    metrics: Path | None = None
    session: str | None = None
    tmux_socket: str | None = None
    pid: int | None = None
    workdir: Path | None = None
    wandb: bool | None = None  # None: the agent tells from what it sees (agent.wandb_use)
    wandb_dir: Path | None = None
    wandb_run_dir: Path | None = None
    wandb_path: str | None = None
    gpus: tuple[int, ...] = ()
    launch: str | None = None
    launched_at: float | None = None

    def __post_init__(self) -> None:
        check_run_name(self.run)

    @property
    def exit_path(self) -> Path:
        return self.exit_file or Path(f"{self.log}.exit")

    @property
    def metrics_path(self) -> Path:
        """Where the training process writes exact metrics (trainwarden.sidecar): beside the log by default."""
        return self.metrics or Path(metrics_path(str(self.log)))

    @property
    def launch_seq(self) -> int | None:
        """The seq of the run's `run.launched` event, which also numbers its exit event."""
        if not self.launch:
            return None
        tail = self.launch.rpartition(":")[2]
        return int(tail) if tail.isdigit() else None

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v not in (None, ())}
        for key in PATH_FIELDS:
            if key in out:
                out[key] = str(out[key])
        if "gpus" in out:
            out["gpus"] = list(out["gpus"])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunWatch:
        """From settings or a saved state file (typed values); raises ControlMessageError."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ControlMessageError(f"unknown watch fields {sorted(unknown)}; expected some of {sorted(known)}")
        values = dict(data)
        try:
            for key in PATH_FIELDS:
                if values.get(key) is not None:
                    values[key] = Path(values[key]).expanduser()
            if "gpus" in values:
                values["gpus"] = tuple(int(g) for g in values["gpus"])
            if "pid" in values and values["pid"] is not None:
                values["pid"] = int(values["pid"])
            if "launched_at" in values and values["launched_at"] is not None:
                values["launched_at"] = float(values["launched_at"])
            if "log" not in values:
                raise ControlMessageError("a watch needs 'log', the path of the run's training log")
            return cls(**values)
        except EnvelopeError as exc:
            raise ControlMessageError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ControlMessageError(f"invalid watch {dict(data)!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class ControlMessage:
    op: str
    run: str
    watch: RunWatch | None  # None for unwatch


def parse_control(fields_: Mapping[bytes, bytes]) -> ControlMessage:
    """Pure: a control-stream entry -> ControlMessage; raises ControlMessageError saying what is wrong."""
    text = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in fields_.items()}
    op = text.pop("op", "")
    run = text.get("run", "")
    if op not in (WATCH, UNWATCH):
        raise ControlMessageError(f"control message op must be 'watch' or 'unwatch', got {op!r}", run=run or None)
    if op == UNWATCH:
        try:
            return ControlMessage(op, check_run_name(run), None)
        except EnvelopeError as exc:
            raise ControlMessageError(str(exc)) from None
    values: dict[str, Any] = {k: v for k, v in text.items() if v != ""}
    if "log" in values and not Path(values["log"]).is_absolute():
        raise ControlMessageError(f"control message log path must be absolute, got {values['log']!r}", run=run)
    if "wandb" in values:
        values["wandb"] = values["wandb"].lower() not in ("0", "false", "no", "off")
    if "gpus" in values:
        values["gpus"] = [g for g in values["gpus"].split(",") if g.strip()]
    watch = RunWatch.from_dict(values)
    return ControlMessage(op, watch.run, watch)
