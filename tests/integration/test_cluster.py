"""The event log and the worker path on a real 3-master Redis Cluster (RQ on its own Redis)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.cluster import RedisCluster
from rq import SimpleWorker
from trainwarden.core.errors import ConfigError
from trainwarden.events import types as t
from trainwarden.events.feed import DISPATCH_GROUP, GroupReader, parse_feed_entry
from trainwarden.events.run_view import run_states
from trainwarden.events.store import EventStore
from trainwarden.ops import status
from trainwarden.ops.runs import rows
from trainwarden.remote.stop import LocalTmuxController
from trainwarden.workers import context
from trainwarden.workers.context import WorkerContext
from trainwarden.workers.dispatcher import Dispatcher
from trainwarden.workers.lanes import lanes
from trainwarden.workers.policy_source import PolicySource

from tests.helpers import events_of, metric, nan_metric
from trainwarden import wiring
from trainwarden.settings import Settings
from trainwarden.tools.redis_server import RedisClusterServers

pytestmark = pytest.mark.redis

RUNS = [f"exp{i:02d}" for i in range(24)]


def node_of(client: RedisCluster, key: str) -> str:
    return client.get_node_from_key(key).name


def test_a_runs_keys_share_one_slot_and_runs_spread_over_the_masters(cstore: EventStore):
    k, client = cstore.keys, cstore.redis
    for run in RUNS:
        slots = {client.keyslot(key) for key in (k.log(run), k.hwm(run), k.cursor(run), k.outbox(run), k.notify(run))}
        assert len(slots) == 1, run
    assert len({node_of(client, k.log(run)) for run in RUNS}) == 3


def test_appends_reads_duplicates_and_the_feed_work_unchanged(cstore: EventStore):
    batch = [metric(run, seq, step=seq, loss=1.0 / seq) for seq in range(1, 11) for run in RUNS]
    ids = cstore.append(batch)
    assert ids is not None and all(ids) and len(ids) == len(batch)
    assert cstore.append(batch) == [None] * len(batch)  # a retried batch is stored once
    assert cstore.append_count([*batch[:5], nan_metric("exp00", 11)]) == 1

    for run in RUNS:
        assert [e.seq for e in events_of(cstore, run)] == list(range(1, 11)) + ([11] if run == "exp00" else [])
    assert math.isnan(events_of(cstore, "exp00")[-1].data["loss"])
    assert {run for run, _ in cstore.runs()} == set(RUNS)
    assert not list(cstore.redis.scan_iter(match=cstore.keys.outbox_pattern())), "outboxes carried out"

    reader = GroupReader(cstore.redis, stream=cstore.keys.feed(), group=DISPATCH_GROUP, consumer="c1")
    reader.ensure_group()
    entries = [parse_feed_entry(fid, fields) for fid, fields in reader.read(count=1000)]
    assert {e.run for e in entries} == set(RUNS)
    assert len(entries) == len(RUNS) + 1  # one per run and batch that stored something


def test_writes_a_dead_writer_left_in_an_outbox_are_carried_out_by_the_sweep(cstore: EventStore):
    run = "exp03"
    pipe = cstore.redis.pipeline(transaction=True)  # a commit like the worker's, then "dies" before flushing
    cstore.append([metric(run, 1, loss=1.0)], pipeline=pipe)
    cstore.shared(pipe, run, "ZADD", cstore.keys.schedule(), "123.5", run)
    cstore.dead_letter(source="x", sid="1-0", reason="garbage", fields={b"e": b"?"}, pipeline=pipe, run=run)
    pipe.execute()
    assert cstore.length(run) == 1
    assert cstore.redis.xlen(cstore.keys.feed()) == 0 and cstore.runs() == []

    assert cstore.outbox.sweep() == 3
    assert cstore.redis.xlen(cstore.keys.feed()) == 1
    assert [name for name, _ in cstore.runs()] == [run]
    assert cstore.redis.zscore(cstore.keys.schedule(), run) == 123.5
    assert [d.reason for d in cstore.dead_letters()] == ["garbage"]
    assert cstore.outbox.sweep() == 0  # carried out once, then gone


@pytest.fixture
def cluster_ctx(cstore: EventStore, tmp_path: Path) -> Iterator[WorkerContext]:
    ctx = WorkerContext(store=cstore, host="worker-test", policies=PolicySource(host="worker-test"),
                        controller=LocalTmuxController(), evidence_dir=tmp_path / "evidence",
                        findings_file=tmp_path / "findings.md", lock_timeout_s=2.0)  # fmt: skip
    context.install(ctx)
    yield ctx
    context.install(None)


def test_nan_to_stop_on_the_cluster_with_rq_on_its_own_redis(cstore: EventStore, cluster_ctx, r, tmp_path):
    from rq import Queue

    queue = Queue("tw-cluster", connection=r)
    dispatcher = Dispatcher(store=cstore, queue=queue, consumer="d1")
    dispatcher.setup()
    runs = RUNS[:6]
    cstore.append([metric(run, seq, step=seq, loss=2.0 - seq / 100) for run in runs for seq in range(1, 6)])
    cstore.append([nan_metric("exp04", 6)])
    dispatcher.run(burst=True)
    assert dispatcher.enqueued == 4  # the NaN run's fast job, and the five others in jobs of 2, 2 and 1
    SimpleWorker(lanes(queue), connection=r).work(burst=True)

    stops = [e for e in events_of(cstore, "exp04", t.DECISION) if e.data["decision"] == t.STOP]
    assert len(stops) == 1 and "loss" in stops[0].data["reason"]
    assert all(e.data["decision"] == t.CONTINUE for run in runs if run != "exp04"
               for e in events_of(cstore, run, t.DECISION))  # fmt: skip
    assert events_of(cstore, "exp04", t.STOP_REQUESTED)
    assert GroupReader(cstore.redis, stream=cstore.keys.feed(), group=DISPATCH_GROUP, consumer="d1").pending() == 0
    assert not list(cstore.redis.scan_iter(match=cstore.keys.outbox_pattern()))
    # the workers' outputs reached the feed (the notifier reads them there)
    reader = GroupReader(cstore.redis, stream=cstore.keys.feed(), group="probe", consumer="p")
    reader.ensure_group()
    types = set().union(*(parse_feed_entry(fid, f).types for fid, f in reader.read(count=1000) if f))
    assert {t.DECISION, t.STOP_REQUESTED} <= types


def test_rq_refuses_the_cluster_and_says_what_to_set(cluster: RedisClusterServers):
    with pytest.raises(ConfigError, match="RQ_REDIS_URL"):
        wiring.rq_redis(Settings(redis_url=cluster.url))
    assert wiring.rq_redis(Settings(redis_url=cluster.url, rq_redis_url="redis://127.0.0.1:1/0")) is not None


@pytest.mark.tmux
@pytest.mark.slow
def test_real_processes_stop_a_nan_run_with_events_on_the_cluster(cstore, cluster, redis_server, tmp_path, tmux_socket):
    """agent, dispatcher, RQ worker and the console bot as processes: events on the cluster, RQ on one Redis."""
    import sys

    import yaml
    from trainwarden.remote.local_launch import LaunchSpec, launch_local

    from tests.conftest import REPO, spawn, stop_process
    from tests.helpers import wait_for

    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": cluster.url, "rq_redis_url": redis_server.url, "host": "testhost", "queue": "tw-cluster-e2e",
        "evidence_dir": str(tmp_path / "evidence"), "findings_file": str(tmp_path / "findings.md"),
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.02},
        "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }))  # fmt: skip
    log = tmp_path / "train.log"
    train = (sys.executable, "-m", "trainwarden.tools.demo_train", "--nan-at", "8", "--interval", "0.05")
    spec = LaunchSpec(run="exp01", workdir=REPO, log_path=log, tmux_socket=tmux_socket, command=train)
    launch_local(spec, store=cstore, host="testhost")
    procs = [
        spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"exp01={log}"),
        spawn(settings, tmp_path / "dispatcher.log", "dispatcher"),
        spawn(settings, tmp_path / "worker.log", "worker"),
        spawn(settings, tmp_path / "bot.log", "bot"),
    ]
    try:
        wait_for(lambda: events_of(cstore, "exp01", t.STOP_DONE), timeout=60, what="stop.done")
        wait_for(lambda: "loss=nan at step 8" in (tmp_path / "bot.log").read_text(), timeout=30, what="notification")
    finally:
        for p in procs:
            stop_process(p)
    stops = [e for e in events_of(cstore, "exp01", t.DECISION) if e.data["decision"] == t.STOP]
    assert [(e.data["rule"], e.data["reason"]) for e in stops] == [("loss-nonfinite", "loss=nan at step 8")]
    assert len(events_of(cstore, "exp01", t.STOP_DONE)) == 1


def test_archive_and_replay_on_the_cluster(cstore: EventStore, cluster: RedisClusterServers, tmp_path: Path):
    import subprocess

    import yaml

    from tests.conftest import REPO, cli_argv

    settings = tmp_path / "tw.yaml"
    settings.write_text(yaml.safe_dump({"redis_url": cluster.url, "archive_dir": str(tmp_path / "arch")}))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cli_argv(settings, *args), capture_output=True, text=True, cwd=REPO, check=False,
                              timeout=120)  # fmt: skip

    cstore.append([metric("exp07", i, step=i, loss=math.nan if i == 30 else 1.0 / i) for i in range(1, 51)])
    before = cli("replay", "exp07", "--json")
    assert before.returncode == 0, before.stderr
    done = cli("archive", "exp07")
    assert done.returncode == 0, done.stdout + done.stderr
    assert cstore.length("exp07") == 0
    assert cli("replay", "exp07", "--json").stdout == before.stdout


def test_runs_reads_every_runs_view_in_pipelines_across_the_masters(cstore: EventStore):
    """`trainwarden runs` reads the views of runs on every master in one pipeline (the cluster splits it by slot)."""
    for run in RUNS:
        cstore.append([metric(run, 1, step=1, loss=1.0)])
    states = run_states(cstore, RUNS)
    assert {run: (s.status, s.step) for run, s in states.items()} == dict.fromkeys(RUNS, ("running", 1))
    assert {r.run: r.status for r in rows(cstore)} == dict.fromkeys(RUNS, "running")
    assert run_states(cstore, RUNS)[RUNS[0]].step == 1  # from the snapshots the first read saved


def test_simulate_publishes_to_the_cluster_from_each_producer_process(cstore: EventStore, cluster, tmp_path: Path):
    """`trainwarden simulate` with a cluster URL: each producer process connects to the cluster, as an agent does."""
    import subprocess

    import yaml

    from tests.conftest import REPO, cli_argv

    settings = tmp_path / "tw.yaml"
    settings.write_text(yaml.safe_dump({"redis_url": cluster.url}))
    argv = cli_argv(settings, "simulate", "--runs", "6", "--rate", "5", "--duration", "1", "--processes", "2",
                    "--prefix", "csim", "--host", "box")  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stored 30, duplicates 0" in done.stdout
    runs = [f"csim-{i:05d}" for i in range(6)]
    assert sorted(run for run, _ in cstore.runs()) == runs
    assert len({node_of(cstore.redis, cstore.keys.log(run)) for run in runs}) > 1
    for i, run in enumerate(runs):
        assert [(e.seq, e.host) for e in events_of(cstore, run, t.METRIC)] == [
            (s, f"box-p{i % 2}") for s in range(1, 6)
        ]


def test_status_reads_the_views_across_the_masters_and_saves_them_after_the_reply(cstore: EventStore):
    """/status's batched read on a cluster: pipelines split by slot, the moved views saved one call each (a cluster
    pipeline takes no EVAL), once the reply is out."""
    for run in RUNS:
        cstore.append([metric(run, 1, step=1, loss=1.0), metric(run, 2, step=2, loss=0.9)])
    later: list = []
    lines = status.overview(cstore, later=later).splitlines()
    assert [line.split(" ")[:2] for line in lines[:15]] == [[f"{run}@gpu1", "running"] for run in RUNS[:15]]
    assert lines[15:] == ["… and 9 more: /tw status RUN for one run"]
    assert not any(cstore.redis.exists(cstore.keys.view(run)) for run in RUNS)  # nothing written before the reply
    [save] = later
    save()
    lasts = [cstore.redis.xrevrange(cstore.keys.log(run), count=1)[0][0] for run in RUNS]
    assert [cstore.redis.hget(cstore.keys.view(run), "after") for run in RUNS] == lasts
