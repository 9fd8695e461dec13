"""Everything the agent follows for one run: log, sidecar metrics file, W&B, process; turned into events.

Producers and seqs (see docs/decisions/0001 and 0011, and agent.logsource):

| events | producer | seq |
|---|---|---|
| `metric` from the sidecar file | `<host>/sidecar/<run>/g<generation>` | byte offset of the line's end |
| `metric` from W&B files | `<host>/wandb/<run>/<run dir>` | file offset past the record |
| `metric` from the W&B API | `<host>/wandbapi/<run>/<run id>` | `_step` + 1 |
| `source.status` | `<host>/status/<run>` | `time_seq()` |
| `health` (process samples) | `<host>/proc/<run>` | `time_seq()` |
| `health` (W&B guard) | `<host>/guard/<run>` | start time of the offending process (clock ticks) |
| `run.finished` / `run.failed` | `exit/<run>` | seq of the `run.launched` event, else the exit file's mtime (µs) |

The exit event's id is the one the central liveness check uses for remote runs, so whichever
notices first records the end once.

The "log" may be a structured metric file (a CSV logger's file, `trainer_state.json`, TensorBoard
events): `agent.metric_files` says which by the path's name, and its records stand where the log's
metric lines would (held back while W&B is the source, like them).

The log and W&B are read apart: when one of them fails (a log the agent may not open, a W&B file
it cannot decode), the failure is counted (`SourceErrors`) and the other is read as usual (a log it
may not open is also said in the run's events, once: agent.access); a W&B
failure reads as "W&B unavailable", so the log takes over as the metrics source. The sidecar is
read first in each poll, so a step the training process both printed and wrote is published from
the sidecar once it is active (agent.arbiter).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainwarden.agent import access, procfs
from trainwarden.agent.access import LogAccess
from trainwarden.agent.arbiter import STALE_S, STARTUP_GRACE_S, Arbiter
from trainwarden.agent.blind import Blindness, SeenTail, trains
from trainwarden.agent.config import (
    FIRST_STEP_BUDGET_S,
    ROTATE_WAIT_S,
    UNREADABLE_AFTER_LINES,
    UNREADABLE_AFTER_S,
    WANDB_API_INTERVAL_S,
)
from trainwarden.agent.health import Ended, GuardFinding, ProcessHealth, log_tail
from trainwarden.agent.isolation import SourceErrors
from trainwarden.agent.logsource import BLOCK_IDLE_S, Item, RunLog
from trainwarden.agent.metric_files import CSV, LOG, TENSORBOARD, MetricFileLog, kind_of, open_reader, undecided
from trainwarden.agent.runsecrets import RunSecrets
from trainwarden.agent.sidecar import RunSidecar
from trainwarden.agent.state import LogPosition, WandbPosition
from trainwarden.agent.wandb_source import DEFAULT_BASE_URL, HistoryApi, Reading, RunWandb
from trainwarden.agent.wandb_use import WandbUse, wandb_use
from trainwarden.agent.watch import RunWatch
from trainwarden.core.metrics import normalise, without_problems
from trainwarden.core.redact import redact_text
from trainwarden.events import reading as rd
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.payloads import HealthData, RunEndedData, SourceStatusData

METRICS_SOURCE = "metrics"  # `source` of source.status events about where metrics come from


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions:
    wandb_stale_s: float = STALE_S
    wandb_api_interval_s: float = WANDB_API_INTERVAL_S
    wandb_base_url: str = DEFAULT_BASE_URL
    block_idle_s: float = BLOCK_IDLE_S
    startup_grace_s: float = STARTUP_GRACE_S
    unreadable_after_s: float = UNREADABLE_AFTER_S  # a log growing this long without a training metric ...
    unreadable_after_lines: int = UNREADABLE_AFTER_LINES  # ... or this many lines: said unreadable (agent.blind)
    first_step_budget_s: float = FIRST_STEP_BUDGET_S  # start-up lines only: said after this (agent.blind)
    rotate_wait_s: float = ROTATE_WAIT_S  # a renamed log stays open this long after it stopped growing (agent.tail)


class RunWatcher:
    def __init__(self, *, watch: RunWatch, host: str, now: float, options: WatchOptions,
                 log_position: LogPosition | None = None, wandb_position: WandbPosition | None = None,
                 wandb_api: HistoryApi | None = None, errors: SourceErrors | None = None,
                 sidecar_position: LogPosition | None = None) -> None:  # fmt: skip
        self.watch = watch
        self.run = watch.run
        self.host = host
        self.errors = errors or SourceErrors()
        pos = log_position or LogPosition()
        self.secrets = RunSecrets(watch)
        self.secrets()  # learn what its processes already hold, before any of its text goes out
        self.kind = kind_of(watch.log)  # a training log, or a structured metric file (agent.metric_files)
        self.log: RunLog | MetricFileLog
        self.seen: SeenTail | None = None  # a log's lines, for its blindness (none for a metric file: it is read)
        self.blindness = Blindness(after_s=options.unreadable_after_s, after_lines=options.unreadable_after_lines,
                                   first_step_s=options.first_step_budget_s, started=now)  # fmt: skip
        self.unreadable: str | None = None  # what the agent said when it found the run unreadable (the heartbeat)
        self.access = LogAccess(watch.log)  # whether it may read the log (a directory made private: agent.access)
        # a log path with no whole first line yet may still be a CSV logger's file (agent.metric_files.undecided)
        self.undecided = self.kind == LOG and not pos.offset and undecided(watch.log)
        if self.kind == LOG:
            tail = self.seen = SeenTail(watch.log, offset=pos.offset, generation=pos.generation, inode=pos.inode,
                                        fingerprint=pos.fingerprint, rotate_wait_s=options.rotate_wait_s)  # fmt: skip
            self.log = RunLog(run=watch.run, host=host, tail=tail, block_idle_s=options.block_idle_s,
                              secrets=self.secrets, errors=self.errors)  # fmt: skip
            self.log.resume(pos)
        else:
            reader = open_reader(watch.log, offset=pos.offset, generation=pos.generation, inode=pos.inode)
            self.log = MetricFileLog(run=watch.run, host=host, reader=reader, errors=self.errors)
        self.sidecar = RunSidecar(run=watch.run, host=host, path=watch.metrics_path, position=sidecar_position,
                                  errors=self.errors)  # fmt: skip
        self.wandb = RunWandb(
            watch=watch, host=host, api=wandb_api, api_interval_s=options.wandb_api_interval_s,
            base_url=options.wandb_base_url,
            run_dir=Path(wandb_position.run_dir) if wandb_position else None,
            offset=wandb_position.offset if wandb_position else 0,
        )  # fmt: skip
        self.arbiter = Arbiter(started=now, stale_s=options.wandb_stale_s, startup_grace_s=options.startup_grace_s)
        self.health = ProcessHealth(watch)
        self.ended: Ended | None = None
        self.ended_at: float | None = None

    # -- positions for the state file ------------------------------------------------------------

    def log_position(self) -> LogPosition:
        if isinstance(self.log, RunLog):
            return self.log.position(self.arbiter.held_first)
        tail = self.log.tail
        offset = self.log.safe_offset
        held = self.arbiter.held_first
        if held is not None and held.generation == tail.generation:
            offset = min(offset, held.start)
        return LogPosition(offset=offset, generation=tail.generation, inode=tail.inode)

    def close(self) -> None:
        """Let go of what is held open (a renamed log, agent.tail)."""
        if isinstance(self.log, RunLog):
            self.log.tail.close()

    def wandb_position(self) -> WandbPosition | None:
        if self.wandb.run_dir is None:
            return None
        return WandbPosition(run_dir=str(self.wandb.run_dir), offset=self.wandb.offset)

    # -- polling ----------------------------------------------------------------------------------

    def poll(self, now: float, claimed: set[Path]) -> list[Event]:
        """New lines and W&B rows, through the arbiter: the fast path, every loop."""
        items: list[Item] = []
        exact: list[Event] = []
        try:
            exact = self.sidecar.poll(now)
        except Exception as exc:  # the sidecar only: the log and W&B are still read
            self.errors.failed(f"{self.run} sidecar", exc)
        access: SourceStatusData | None = None
        if self.undecided:
            self._decide()
        try:
            items = self.log.poll(now)
        except OSError as exc:  # the log only, and said in the run's events (once): W&B is still read
            self.errors.failed(f"{self.run} log", exc)
            access = self.access.failed(exc)
        except Exception as exc:  # the log only: W&B is still read
            self.errors.failed(f"{self.run} log", exc)
        else:
            access = self.access.read()
        try:
            reading = self.wandb.poll(now, self.health.pids, claimed)
        except Exception as exc:  # W&B only: the log takes over
            self.errors.failed(f"{self.run} wandb", exc)
            reading = Reading(False, f"reading W&B failed: {type(exc).__name__}: {exc}"[:300])
        use = self.wandb_use()
        if not reading.available and use.uses is not None:  # say why a missing W&B matters, or does not
            reading = Reading(False, use.why if not use.uses else f"{reading.reason} (it uses W&B: {use.why})",
                              reading.url)  # fmt: skip
        decision = self.arbiter.step(now=now, items=items, wandb=reading, log_available=self.log.tail.exists,
                                     sidecar=self.sidecar.active, uses_wandb=use.uses)  # fmt: skip
        out: list[Event] = []
        if access is not None:
            out.append(self._event(t.SOURCE_STATUS, f"{self.host}/status/{self.run}", time_seq(), now, access))
        if decision.transition is not None:
            tr = decision.transition
            status: SourceStatusData = {"source": METRICS_SOURCE, "status": tr.status, "previous": tr.previous,
                                        "reason": tr.reason, "url": tr.url}  # fmt: skip
            out.append(self._event(t.SOURCE_STATUS, f"{self.host}/status/{self.run}", time_seq(), now, status))
        out.extend(exact)
        out.extend(item.event for item in decision.items)
        said = self._reading(now, items, metric=bool(exact) or any(row.metrics for row in reading.rows))
        if said is not None:
            out.append(said)
        for row in decision.rows:
            data = normalise(row.metrics)
            if "step" not in data and row.step is not None:
                data["step"] = row.step
            data, refused = without_problems(data)
            if refused:
                self.errors.refused_values(f"{self.run} wandb", refused)
            if data:
                ts = row.ts if row.ts and math.isfinite(row.ts) else now  # W&B's `_timestamp`, when usable
                out.append(self._event(t.METRIC, row.producer, row.seq, ts, data))
        return out

    def _decide(self) -> None:
        """Read a log path as a CSV metric file once its first line says so (Keras' `CSVLogger('training.log')`
        writes its header at the end of the first epoch); a log once that line is anything else."""
        if undecided(self.watch.log):
            return
        self.undecided = False
        if kind_of(self.watch.log) == LOG or not isinstance(self.log, RunLog) or self.log.tail.offset:
            return
        self.log.tail.close()
        self.kind, self.seen = CSV, None
        self.log = MetricFileLog(run=self.run, host=self.host, reader=open_reader(self.watch.log), errors=self.errors)

    def _reading(self, now: float, items: list[Item], *, metric: bool) -> Event | None:
        """Whether the run's metrics are read (agent.blind): said once when they are not, once when they come."""
        if self.seen is None or self.blindness.read:
            return None
        metric = metric or any(item.is_metric and trains(item.event.data) for item in items)
        change = self.blindness.step(now, self.seen.take(), metric=metric)
        if self.blindness.read:
            self.seen.keep = False  # read: the lines need no looking at any more
        if change is None:
            return None
        quoted = rd.sample(redact_text(change.sample, self.secrets())) if change.sample else None
        blind = change.status == rd.UNREADABLE
        facts = rd.startup_facts if change.startup else rd.unreadable_facts
        self.unreadable = facts(change.lines, change.span_s, quoted) if blind else None
        data: SourceStatusData = {"source": rd.SOURCE, "status": change.status, "lines": change.lines,
                                  "reason": self.unreadable or "a training metric is read now"}  # fmt: skip
        if blind and quoted:
            data["sample"] = quoted
        return self._event(t.SOURCE_STATUS, f"{self.host}/status/{self.run}", time_seq(), now, data)

    def wandb_use(self) -> WandbUse:
        """Whether this run uses W&B, from its watch, its W&B directory and its processes' environment."""
        return wandb_use(self.watch, run_dir_found=self.wandb.run_dir is not None, env_names=self.health.wandb_env,
                         env_read=self.health.env_read)  # fmt: skip

    def sample_process(self, procs: Mapping[int, procfs.ProcStat], now: float) -> list[Event]:
        """Health sample, W&B guard, and the run's end (after the log's last lines)."""
        out: list[Event] = []
        if self.ended is not None:
            return out
        sample = self.health.sample(procs, now)
        self.secrets.learn(self.health.pids)
        ended = self.health.ended()
        if sample is not None and not (sample.get("alive") is False and ended is not None):
            # A run that ended is told by run.finished / run.failed (with its exit code, or none when it
            # vanished), which the policy judges; "alive: false" would report the same death twice.
            out.append(self._event(t.HEALTH, f"{self.host}/proc/{self.run}", time_seq(), now, sample))
        guard = self.health.guard(procs)
        if guard is not None:
            out.append(self._guard_event(guard, now))
        if ended is not None:
            out.extend(self.poll(now, set()))  # the lines written before it ended come first
            done = self.log.finish(now, final=True) if isinstance(self.log, RunLog) else self.log.finish(now)
            out.extend(item.event for item in done)  # a last line without its newline included
            out.append(self._ended_event(ended, now))
            self.ended, self.ended_at = ended, now
        return out

    def _guard_event(self, g: GuardFinding, now: float) -> Event:
        reason = f"process {g.pid} ({g.comm}) runs with {g.variable}: its metrics do not reach W&B"
        data: HealthData = {"check": "wandb_mode", "ok": False, "wandb_mode": g.mode, "variable": g.variable,
                            "pid": g.pid, "process": g.comm, "reason": reason}  # fmt: skip
        return self._event(t.HEALTH, f"{self.host}/guard/{self.run}", g.start_ticks, now, data)

    def _ended_event(self, ended: Ended, now: float) -> Event:
        seq = self.watch.launch_seq or ended.exit_mtime_us or time_seq()
        data: RunEndedData = {"exit_code": ended.exit_code, "by": f"agent@{self.host}"}
        if self.watch.launch_seq is not None:
            data["launch"] = self.watch.launch_seq  # which launch ended: a relaunch may already be recorded
        # a run added with `watch --pid/--match` is not our child: it leaves no exit code to read, and its end
        # is an end, not a failure (its log says the rest); a launched one that left none was killed
        unknowable = (
            ended.exit_code is None and self.watch.launch_seq is None and not access.exists(self.watch.exit_path)
        )
        if ended.exit_code != 0 and not unknowable:
            data["log_tail"] = [] if self.kind == TENSORBOARD else log_tail(self.watch.log, secrets=self.secrets.values)
            if ended.exit_code is None:
                data["reason"] = "the process is gone and left no exit code"
        if unknowable:
            data["reason"] = "its process ended; it was not started by trainwarden, so its exit code cannot be known"
        event_type = t.RUN_FINISHED if ended.exit_code == 0 or unknowable else t.RUN_FAILED
        return self._event(event_type, f"exit/{self.run}", seq, now, data)

    def sources(self) -> dict[str, Any]:
        """This run's sources for the heartbeat."""
        h = self.health
        process = ("ended" if self.ended else "alive" if h.pids else "gone" if h.gone
                   else "unknown" if not h.trackable else "not seen")  # fmt: skip
        return {
            "log": "unreachable" if self.access.problem else "ok" if self.log.tail.exists else "missing",
            "log_problem": self.access.problem,
            "metrics": self.arbiter.status,
            "metrics_reason": self.arbiter.reason,
            "held_lines_dropped": self.arbiter.dropped,
            "wandb_run_dir": str(self.wandb.run_dir) if self.wandb.run_dir else None,
            "sidecar": str(self.sidecar.path) if self.sidecar.active else None,
            "process": process,
            "lines_read": self.log.lines_read,
            "reading": self.blindness.said or (rd.READABLE if self.blindness.read else None),
        }

    def _event(self, event_type: str, producer: str, seq: int, ts: float, data: Mapping[str, Any]) -> Event:
        return make_event(event_type, run=self.run, host=self.host, producer=producer, seq=seq, data=data, ts=ts)
