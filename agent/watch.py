"""What the agent watches for one run, and the control-stream message that registers it.

A run is registered by a launch writing to its host's control stream
(`tw:agent:{<host>}:control`, see `events.keys.Keys.agent_control`) or listed under
`agent.watch` in the settings file. A control message is a stream entry of flat string fields
(an empty string means "not given"):

| field | meaning |
|---|---|
| `op` | `watch` (start or update watching a run), `unwatch` (stop watching it) or `stop` (stop the run) |
| `run` | the run name (required) |
| `log` | absolute path of its training log (required for `watch`) |
| `exit_file` | where the launch wrapper writes the exit code (default: `<log>.exit`) |
| `metrics` | its sidecar metrics file, written by `trainwarden.log` (default: `<log>.metrics.jsonl`) |
| `session`, `tmux_socket` | its tmux session (and `tmux -L` socket), to find its processes |
| `pid` | the pid of its wrapper (or training) process, when known |
| `match` | a regular expression over process command lines (`train.py --name exp01`) that finds its processes |
| `stop_command` | a JSON list: the argv that stops it cleanly, run by the agent (no shell) |
| `stop_grace_s` | seconds a Ctrl-C / SIGINT, then a SIGTERM, is given before the next step (default 10) |
| `workdir` | its working directory (W&B run directories are looked for in `<workdir>/wandb`) |
| `wandb_dir` | directory holding its `wandb/` folder, when not the workdir (WANDB_DIR) |
| `wandb_run_dir` | its exact W&B run directory, when known |
| `wandb_path` | `entity/project/run_id`, for the W&B API |
| `wandb` | `0`: the run does not use W&B (`launch --no-wandb`); `1`: it does; absent: agent.wandb_use tells |
| `allow_offline_wandb` | `1`: its experiment allows W&B offline: WANDB_MODE=offline is no guard finding |
| `gpus` | comma-separated GPU indexes it uses, when NVML cannot see its processes |
| `launch` | the id of its `run.launched` event: its seq numbers the run's exit event |
| `launched_at` | unix time of the launch: older exit files and W&B runs are ignored |

A `stop` message (written by the worker that carries out a STOP of a watched run) has `run`,
`request` (the id of the `stop.requested` event), `reply_as` (the producer of the `stop.done` /
`stop.failed` the agent records: `act/<run>/<stream id of the request>`, so a repeated request
records one outcome), and `reason` and `by` from the request.

A `dump` message (written by the workers when a stall anomaly opens: workers/dump_request.py) has `run`,
`anomaly` (the id of its `anomaly.opened`), `rule`, `reply_as` (the producer of the `process.dump` the
agent records: `dump/<run>/<stream id of the anomaly>`) and `since` (unix time of the run's last step,
when known); the agent records where the run's processes are stuck (agent/dumper.py).

Example: `XADD tw:agent:{gpu1}:control * op watch run exp01 log /data/exp01/train.log session train-exp01`
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from trainwarden.agent.errors import ControlMessageError
from trainwarden.core.sidecar import metrics_path
from trainwarden.events.envelope import check_run_name
from trainwarden.events.errors import EnvelopeError

WATCH = "watch"
UNWATCH = "unwatch"
STOP = "stop"
DUMP = "dump"
DUMP_PREFIX = "dump/"  # the workers' dump requests (workers/dump_request.py)
DEFAULT_STOP_GRACE_S = 10.0
REPLY_PREFIX = "act/"  # the workers' action producers (workers/actions.py)
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
    match: str | None = None  # regular expression over the command lines of the run's processes
    stop_command: tuple[str, ...] | None = None
    stop_grace_s: float = DEFAULT_STOP_GRACE_S
    workdir: Path | None = None
    wandb: bool | None = None  # None: the agent tells from what it sees (agent.wandb_use)
    allow_offline_wandb: bool = False  # its experiment allows W&B offline: no W&B guard finding (agent.health)
    wandb_dir: Path | None = None
    wandb_run_dir: Path | None = None
    wandb_path: str | None = None
    gpus: tuple[int, ...] = ()
    launch: str | None = None
    launched_at: float | None = None

    def __post_init__(self) -> None:
        check_run_name(self.run)
        if self.pid is not None and (type(self.pid) is not int or self.pid < 2):
            # a STOP signals it: 1 is init, 0 our own process group, a negative pid a group or every process
            raise ControlMessageError(f"pid must be a process id of 2 or more (a training process), got {self.pid!r}")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ControlMessageError(f"match {self.match!r} is not a regular expression: {exc}") from None
        if not self.stop_grace_s > 0:
            raise ControlMessageError(f"stop_grace_s must be above 0, got {self.stop_grace_s!r}")

    @property
    def stoppable(self) -> bool:
        """Whether the agent has a way to stop it."""
        return bool(self.stop_command or self.session or self.pid or self.match)

    @property
    def exit_path(self) -> Path:
        return self.exit_file or Path(f"{self.log}.exit")

    @property
    def metrics_path(self) -> Path:
        """Where the training process writes exact metrics (trainwarden.core.sidecar): beside the log by default."""
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
        for key in ("gpus", "stop_command"):
            if key in out:
                out[key] = list(out[key])
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
            if "stop_grace_s" in values:
                values["stop_grace_s"] = float(values["stop_grace_s"])
            if values.get("stop_command") is not None:
                argv = values["stop_command"]
                if not isinstance(argv, list | tuple) or not argv or not all(isinstance(a, str) for a in argv):
                    raise ControlMessageError(f"stop_command must be a non-empty list of strings, got {argv!r}")
                values["stop_command"] = tuple(argv)
            if "log" not in values:
                raise ControlMessageError("a watch needs 'log', the path of the run's training log")
            return cls(**values)
        except EnvelopeError as exc:
            raise ControlMessageError(str(exc)) from None
        except (TypeError, ValueError) as exc:
            raise ControlMessageError(f"invalid watch {dict(data)!r}: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class StopOrder:
    """Stop a watched run (the agent carries it out and records the outcome as `reply_as`:1)."""

    run: str
    request: str  # id of the stop.requested event
    reply_as: str  # producer of the stop.done / stop.failed
    reason: str | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DumpOrder:
    """Record where a stalled run is stuck (the agent records one `process.dump` as `reply_as`:1)."""

    run: str
    anomaly: str  # id of the anomaly.opened
    rule: str
    reply_as: str
    since: float | None = None  # the run's last step (unix time)


@dataclass(frozen=True, slots=True)
class ControlMessage:
    op: str
    run: str
    watch: RunWatch | None  # set for watch
    stop: StopOrder | None = None  # set for stop
    dump: DumpOrder | None = None  # set for dump


def parse_control(fields_: Mapping[bytes, bytes]) -> ControlMessage:
    """Pure: a control-stream entry -> ControlMessage; raises ControlMessageError saying what is wrong."""
    text = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in fields_.items()}
    op = text.pop("op", "")
    run = text.get("run", "")
    if op not in (WATCH, UNWATCH, STOP, DUMP):
        raise ControlMessageError(
            f"control message op must be 'watch', 'unwatch', 'stop' or 'dump', got {op!r}", run=run or None
        )
    if op in (UNWATCH, STOP, DUMP):
        try:
            check_run_name(run)
        except EnvelopeError as exc:
            raise ControlMessageError(str(exc)) from None
    if op == UNWATCH:
        return ControlMessage(op, run, None)
    if op == STOP:
        return ControlMessage(op, run, None, _stop_order(run, text))
    if op == DUMP:
        return ControlMessage(op, run, None, dump=_dump_order(run, text))
    values: dict[str, Any] = {k: v for k, v in text.items() if v != ""}
    if "log" in values and not Path(values["log"]).is_absolute():
        raise ControlMessageError(f"control message log path must be absolute, got {values['log']!r}", run=run)
    for flag in ("wandb", "allow_offline_wandb"):
        if flag in values:
            values[flag] = values[flag].lower() not in ("0", "false", "no", "off")
    if "gpus" in values:
        values["gpus"] = [g for g in values["gpus"].split(",") if g.strip()]
    if "stop_command" in values:
        try:
            values["stop_command"] = json.loads(values["stop_command"])
        except ValueError:
            raise ControlMessageError(
                f"stop_command must be a JSON list, got {values['stop_command']!r}", run=run
            ) from None
    watch = RunWatch.from_dict(values)
    return ControlMessage(op, watch.run, watch)


def _stop_order(run: str, text: Mapping[str, str]) -> StopOrder:
    request, reply_as = text.get("request", ""), text.get("reply_as", "")
    if not request or not reply_as.startswith(REPLY_PREFIX):
        raise ControlMessageError(
            f"a stop message needs 'request' and a 'reply_as' starting with {REPLY_PREFIX!r}", run=run
        )
    return StopOrder(run=run, request=request, reply_as=reply_as, reason=text.get("reason") or None,
                     by=text.get("by") or None)  # fmt: skip


def _dump_order(run: str, text: Mapping[str, str]) -> DumpOrder:
    anomaly, reply_as, since = text.get("anomaly", ""), text.get("reply_as", ""), text.get("since", "")
    if not anomaly or not reply_as.startswith(DUMP_PREFIX):
        raise ControlMessageError(
            f"a dump message needs 'anomaly' and a 'reply_as' starting with {DUMP_PREFIX!r}", run=run
        )
    try:
        when = float(since) if since else None
    except ValueError:
        raise ControlMessageError(f"a dump message's 'since' must be a unix time, got {since!r}", run=run) from None
    return DumpOrder(run=run, anomaly=anomaly, rule=text.get("rule", ""), reply_as=reply_as, since=when)
