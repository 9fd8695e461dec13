"""A worker paused while first in Redis's BLPOP line (SIGSTOP, a VM pause, swap) swallows the fast-lane job of a
NaN: the dispatcher sees it taken and not begun, and the other worker stops the run in about a second; the
paused one, thawed, appends nothing twice. Issue #38 item 6 (before: the STOP came 49-57 s later, with the
reclaim of the feed entries, while the other worker sat idle)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
import yaml
from trainwarden.events import types as t
from trainwarden.events.store import EventStore

from tests.conftest import spawn, stop_process
from tests.helpers import evaluated_to_end, events_of, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

RUN = "exp01"
DECIDED_WITHIN_S = 15.0  # well under the reclaim of the feed entries (reclaim_idle_s, 30 s): only a re-dispatch


def blocked(r: redis.Redis) -> int:
    """How many clients wait in BLPOP: the workers waiting for a job."""
    return sum(1 for c in r.client_list() if c.get("cmd") == "blpop")


def workers(r: redis.Redis) -> dict[str, int]:
    """RQ worker name -> pid."""
    keys = [k.decode() for k in r.smembers("rq:workers")]
    return {k.removeprefix("rq:worker:"): int(r.hget(k, "pid") or 0) for k in keys}


def job_counts(r: redis.Redis, names: list[str]) -> dict[str, int]:
    return {name: int(r.hget(f"rq:worker:{name}", "successful_job_count") or 0) for name in names}


def test_a_worker_frozen_first_in_line_does_not_swallow_the_nan(redis_server, r: redis.Redis, store: EventStore,
                                                               tmp_path: Path) -> None:  # fmt: skip
    settings = tmp_path / "trainwarden.yaml"
    settings.write_text(yaml.safe_dump({
        "redis_url": redis_server.url, "host": "testhost", "evidence_dir": str(tmp_path / "evidence"),
        "findings_file": str(tmp_path / "findings.md"),
        "agent": {"state_file": str(tmp_path / "offsets.json"), "poll_interval_s": 0.02, "nvml": False},
    }))  # fmt: skip
    train_log = tmp_path / "train.log"
    train_log.write_text("step=1 loss=2.0\n")
    procs: dict[str, subprocess.Popen[bytes]] = {}
    frozen: subprocess.Popen[bytes] | None = None
    try:
        procs["dispatcher"] = spawn(settings, tmp_path / "dispatcher.log", "dispatcher")
        procs["worker1"] = spawn(settings, tmp_path / "worker1.log", "worker")
        procs["worker2"] = spawn(settings, tmp_path / "worker2.log", "worker")
        procs["agent"] = spawn(settings, tmp_path / "agent.log", "agent", "--watch", f"{RUN}={train_log}")
        wait_for(lambda: blocked(r) == 2 and len(workers(r)) == 2, timeout=120, what="both workers waiting for jobs")
        wait_for(lambda: evaluated_to_end(store, RUN), timeout=60, what="the first line evaluated")
        by_pid = {p.pid: name for name, p in procs.items()}

        # Which worker is first in line: a job goes to it, and it queues again behind the other. Healthy lines
        # until one job went to one worker alone; the other is then first.
        first = None
        for step in range(2, 40):
            wait_for(lambda: blocked(r) == 2, timeout=30, what="both workers waiting for jobs")
            line = workers(r)
            names = list(line)
            before = job_counts(r, names)
            done = sum(before.values())
            with open(train_log, "a") as f:
                f.write(f"step={step} loss={2.0 - step / 100}\n")
            wait_for(lambda names=names, done=done: evaluated_to_end(store, RUN) and blocked(r) == 2
                     and sum(job_counts(r, names).values()) > done, timeout=30, what="the line evaluated")  # fmt: skip
            took = [name for name, n in job_counts(r, names).items() if n > before[name]]
            if len(took) == 1:
                first = next(name for name in line if name != took[0])
                break
        assert first is not None, "could not tell which worker is first in the BLPOP line"
        frozen = procs[by_pid[line[first]]]
        os.kill(frozen.pid, signal.SIGSTOP)

        with open(train_log, "a") as f:
            f.write("step=99 loss=nan\n")
        written = time.time()
        began = time.monotonic()
        decisions = wait_for(lambda: [e for e in events_of(store, RUN, t.DECISION) if e.data["decision"] == "STOP"],
                             timeout=DECIDED_WITHIN_S, what="the NaN decided STOP by the other worker")  # fmt: skip
        latency = time.monotonic() - began
        print(f"MEASURED: NaN -> STOP with the worker first in line frozen: {latency:.2f}s "
              f"(decision ts - line written: {decisions[0].ts - written:.2f}s)")  # fmt: skip
        assert frozen.poll() is None

        os.kill(frozen.pid, signal.SIGCONT)
        frozen = None
        wait_for(lambda: blocked(r) == 2 and evaluated_to_end(store, RUN), timeout=60,
                 what="the thawed worker waiting for jobs again")  # fmt: skip
        time.sleep(2)  # a duplicate would be appended by now
        assert all(p.poll() is None for p in procs.values())
        stops = [e for e in events_of(store, RUN, t.DECISION) if e.data["decision"] == "STOP"]
        assert len(stops) == 1
        assert len(events_of(store, RUN, t.STOP_REQUESTED)) == 1
        assert len(events_of(store, RUN, t.STOP_DONE)) + len(events_of(store, RUN, t.STOP_FAILED)) <= 1
        assert "dispatching it again" in (tmp_path / "dispatcher.log").read_text()
    finally:
        if frozen is not None:
            os.kill(frozen.pid, signal.SIGCONT)
        for proc in procs.values():
            stop_process(proc)
        for name in procs:  # shown by pytest only when the test fails
            print(f"--- {name}.log (tail)\n" + (tmp_path / f"{name}.log").read_text(errors="replace")[-2500:])
