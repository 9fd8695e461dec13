"""`trainwarden simulate`: synthetic runs publishing agent-like metric events at a fixed rate.

Load tests must go through the path real agents use, so every event is built with the agent's
producer names and sent through `agent.publisher.Publisher` into the `EventStore` (the append
script, the feed, the run index), one flush per `flush_interval_s` as the agent's poll loop does.

Pacing is a schedule, not a sleep per event: in a shard of n runs at `rate` Hz, event g (run
g mod n, step g // n) is due at g / (n * rate) seconds after the start, so a slow flush is caught
up by the next one and the rate never drifts. How late the oldest unsent event was is reported as
"behind"; when it keeps growing, one process cannot keep up and `--processes` spreads the runs over
several, each publishing as its own host (as several agents would).
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from trainwarden.agent.publisher import Publisher
from trainwarden.core.errors import SimulateError, UsageError
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, check_run_name, make_event
from trainwarden.events.errors import EnvelopeError
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.wiring import events_redis_at

log = logging.getLogger(__name__)

DEFAULT_FLUSH_INTERVAL_S = 0.05  # the agent's default poll interval
DEFAULT_REPORT_INTERVAL_S = 5.0
BEHIND_WARN_S = 1.0  # behind schedule by more than this: say so, and suggest --processes
START_DELAY_S = 1.0  # child processes start together this long after they are spawned


@dataclass(frozen=True, slots=True, kw_only=True)
class SimSpec:
    runs: int
    rate_hz: float
    duration_s: float | None = None  # None: until stopped
    processes: int = 1
    nan_fraction: float = 0.0  # share of runs whose loss turns NaN
    nan_after_s: float | None = None  # when (seconds into the simulation); default half the duration
    nan_spread_s: float = 0.0  # NaN onsets spread evenly over this long after nan_after_s
    prefix: str = "sim"
    host: str = "sim"
    generation: int = 0  # in the producer name: a new generation is not deduplicated against an old one
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S

    @property
    def ticks(self) -> int | None:
        """Events per run, when the duration is bounded."""
        return None if self.duration_s is None else round(self.rate_hz * self.duration_s)

    @property
    def nan_start_s(self) -> float:
        if self.nan_after_s is not None:
            return self.nan_after_s
        return self.duration_s / 2 if self.duration_s is not None else 10.0


def validate(spec: SimSpec) -> SimSpec:
    """The spec, or UsageError saying which option is wrong."""
    if spec.runs < 1:
        raise UsageError(f"--runs must be at least 1, got {spec.runs}")
    if not spec.rate_hz > 0 or math.isinf(spec.rate_hz):
        raise UsageError(f"--rate must be a positive number of events per second per run, got {spec.rate_hz}")
    if spec.duration_s is not None and spec.duration_s <= 0:
        raise UsageError(f"--duration must be positive, got {spec.duration_s}")
    if spec.ticks == 0:
        raise UsageError(f"--duration {spec.duration_s} at --rate {spec.rate_hz} is less than one event per run")
    if not 1 <= spec.processes <= spec.runs:
        raise UsageError(f"--processes must be between 1 and --runs ({spec.runs}), got {spec.processes}")
    if not 0.0 <= spec.nan_fraction <= 1.0:
        raise UsageError(f"--nan-fraction must be between 0 and 1, got {spec.nan_fraction}")
    if (spec.nan_after_s is not None and spec.nan_after_s < 0) or spec.nan_spread_s < 0:
        raise UsageError("--nan-after and --nan-spread must not be negative")
    try:
        check_run_name(run_name(spec, spec.runs - 1))
        check_run_name(shard_host(spec, spec.processes - 1))
    except EnvelopeError as exc:
        raise UsageError(f"--prefix / --host: {exc}") from None
    return spec


# -- the pure part: names, shards, schedule, events ----------------------------------------------


def run_name(spec: SimSpec, index: int) -> str:
    return f"{spec.prefix}-{index:05d}"


def shard_host(spec: SimSpec, shard: int) -> str:
    return spec.host if spec.processes == 1 else f"{spec.host}-p{shard}"


def shard_runs(spec: SimSpec, shard: int) -> list[str]:
    """The runs process `shard` publishes: every processes-th run."""
    return [run_name(spec, i) for i in range(shard, spec.runs, spec.processes)]


def nan_indices(runs: int, fraction: float) -> list[int]:
    """Which runs turn NaN: floor(runs * fraction) of them, spread evenly over the run numbers."""
    return [i for i in range(runs) if math.floor((i + 1) * fraction) > math.floor(i * fraction)]


def nan_onsets(spec: SimSpec) -> dict[str, float]:
    """Run -> seconds into the simulation from which its loss is NaN."""
    chosen = nan_indices(spec.runs, spec.nan_fraction)
    spread = spec.nan_spread_s / len(chosen) if chosen else 0.0
    return {run_name(spec, i): spec.nan_start_s + k * spread for k, i in enumerate(chosen)}


def due(elapsed_s: float, *, runs: int, rate_hz: float, total: int | None) -> int:
    """How many of a shard's events are due `elapsed_s` after its start (event g is due at g / (runs * rate))."""
    if elapsed_s < 0:
        return 0
    count = math.floor(elapsed_s * runs * rate_hz + 1e-9) + 1
    return count if total is None else min(count, total)


def metric_data(step: int, *, nan: bool) -> dict[str, Any]:
    """A healthy-looking training line as the agent's parser would report it (or loss=NaN)."""
    return {
        "step": step,
        "loss": math.nan if nan else round(2.0 + 1.5 / (1.0 + 0.01 * step) + 0.01 * ((step * 7) % 5), 6),
        "lr": 3e-4,
        "grad_norm": round(0.8 + 0.05 * ((step * 3) % 4), 4),
        "tokens_per_s": 12_000.0 + 10 * ((step * 5) % 7),
    }


@dataclass(slots=True)
class Shard:
    """One producer's runs and schedule; `events(sent, upto, wall)` builds events sent..upto-1."""

    spec: SimSpec
    index: int
    runs: list[str] = field(init=False)
    host: str = field(init=False)
    total: int | None = field(init=False)
    nan_from_step: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.runs = shard_runs(self.spec, self.index)
        self.host = shard_host(self.spec, self.index)
        ticks = self.spec.ticks
        self.total = None if ticks is None else ticks * len(self.runs)
        onsets = nan_onsets(self.spec)
        rate = self.spec.rate_hz
        self.nan_from_step = {run: math.ceil(onsets[run] * rate - 1e-9) for run in self.runs if run in onsets}

    @property
    def rate(self) -> float:
        """Events per second this shard is asked for."""
        return len(self.runs) * self.spec.rate_hz

    def due(self, elapsed_s: float) -> int:
        return due(elapsed_s, runs=len(self.runs), rate_hz=self.spec.rate_hz, total=self.total)

    def due_at(self, g: int) -> float:
        return g / self.rate

    def events(self, sent: int, upto: int, wall: float) -> list[Event]:
        n = len(self.runs)
        out = []
        for g in range(sent, upto):
            run, step = self.runs[g % n], g // n
            nan_from = self.nan_from_step.get(run)
            out.append(make_event(
                t.METRIC, run=run, host=self.host, producer=f"{self.host}/log/{run}/g{self.spec.generation}",
                seq=step + 1, data=metric_data(step, nan=nan_from is not None and step >= nan_from), ts=wall,
            ))  # fmt: skip
        return out


# -- one producer: the paced loop ---------------------------------------------------------------


@dataclass(slots=True)
class Progress:
    """What a producer has done so far; shared with the parent through `publish`."""

    sent: int = 0
    stored: int = 0
    duplicates: int = 0
    behind_s: float = 0.0  # how late the oldest unsent event was at the last flush
    max_behind_s: float = 0.0
    elapsed_s: float = 0.0


class Producer:
    """Publishes one shard's events on schedule through the agent's publisher.

    `clock` (monotonic seconds), `wall` (event timestamps) and `sleep` are injected so a test can
    drive the schedule without waiting; `on_flush` sees the progress after each flush.
    """

    def __init__(
        self,
        shard: Shard,
        publisher: Publisher,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], Any] = time.sleep,
        on_flush: Callable[[Progress], None] | None = None,
    ) -> None:
        self.shard = shard
        self.publisher = publisher
        self.clock = clock
        self.wall = wall
        self.sleep = sleep
        self.on_flush = on_flush
        self.progress = Progress()

    def run(self, *, start: float | None = None, stop: Callable[[], bool] = lambda: False) -> Progress:
        """Publish until the shard's events are all sent (or `stop()`); `start` is a `clock()` time."""
        start = self.clock() if start is None else start
        interval = self.shard.spec.flush_interval_s
        delay = start - self.clock()
        if delay > 0:
            self.sleep(delay)
        p = self.progress
        tick = 0
        while True:
            finished = stop()
            now = self.clock()
            upto = self.shard.due(now - start)
            if upto > p.sent:
                p.behind_s = max(0.0, now - start - self.shard.due_at(p.sent))
                p.max_behind_s = max(p.max_behind_s, p.behind_s)
                self.publisher.publish(self.shard.events(p.sent, upto, self.wall()))
                self.publisher.flush()
                p.sent = upto
                p.stored, p.duplicates = self.publisher.appended, self.publisher.duplicates
            else:
                p.behind_s = 0.0
            p.elapsed_s = self.clock() - start
            if self.on_flush is not None:
                self.on_flush(p)
            if finished or (self.shard.total is not None and p.sent >= self.shard.total):
                return p
            tick = max(tick + 1, math.floor((self.clock() - start) / interval) + 1)
            pause = start + tick * interval - self.clock()
            if pause > 0:
                self.sleep(pause)


# -- several processes, progress lines ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Report:
    spec: SimSpec
    sent: int
    stored: int
    duplicates: int
    elapsed_s: float
    max_behind_s: float

    @property
    def asked_eps(self) -> float:
        return self.spec.runs * self.spec.rate_hz

    @property
    def achieved_eps(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


def progress_line(*, elapsed_s: float, interval_eps: float, asked_eps: float, sent: int, behind_s: float) -> str:
    line = (f"[{elapsed_s:6.1f}s] {interval_eps:10,.0f} events/s (asked {asked_eps:,.0f}/s), {sent:,} sent, "
            f"behind {behind_s:.2f}s")  # fmt: skip
    if behind_s > BEHIND_WARN_S:
        line += " -- falling behind: more --processes, or a lower --rate"
    return line


def summary_line(report: Report) -> str:
    s = report.spec
    text = (f"simulated {s.runs:,} runs x {s.rate_hz:g} Hz over {s.processes} process(es): {report.sent:,} events in "
            f"{report.elapsed_s:.1f}s = {report.achieved_eps:,.0f} events/s (asked {report.asked_eps:,.0f}/s); "
            f"stored {report.stored:,}, duplicates {report.duplicates:,}; "
            f"at most {report.max_behind_s:.2f}s behind")  # fmt: skip
    if report.max_behind_s > BEHIND_WARN_S:
        text += " -- it fell behind the schedule: more --processes, or a lower --rate"
    return text


@dataclass(frozen=True, slots=True)
class _Job:
    """What a producer process is given (picklable: processes are spawned)."""

    spec: SimSpec
    index: int
    redis_url: str
    namespace: str
    start_wall: float  # wall-clock time all shards start at


def _child(job: _Job, counters: Any, stop: Any) -> None:
    """A producer process: publish its shard, mirror progress into the shared counters."""
    local_stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: local_stop.set())
    client = events_redis_at(job.redis_url)  # one Redis or a Redis Cluster, as the daemons connect
    shard = Shard(job.spec, job.index)
    publisher = Publisher(EventStore(client, keys=Keys(job.namespace)))

    def mirror(p: Progress) -> None:
        counters[0], counters[1], counters[2] = p.sent, p.stored, p.duplicates
        counters[3], counters[4], counters[5] = p.behind_s, p.max_behind_s, p.elapsed_s

    producer = Producer(shard, publisher, on_flush=mirror)
    start = time.monotonic() + (job.start_wall - time.time())
    producer.run(start=start, stop=lambda: local_stop.is_set() or stop.is_set())


def simulate(
    spec: SimSpec,
    *,
    redis_url: str,
    namespace: str = "tw",
    report_interval_s: float = DEFAULT_REPORT_INTERVAL_S,
    out: TextIO = sys.stdout,
    stop: threading.Event | None = None,
) -> Report:
    """Run every shard in its own process and print progress every `report_interval_s`."""
    validate(spec)
    if spec.generation == 0:
        spec = replace(spec, generation=int(time.time()))
    ctx = mp.get_context("spawn")
    stop_all = ctx.Event()
    start_wall = time.time() + START_DELAY_S + 0.2 * spec.processes
    counters = [ctx.Array("d", 6, lock=False) for _ in range(spec.processes)]
    procs = [
        ctx.Process(
            target=_child,
            args=(_Job(spec, i, redis_url, namespace, start_wall), counters[i], stop_all),
            name=f"simulate-{i}",
            daemon=True,
        )
        for i in range(spec.processes)
    ]
    for proc in procs:
        proc.start()
    stop = stop or threading.Event()
    asked = spec.runs * spec.rate_hz
    last_sent, last_at = 0, start_wall
    try:
        while any(proc.is_alive() for proc in procs):
            if stop.wait(0.1):
                stop_all.set()
            now = time.time()
            if now - last_at >= report_interval_s and now > start_wall:
                sent = sum(int(c[0]) for c in counters)
                behind = max(c[3] for c in counters)
                out.write(progress_line(elapsed_s=now - start_wall, interval_eps=(sent - last_sent) / (now - last_at),
                                        asked_eps=asked, sent=sent, behind_s=behind) + "\n")  # fmt: skip
                out.flush()
                last_sent, last_at = sent, now
    finally:
        stop_all.set()
        for proc in procs:
            proc.join(timeout=30)
    failed = [proc.name for proc in procs if proc.exitcode != 0]
    if failed:
        raise SimulateError(f"producer process(es) {', '.join(failed)} failed; see their errors above")
    return Report(
        spec=spec,
        sent=sum(int(c[0]) for c in counters),
        stored=sum(int(c[1]) for c in counters),
        duplicates=sum(int(c[2]) for c in counters),
        elapsed_s=max(c[5] for c in counters),
        max_behind_s=max(c[4] for c in counters),
    )


def spec_from_args(args: Any) -> SimSpec:
    fraction = args.nan_fraction
    if fraction is None:
        fraction = 1.0 if args.nan_after is not None else 0.0
    return validate(SimSpec(
        runs=args.runs, rate_hz=args.rate, duration_s=args.duration, processes=args.processes, nan_fraction=fraction,
        nan_after_s=args.nan_after, nan_spread_s=args.nan_spread, prefix=args.prefix, host=args.host,
    ))  # fmt: skip


def add_arguments(s: Any) -> None:
    s.add_argument("--runs", type=int, required=True, help="how many runs")
    s.add_argument("--rate", type=float, required=True, help="metric events per second per run")
    s.add_argument("--duration", type=float, help="seconds to run (default: until Ctrl-C); runs x rate x duration "
                   "events are published")  # fmt: skip
    s.add_argument("--processes", type=int, default=1, help="producer processes, each one host (default 1)")
    s.add_argument("--nan-fraction", type=float, help="share of runs whose loss turns NaN (default 0; all runs "
                   "with --nan-after alone)")  # fmt: skip
    s.add_argument("--nan-after", type=float, help="seconds in at which the loss turns NaN (default: half the "
                   "duration, or 10)")  # fmt: skip
    s.add_argument("--nan-spread", type=float, default=0.0, help="spread the NaN onsets over this many seconds")
    s.add_argument("--prefix", default="sim", help="run names are PREFIX-00000, PREFIX-00001, ...")
    s.add_argument("--host", default="sim", help="host name of the producers (HOST-pN with several processes)")
    s.add_argument("--report-every", type=float, default=DEFAULT_REPORT_INTERVAL_S, help="seconds between progress "
                   "lines")  # fmt: skip


def main_args(args: Any, *, redis_url: str, namespace: str, stop: threading.Event) -> int:
    report = simulate(spec_from_args(args), redis_url=redis_url, namespace=namespace,
                      report_interval_s=args.report_every, stop=stop)  # fmt: skip
    print(summary_line(report))
    return 0
