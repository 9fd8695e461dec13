"""Scaling out, as docs/operations.md ("Scaling out") lays it out, with real processes on a real 3-master Redis Cluster.

Producers on three "GPU hosts" (`trainwarden simulate --host`, the agent's publisher and append script), two
dispatchers sharing the feed's consumer group, three workers as if on three central hosts (`TRAINWARDEN_HOST`),
RQ's queue on its own Redis. One worker is killed with kill -9 right after a commit, mid-load: its job is
dispatched again, every run is still evaluated, the NaN run is stopped once, and every run's checkpoint is what a
replay of its log gives.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.feed import DISPATCH_GROUP
from trainwarden.events.projection import fold
from trainwarden.events.store import EventStore
from trainwarden.policies.default import default_policy
from trainwarden.workers.checkpoint import decode_checkpoint
from trainwarden.workers.evaluate import evaluator_producer
from trainwarden.workers.verify import verify_run

from tests.conftest import REPO, cli_argv, spawn, stop_process
from tests.helpers import events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

GPU_HOSTS = ("gpu-a", "gpu-b", "gpu-c")  # one `trainwarden simulate` each, as one agent per GPU server
WORKER_HOSTS = ("central-1", "central-2", "central-3")  # central-3's worker is the one killed
RUNS_PER_HOST, RATE_HZ, DURATION_S = 8, 4.0, 6.0
EVENTS_PER_RUN = int(RATE_HZ * DURATION_S)


def simulate(settings: Path, log: Path, host: str, *extra: str) -> subprocess.Popen[bytes]:
    """One producer host: its runs are `{host}-00000` ... (the prefix is the host), its events the agent's."""
    with open(log, "ab") as sink:
        return subprocess.Popen(
            cli_argv(settings, "simulate", "--runs", str(RUNS_PER_HOST), "--rate", str(RATE_HZ), "--duration",
                     str(DURATION_S), "--host", host, "--prefix", host, "--report-every", "1", *extra),
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO,
        )  # fmt: skip


def metrics_folded(store: EventStore, runs: list[str]) -> int:
    pipe = store.redis.pipeline(transaction=False)
    for run in runs:
        pipe.hgetall(store.keys.cursor(run))
    return sum(decode_checkpoint(fields).run.type_counts.get(t.METRIC, 0) for fields in pipe.execute())


def test_three_masters_two_dispatchers_three_workers_one_killed(
    cstore, cluster, r: redis.Redis, redis_server, tmp_path: Path
):
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": cluster.url, "rq_redis_url": redis_server.url,
        "host": "central", "queue": "tw-topology", "evidence_dir": str(tmp_path / "evidence"),
        "findings_file": str(tmp_path / "findings.md"), "workers": {"reclaim_idle_s": 1, "lock_timeout_s": 2},
    }))  # fmt: skip
    runs = [f"{host}-{i:05d}" for host in GPU_HOSTS for i in range(RUNS_PER_HOST)]
    nan_run = f"{GPU_HOSTS[0]}-00007"  # --nan-fraction 1/8 of 8 runs turns the last one NaN
    keys = cstore.keys
    assert len({cstore.redis.get_node_from_key(keys.log(run)).name for run in runs}) == 3, "runs on every master"

    central = [
        spawn(settings, tmp_path / "dispatcher-1.log", "dispatcher", env={"TRAINWARDEN_HOST": WORKER_HOSTS[0]}),
        spawn(settings, tmp_path / "dispatcher-2.log", "dispatcher", env={"TRAINWARDEN_HOST": WORKER_HOSTS[1]}),
        *(spawn(settings, tmp_path / f"worker-{host}.log", "worker", env={"TRAINWARDEN_HOST": host})
          for host in WORKER_HOSTS[:2]),
    ]  # fmt: skip
    doomed = spawn(settings, tmp_path / "worker-doomed.log", "worker",
                   env={"TRAINWARDEN_HOST": WORKER_HOSTS[2], "TRAINWARDEN_FAILPOINTS": "after-commit"})  # fmt: skip
    producers = []
    try:
        # every consumer of the load is up before it starts, so the doomed worker meets it
        wait_for(lambda: all(cstore.redis.exists(keys.beat(f"worker@{host}")) for host in WORKER_HOSTS), timeout=60,
                 what="the three workers' heartbeats")  # fmt: skip
        producers = [
            simulate(settings, tmp_path / f"sim-{host}.log", host,
                     *(["--nan-fraction", "0.125", "--nan-after", "3"] if host == GPU_HOSTS[0] else []))
            for host in GPU_HOSTS
        ]  # fmt: skip
        frozen = int(wait_for(lambda: cstore.redis.get(keys.fault("after-commit")), timeout=60,
                              what="the doomed worker frozen after a commit"))  # fmt: skip
        os.kill(frozen, 9)
        os.killpg(doomed.pid, 9)
        doomed.wait()
        assert all(p.poll() is None for p in producers), "killed mid-load: the producers are still publishing"
        for host, p in zip(GPU_HOSTS, producers, strict=True):
            assert p.wait(timeout=120) == 0, (tmp_path / f"sim-{host}.log").read_text()
        wait_for(lambda: metrics_folded(cstore, runs) == len(runs) * EVENTS_PER_RUN, timeout=120,
                 what="every published metric event evaluated")  # fmt: skip
        wait_for(lambda: events_of(cstore, nan_run, t.STOP_FAILED) or events_of(cstore, nan_run, t.STOP_DONE),
                 timeout=60, what="the NaN run's stop carried out")  # fmt: skip
        wait_for(lambda: cstore.redis.xpending(keys.feed(), DISPATCH_GROUP)["pending"] == 0, timeout=60,
                 what="every feed entry acknowledged")  # fmt: skip
    finally:
        for p in [*producers, *central, doomed]:
            stop_process(p)
        for log in sorted(tmp_path.glob("*.log")):
            print(f"--- {log.name} (tail)\n" + log.read_text(errors="replace")[-1500:])

    consumers = {c["name"] for c in cstore.redis.xinfo_consumers(keys.feed(), DISPATCH_GROUP)}
    assert len({name.decode() for name in consumers if name.startswith(b"dispatcher-")}) == 2, consumers

    policy = default_policy()
    outputs_by_host: set[str] = set()
    for run in runs:
        entries = list(cstore.iter_run(run))
        events = [e for _, e in entries if isinstance(e, Event)]
        assert len(events) == len(entries), f"{run}: nothing undecodable"
        assert [e.seq for e in events if e.type == t.METRIC] == list(range(1, EVENTS_PER_RUN + 1)), run
        stops = [e for e in events if e.type == t.DECISION and e.data["decision"] == t.STOP]
        if run == nan_run:
            assert [e.data["rule"] for e in stops] == ["loss-nonfinite"]
            assert sum(e.type == t.STOP_REQUESTED for e in events) == 1
            assert sum(e.type in (t.STOP_DONE, t.STOP_FAILED) for e in events) == 1
        else:
            assert stops == [], run
        # the checkpoint is what a replay of the log gives: read to its end, the same run state, the same outputs
        cp = decode_checkpoint(cstore.redis.hgetall(keys.cursor(run)))
        assert cp.after == entries[-1][0], run
        assert cp.run.to_dict() == fold(events).to_dict(), run
        verified = verify_run(run, entries, {policy.hash: policy}.__getitem__)
        assert verified.ok and verified.decisions >= 1, (run, [d.describe() for d in verified.differences])
        outputs_by_host |= {e.host for e in events if e.producer == evaluator_producer(run)}
    # the killed worker's commit stands (once: verified above); the survivors did the rest
    assert WORKER_HOSTS[2] in outputs_by_host and len(outputs_by_host) >= 2, outputs_by_host
    assert outputs_by_host <= set(WORKER_HOSTS), outputs_by_host
