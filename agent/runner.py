"""The agent loop: follow every watched run's sources, sample GPUs, publish events in batches.

One `step()`: apply new control messages (watch, unwatch, and stop: carried out by agent.stopper);
publish the outcomes of stops carried out since; read logs and W&B (unless the spool is full: then the
logs keep the lines until Redis takes the backlog); every `process_interval_s` sample process
health, and at once when a run's process is gone or its exit file came (a death is recorded within a
poll, not at the next sample); every `gpu_interval_s` sample GPUs and drain XID events; every
`heartbeat_interval_s` send a heartbeat to each run that has not ended; then flush, and save the state once
everything made is durable.

A failure in one run's sources, or in GPU sampling, is that run's or that sampler's alone: it is
counted and logged once (agent.isolation), and every other run is watched as before. Should a step
fail anyway, the state is not saved on the way out: the offsets may be past lines whose events were
never made, and a restart must read them again.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainwarden.agent import config, procfs
from trainwarden.agent import state as agent_state
from trainwarden.agent.control import ControlReader
from trainwarden.agent.dumper import Dumper, Target, find_pyspy
from trainwarden.agent.gpu import GpuSample, GpuSampler, Xid
from trainwarden.agent.gpu_runs import gpu_run_events, gpus_of
from trainwarden.agent.heartbeat import heartbeat_data
from trainwarden.agent.isolation import SourceErrors
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.stopper import Stopper
from trainwarden.agent.wake import Growth
from trainwarden.agent.wandb_source import HistoryApi
from trainwarden.agent.watch import DumpOrder, RunWatch
from trainwarden.agent.watcher import RunWatcher, WatchOptions
from trainwarden.core.logcontext import log_context
from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.agent_lease import LeaseKeeper
from trainwarden.events.envelope import Event, make_event, time_seq
from trainwarden.events.errors import LeaseLost, StoreUnavailable
from trainwarden.events.heartbeat import NOT_AN_ERROR
from trainwarden.events.lease import Lease
from trainwarden.events.payloads import RunWatchedData, SourceStatusData
from trainwarden.events.silence import Pulse

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    poll_interval_s: float = config.POLL_INTERVAL_S
    gpu_interval_s: float = config.GPU_INTERVAL_S
    process_interval_s: float = config.PROCESS_INTERVAL_S
    heartbeat_interval_s: float = config.HEARTBEAT_INTERVAL_S
    control_interval_s: float = 0.2  # how long a stop the agent carries out, or a new run, may wait to be read
    save_interval_s: float = 1.0
    retire_after_s: float = 300.0  # a launched run that ended is dropped after this long without new lines
    watch: WatchOptions = field(default_factory=WatchOptions)


class Agent:
    def __init__(self, *, publisher: Publisher, host: str, watches: Iterable[RunWatch] = (),
                 state_path: Path | None = None, config: AgentConfig | None = None,
                 gpu: GpuSampler | None = None, gpu_problem: str | None = None,
                 control: ControlReader | None = None, wandb_api: HistoryApi | None = None,
                 clock: Callable[[], float] = time.time, pulse: Pulse | None = None,
                 lease: Lease | None = None) -> None:  # fmt: skip
        self.publisher = publisher
        self.host = host
        self.state_path = state_path
        self.config = config or AgentConfig()
        self.gpu = gpu
        self.gpu_problem = gpu_problem if gpu is None else None
        self.control = control
        self.wandb_api = wandb_api
        self.clock = clock
        self.pulse = pulse  # the daemon heartbeat (events/heartbeat.py): spool backlog, last error
        self.lease = lease  # the host's agent lease (events/agent_lease.py): renewed each step, checked before a stop
        self.lease_keeper = LeaseKeeper(lease) if lease is not None else None
        self.state = agent_state.load(state_path)
        self.configured = {w.run: w for w in watches}
        self.watchers: dict[str, RunWatcher] = {}
        self.gpu_info: dict[str, Any] = gpu.info() if gpu is not None else {}
        self.skipped_rounds = 0
        self.errors = SourceErrors()
        self.stopper = Stopper(host, clock)
        self.dumper = Dumper(host, clock, find_pyspy())
        self.gpu_samples: list[GpuSample] = []  # the last, for a dump
        self._due: dict[str, float] = {}
        self._saved_at = 0.0
        self._saved: bytes | None = None  # what the last save wrote (None: nothing yet, or it failed)
        self._reconfigured: dict[str, RunWatch] | None = None  # configured runs a SIGHUP read, for the next step
        self.state_error: str | None = None  # why the offsets cannot be saved now (a full disk), else None
        self.state_save_failures = 0
        now = clock()
        for w in [*self.configured.values(), *self.state.registered.values()]:
            self._watch(w, now)

    # -- watch list ---------------------------------------------------------------------------------

    def _watch(self, watch: RunWatch, now: float, control: str | None = None) -> None:
        old = self.watchers.get(watch.run)
        if old is not None and old.watch == watch:
            if control is not None and watch.launch is None:  # `trainwarden watch` again: it waits for the answer
                self.publisher.publish([self._watched_event(watch, now, control)])
            return
        keep_position = old is None or old.watch.log == watch.log
        watcher = RunWatcher(
            watch=watch, host=self.host, now=now, options=self.config.watch, wandb_api=self.wandb_api,
            log_position=self.state.logs.get(watch.run) if keep_position else None,
            wandb_position=self.state.wandb.get(watch.run) if keep_position else None, errors=self.errors,
            sidecar_position=self.state.sidecars.get(watch.run)
            if old is None or old.watch.metrics_path == watch.metrics_path else None,
        )  # fmt: skip
        self.watchers[watch.run] = watcher
        if self.gpu_problem is not None:
            self.publisher.publish([self._status_event(watch.run, now, "nvml", "unavailable", self.gpu_problem)])
        if watch.launch is None:  # a launched run's way to stop it is in its run.launched
            self.publisher.publish([self._watched_event(watch, now, control)])
        log.info("watching %s: log %s", watch.run, watch.log)

    def _watched_event(self, watch: RunWatch, now: float, control: str | None) -> Event:
        data: RunWatchedData = {
            "host": self.host, "log_path": str(watch.log), "pid": watch.pid, "match": watch.match,
            "session": watch.session, "tmux_socket": watch.tmux_socket,
            "stop_command": list(watch.stop_command) if watch.stop_command else None,
            "stop_grace_s": watch.stop_grace_s, "control": control,
        }  # fmt: skip
        return self._event(t.RUN_WATCHED, watch.run, f"{self.host}/watch/{watch.run}", now, data)

    def _unwatch(self, run: str) -> None:
        watcher = self.watchers.pop(run, None)
        if watcher is not None:
            watcher.close()
        self.state.registered.pop(run, None)
        self.state.logs.pop(run, None)
        self.state.wandb.pop(run, None)
        self.state.sidecars.pop(run, None)
        log.info("no longer watching %s", run)

    def reconfigure(self, watches: Iterable[RunWatch]) -> tuple[list[str], list[str]]:
        """Make `watches` the configured runs at the next step (SIGHUP, from another thread); the runs added
        or changed, and those removed (a run also registered by a launch or `watch` stays watched)."""
        new = {w.run: w for w in watches}
        current = self._reconfigured if self._reconfigured is not None else self.configured
        self._reconfigured = new
        return sorted(r for r, w in new.items() if current.get(r) != w), sorted(set(current) - set(new))

    def _apply_reconfigured(self, now: float) -> None:
        new, self._reconfigured = self._reconfigured, None
        if new is None:
            return
        for run in set(self.configured) - set(new):
            del self.configured[run]
            if run not in self.state.registered:
                self._unwatch(run)
        self.configured.update(new)
        for watch in new.values():
            self._watch(watch, now)

    def _read_control(self, now: float) -> None:
        if self.control is None:
            return
        try:
            messages = self.control.read(self.state.control_id)
        except StoreUnavailable:
            return  # read again once Redis is back; the flush reports the outage
        for sid, message in messages:
            self.state.control_id = sid
            if message is None:
                continue
            if message.stop is not None:
                if self.lease is not None:
                    self.lease.check()  # LeaseLost: another agent took over this host; it alone signals the run
                watcher = self.watchers.get(message.run)
                self.stopper.start(message.stop, watcher.watch if watcher is not None else None,
                                   watcher.health.root if watcher is not None else None)  # fmt: skip
            elif message.dump is not None:
                self._dump(message.dump)
            elif message.watch is not None:
                self.state.registered[message.run] = message.watch
                self._watch(message.watch, now, control=sid)
            elif message.run not in self.configured:
                self._unwatch(message.run)

    def _dump(self, order: DumpOrder) -> None:
        """Record where a stalled run is stuck (agent/dumper.py), in a thread: the loop goes on."""
        if (w := self.watchers.get(order.run)) is None:
            log.warning("dump of %s asked, but this agent does not watch it", order.run)
            return
        gpus = tuple(s for s in self.gpu_samples if s.index in gpus_of(w, self.gpu_samples))
        since = w.health.ticks_since(order.since) if order.since is not None else None
        self.dumper.start(order, Target(tuple(w.health.pids), gpus, since))

    # -- one step -------------------------------------------------------------------------------------

    def _due_now(self, name: str, interval: float, now: float) -> bool:
        if now < self._due.get(name, 0.0):
            return False
        self._due[name] = now + interval
        return True

    def step(self) -> int:
        """One pass over every source; returns the number of events made."""
        if self.lease_keeper is not None:
            self.lease_keeper.keep()  # LeaseLost once another agent holds this host's lease
        now = self.clock()
        cfg = self.config
        self._apply_reconfigured(now)
        if self._due_now("control", cfg.control_interval_s, now):
            try:
                self._read_control(now)
            except LeaseLost:
                raise  # this agent stands down: nothing it reads is its to carry out any more
            except Exception as exc:  # the runs already watched are watched on
                self.errors.failed("control stream", exc)
        events: list[Event] = [*self.stopper.finished(), *self.dumper.finished()]
        if self.publisher.spool_full:
            self.skipped_rounds += 1  # a round of reading and sampling skipped; the next heartbeat says so
            if self.watchers and self._due_now("heartbeat", cfg.heartbeat_interval_s, now):
                events.extend(self._heartbeats(now))  # they say what waits: the first events Redis gets
            self.publisher.publish(events)  # a stop's outcome is never skipped
            return len(events)
        claimed = {w.wandb.run_dir for w in self.watchers.values() if w.wandb.run_dir is not None}
        for watcher in self.watchers.values():
            with log_context(run=watcher.run):  # what reading its log and W&B logs names the run
                try:
                    events.extend(watcher.poll(now, claimed))
                except Exception as exc:  # this run only (its log and W&B are each guarded inside too)
                    self.errors.failed(f"{watcher.run} sources", exc)
        if self._dying():
            self._due["process"] = now  # a run's end shows: sample now, so its end is recorded within a poll
        if self.watchers and self._due_now("process", cfg.process_interval_s, now):
            procs = procfs.snapshot()
            for watcher in self.watchers.values():
                try:
                    events.extend(watcher.sample_process(procs, now))
                except Exception as exc:
                    self.errors.failed(f"{watcher.run} process", exc)
        if self.gpu is not None and self.watchers and self._due_now("gpu", cfg.gpu_interval_s, now):
            try:
                self.gpu_samples = self.gpu.sample()
                events.extend(self._gpu_events(self.gpu_samples, self.gpu.xids(), now))
            except Exception as exc:
                self.errors.failed("GPU sampling", exc)
        if self.watchers and self._due_now("heartbeat", cfg.heartbeat_interval_s, now):
            events.extend(self._heartbeats(now))
        self.publisher.publish(events)
        self._retire(now)
        return len(events)

    def _dying(self) -> bool:
        """Whether a run's process is gone or its exit file came (ProcessHealth.died), checked every poll."""
        for watcher in self.watchers.values():
            try:
                if watcher.ended is None and watcher.health.died():
                    return True
            except OSError as exc:  # an exit file it may not read: the process sample says so
                self.errors.failed(f"{watcher.run} process", exc)
        return False

    def _gpu_events(self, samples: list[GpuSample], xids: list[Xid], now: float) -> list[Event]:
        live = [w for w in self.watchers.values() if w.ended is None]
        return [self._event(kind, run, f"{self.host}/{producer}", now, data)
                for kind, run, producer, data in gpu_run_events(live, samples, xids)]  # fmt: skip

    def _heartbeats(self, now: float) -> list[Event]:
        gpu = ({"status": "ok", **self.gpu_info} if self.gpu is not None
               else {"status": "unavailable", "reason": self.gpu_problem or "GPU sampling is off"})  # fmt: skip
        spool = self.publisher.spool
        pub = self.publisher
        spool_info = {"bytes": len(spool) if spool else 0, "full": pub.spool_full,
                      "skipped_rounds": self.skipped_rounds, "held_in_memory": len(pub.buffer) if pub.spool_full else 0,
                      "write_failures": pub.spool_write_failures, "error": pub.spool_error,
                      "offsets_save_failures": self.state_save_failures, "offsets_error": self.state_error}  # fmt: skip
        out = []
        errors = self.errors.heartbeat()
        for w in self.watchers.values():
            if w.ended is not None:  # its end is told: a heartbeat now would make an ended run look alive
                continue
            try:  # one run's sources (a file the agent may not look at) cost that run's heartbeat only
                sources = w.sources()
            except Exception as exc:
                self.errors.failed(f"{w.run} heartbeat", exc)
                sources = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            data = heartbeat_data(interval_s=self.config.heartbeat_interval_s, gpu=gpu, run_sources=sources,
                                  spool=spool_info, runs=len(self.watchers), errors=errors)  # fmt: skip
            out.append(self._event(t.AGENT_HEARTBEAT, w.run, f"{self.host}/hb", now, data))
        return out

    def _status_event(self, run: str, now: float, source: str, status: str, reason: str) -> Event:
        data: SourceStatusData = {"source": source, "status": status, "reason": reason}
        return self._event(t.SOURCE_STATUS, run, f"{self.host}/status/{run}", now, data)

    def _event(self, event_type: str, run: str, producer: str, now: float, data: Mapping[str, Any]) -> Event:
        return make_event(event_type, run=run, host=self.host, producer=producer, seq=time_seq(), data=data, ts=now)

    def _retire(self, now: float) -> None:
        for run, w in list(self.watchers.items()):
            if run in self.configured or w.ended_at is None:
                continue
            quiet_since = max(w.ended_at, w.log.last_line_at or 0.0)
            if now - quiet_since >= self.config.retire_after_s:
                self._unwatch(run)

    # -- flush, state, loop ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Send what was made (or spool it), then save the state if everything made is durable."""
        try:
            self.publisher.flush()
        finally:
            if self.publisher.durable:
                self.save_state()

    def save_state(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._saved_at < self.config.save_interval_s:
            return
        self._saved_at = now
        for run, w in self.watchers.items():
            self.state.logs[run] = w.log_position()
            self.state.sidecars[run] = w.sidecar.position()
            position = w.wandb_position()
            if position is not None:
                self.state.wandb[run] = position
        try:
            self._saved = agent_state.save(self.state_path, self.state, unless=self._saved)
        except OSError as exc:  # a full disk: the offsets stay in memory; a restart meanwhile reads the logs again
            self.state_save_failures += 1
            if self.state_error is None:
                log.error("cannot save the agent's offsets to %s: %s; retrying every %.0fs (a restart meanwhile "
                          "reads the logs again from the last saved offsets: no line lost, repeats dropped)",
                          self.state_path, exc, self.config.save_interval_s)  # fmt: skip
            self.state_error = f"offsets not saved to {self.state_path}: {exc}"
            return
        if self.state_error is not None:
            log.warning("the agent's offsets are saved again to %s", self.state_path, extra=NOT_AN_ERROR)
        self.state_error = None

    def run(self, *, burst: bool = False, stop: threading.Event | None = None) -> None:
        """Work until `stop` is set; with `burst=True`, return once everything written so far is sent.

        Through a Redis outage the loop keeps its pace: events go to the spool while the publisher
        tries Redis again with a growing pause.
        """
        stop = stop or threading.Event()
        outage_since: float | None = None
        stepped = True  # False while a step is under way: a step that raised leaves offsets past unmade events
        if not burst:
            gc.freeze()  # what start-up made lives as long as the agent: no collection walks it again
        growth = Growth()
        try:
            while not stop.is_set():
                stepped = False
                started = time.monotonic()
                made = self.step()
                stepped = True
                try:
                    self.flush()
                except StoreUnavailable as exc:
                    if burst:
                        raise
                    if outage_since is None:
                        outage_since = time.monotonic()
                        log.warning("Redis cannot take events (%s); spooling them to disk and retrying", exc)
                else:
                    if outage_since is not None and self.publisher.outage_since is None:
                        log.warning("Redis takes events again after %.1fs", time.monotonic() - outage_since,
                                    extra=NOT_AN_ERROR)  # fmt: skip
                        outage_since = None
                self._beat()
                if burst:
                    if made == 0:
                        return
                elif not self.behind():  # one step per interval; a log read only in part is read on at once
                    stop.wait(max(0.0, self.config.poll_interval_s - (time.monotonic() - started)))
                    self._await_growth(growth, started, stop)
        finally:
            if self.publisher.durable and stepped:
                self.save_state(force=True)
            for watcher in self.watchers.values():
                watcher.close()  # a renamed log held open is found again by its inode (agent.tail)
            growth.close()

    def _await_growth(self, growth: Growth, started: float, stop: threading.Event) -> None:
        """Sleep on until a watched log (or sidecar) grows, at most `control_interval_s` after the step began: the
        control stream and the timers (a settled partial line, an idle traceback, a run's exit) are seen then."""
        cfg = self.config
        left = max(cfg.poll_interval_s, cfg.control_interval_s) - (time.monotonic() - started)
        if left > 0 and not stop.is_set():
            paths = [p for w in self.watchers.values() for p in (w.watch.log, w.sidecar.path)]
            growth.wait(paths, left, stop=stop, every=cfg.poll_interval_s)

    def behind(self) -> bool:
        """Whether a log's (or a sidecar's) last read stopped short of its end (more than a read's worth waited)."""
        return any(w.log.behind or w.sidecar.tail.behind for w in self.watchers.values())

    def _beat(self) -> None:
        """The daemon heartbeat: lag = how long events have waited in the spool, backlog = its bytes."""
        if self.pulse is None:
            return
        since = self.publisher.outage_since
        spool = self.publisher.spool
        self.pulse.heartbeat.lag_of = "spool backlog"
        self.pulse.heartbeat.backlog = len(spool) if spool is not None else 0
        blind = [f"{run}: {w.unreadable}" for run, w in self.watchers.items() if w.unreadable and w.ended is None]
        notices = [f"{reading.NOTICE}{'; '.join(blind)}"] if blind else []
        self.pulse.heartbeat.notice = "\n".join([*notices, *self._disk_notices()]) or None
        self.pulse.tick(lag_s=time.monotonic() - since if since is not None else 0.0)

    def _disk_notices(self) -> list[str]:
        """What a full (or read-only) disk under the spool or the offsets costs now, for `trainwarden health`."""
        out = []
        pub = self.publisher
        if pub.spool_full and pub.spool_error:
            out.append(f"{pub.spool_error}: {len(pub.buffer)} events wait in memory and log reading is paused (the "
                       f"logs keep the lines; {pub.spool_write_failures} writes refused so far)")  # fmt: skip
        if self.state_error:
            out.append(f"{self.state_error} ({self.state_save_failures} tries): a restart now reads the logs again "
                       "from the last saved offsets")  # fmt: skip
        return out
