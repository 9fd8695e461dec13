"""`trainwarden simulate` publishes exactly runs x rate x duration agent-like events, on a schedule."""

import math
import subprocess

import pytest
from rq import Queue, SimpleWorker
from trainwarden.agent.publisher import Publisher
from trainwarden.events import types as t
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.lanes import lanes

from tests.conftest import REPO, cli_argv
from tests.helpers import events_of
from trainwarden.tools.simulate import Producer, Shard, SimSpec

pytestmark = pytest.mark.redis


class FakeClock:
    """Monotonic time that only moves when the producer sleeps (or a slow flush moves it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def wall(self) -> float:
        return 1_800_000_000.0 + self.now


def produce(store, spec: SimSpec, *, shard: int = 0, publisher: Publisher | None = None, clock=None):
    clock = clock or FakeClock()
    producer = Producer(Shard(spec, shard), publisher or Publisher(store), clock=clock, wall=clock.wall,
                        sleep=clock.sleep)  # fmt: skip
    return producer.run(), clock


def test_runs_x_rate_x_duration_events_of_the_asked_runs(store):
    spec = SimSpec(runs=7, rate_hz=3, duration_s=4, prefix="load", host="gpu9", generation=5)
    progress, clock = produce(store, spec)
    assert progress.sent == progress.stored == 7 * 3 * 4
    assert progress.duplicates == 0
    assert clock.now < 4.0 + spec.flush_interval_s  # the last event is due before the duration ends
    assert sorted(run for run, _ in store.runs()) == [f"load-{i:05d}" for i in range(7)]
    for i in range(7):
        run = f"load-{i:05d}"
        events = events_of(store, run)
        assert [e.type for e in events] == [t.METRIC] * 12
        assert [e.data["step"] for e in events] == list(range(12))
        assert {e.id.rpartition(":")[0] for e in events} == {f"gpu9/log/{run}/g5"}  # the agent's log producer
        assert all(e.host == "gpu9" and math.isfinite(e.data["loss"]) for e in events)


def test_a_slow_flush_is_caught_up_and_reported_as_behind(store):
    clock = FakeClock()

    class SlowPublisher(Publisher):
        def flush(self) -> int:
            clock.sleep(1.5)  # Redis (or this process) too slow for the schedule
            return super().flush()

    spec = SimSpec(runs=3, rate_hz=4, duration_s=5, generation=1)
    progress, _ = produce(store, spec, publisher=SlowPublisher(store), clock=clock)
    assert progress.sent == progress.stored == 3 * 4 * 5  # nothing dropped: later flushes carry more
    assert progress.max_behind_s >= 1.0


def test_nan_runs_are_stopped_by_the_policy(store, r, worker_ctx):
    spec = SimSpec(runs=4, rate_hz=2, duration_s=3, nan_fraction=0.5, nan_after_s=1.0, generation=1)
    produce(store, spec)
    queue = Queue("tw-test", connection=r)
    dispatcher = Dispatcher(store=store, queue=queue, consumer="d1")
    dispatcher.setup()
    dispatcher.run(burst=True)  # until the feed is quiet: runs gathered for a fuller job go out then
    SimpleWorker(lanes(queue), connection=r).work(burst=True, logging_level="WARNING")
    decided = {
        f"sim-{i:05d}": [d.data["decision"] for d in events_of(store, f"sim-{i:05d}", t.DECISION)] for i in range(4)
    }
    assert decided == {"sim-00000": [t.CONTINUE], "sim-00001": [t.CONTINUE, t.STOP],
                       "sim-00002": [t.CONTINUE], "sim-00003": [t.CONTINUE, t.STOP]}  # fmt: skip
    nan_steps = [e.data["step"] for e in events_of(store, "sim-00001", t.METRIC) if math.isnan(e.data["loss"])]
    assert nan_steps == [2, 3, 4, 5]  # from 1.0 s in at 2 Hz


@pytest.mark.slow
def test_the_command_spreads_runs_over_processes(store, settings_file):
    argv = cli_argv(settings_file, "simulate", "--runs", "6", "--rate", "5", "--duration", "1", "--processes", "2",
                    "--prefix", "cli", "--host", "box")  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    assert "30 events" in done.stdout and "stored 30, duplicates 0" in done.stdout
    assert sorted(run for run, _ in store.runs()) == [f"cli-{i:05d}" for i in range(6)]
    for i in range(6):
        events = events_of(store, f"cli-{i:05d}", t.METRIC)
        assert len(events) == 5
        assert {e.host for e in events} == {f"box-p{i % 2}"}  # each process publishes as its own host


def test_the_command_refuses_bad_options(settings_file):
    argv = cli_argv(settings_file, "simulate", "--runs", "3", "--rate", "1", "--processes", "4")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert done.returncode == 1
    assert "--processes must be between 1 and --runs (3), got 4" in done.stderr
