"""End to end: a NaN line written into a live training log -> metric event, STOP decision, stop
done in tmux, and the Slack notification, with real processes.

A private redis-server; `trainwarden agent`, `dispatcher`, `worker` and `bot` (HTTP mode, its
WebClient pointed at the tests' local Slack Web API server) as separate processes; K runs in
real tmux sessions whose logs this script appends healthy metric lines to, 10 per second each.
Each injection writes `loss=nan` into one run's log and waits for the run to be stopped, then
relaunches it. Times are from the write to: (a) the metric entry in Redis (its stream id is
Redis's clock), (b) the STOP decision entry, (c) the stop.done entry (tmux session gone),
(d) chat.postMessage of the STOP arriving at the Slack server. Target: (b) p99 <= 1 s.

`--background N` adds N synthetic runs sending one metric event a second each, published by `trainwarden simulate`
(the agent's publisher and append script, as bench/load.py does) from before the first injection to the end, so the
same path is timed while the dispatcher and the workers (`--workers`) also carry a lab's load.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from harness import percentile, private_redis, sid_seconds
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.keys import Keys
from trainwarden.events.store import EventStore
from trainwarden.remote.local_launch import LaunchSpec, launch_local
from trainwarden.remote.stop import tmux_argv

from tests.slack_api import SlackAPI
from trainwarden.tools.redis_server import free_port

SOCKET = f"tw-e2e-{os.getpid()}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--injections", type=int, default=200)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--background", type=int, default=0, metavar="N", help="synthetic runs at 1 Hz alongside")
    p.add_argument("--workers", type=int, default=1, help="trainwarden worker processes")
    p.add_argument("--deadline", type=float, default=20.0, help="seconds an injection may take before the bench fails")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds of background load before the first injection")
    args = p.parse_args()
    runs = [f"e2e-{i:02d}" for i in range(args.runs)]
    api = SlackAPI()
    perf_to_wall = time.time() - time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tw-e2e-") as d, private_redis() as server:
        work = Path(d)
        store = EventStore(server.client(), keys=Keys())
        logs = {run: work / f"{run}.log" for run in runs}
        config = work / "trainwarden.yaml"
        config.write_text(yaml.safe_dump({
            "redis_url": server.url, "host": "bench", "data_dir": str(work), "evidence_dir": str(work / "evidence"),
            "findings_file": str(work / "findings.md"),
            "agent": {"state_file": str(work / "offsets.json"), "poll_interval_s": 0.02,
                      "watch": [{"run": run, "log": str(log)} for run, log in logs.items()]},
            "slack": {"channel": "C1", "rate_per_s": 1000, "burst": 1000, "http_host": "127.0.0.1",
                      "http_port": free_port()},
        }))  # fmt: skip
        env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-bench", "SLACK_SIGNING_SECRET": "bench-secret",
               "SLACK_API_URL": api.url}  # fmt: skip
        level = os.environ.get("E2E_LOG_LEVEL", "WARNING")
        procs = []
        commands = [("agent", ["agent"]), ("dispatcher", ["dispatcher"]), ("bot", ["bot"])]
        commands += [(f"worker{i}", ["worker"]) for i in range(args.workers)]
        if args.background:
            commands.append(("simulate", ["simulate", "--runs", str(args.background), "--rate", "1", "--prefix", "bg",
                                          "--host", "sim", "--report-every", "10"]))  # fmt: skip
        for name, command in commands:
            with open(work / f"{name}.log", "wb") as sink:
                argv = [sys.executable, "-m", "trainwarden", "--config", str(config), "--log-level", level, *command]
                procs.append(subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                              start_new_session=True))  # fmt: skip
        stop_writing = threading.Event()
        lock = threading.Lock()
        steps = dict.fromkeys(runs, 0)

        def write(run: str, loss: str) -> float:
            with lock:
                steps[run] += 1
                with open(logs[run], "a") as f:
                    f.write(f"step={steps[run]} loss={loss} lr=3e-4\n")
                    f.flush()
                    return time.time()

        def healthy() -> None:
            rng = random.Random(0)
            while not stop_writing.wait(0.1):
                for run in runs:
                    write(run, f"{2.0 + rng.random():.4f}")

        def launch(run: str) -> Event:
            spec = LaunchSpec(run=run, command=("sleep", "600"), workdir=work, log_path=logs[run], tmux_socket=SOCKET)
            return launch_local(spec, store=store, host="bench")

        try:
            current = {run: launch(run) for run in runs}
            for run in runs:
                write(run, "2.5")
            threading.Thread(target=healthy, daemon=True).start()
            time.sleep(max(2.0, args.warmup if args.background else 0.0))  # every process up, the load steady
            a, b, c, n = [], [], [], []
            posted: list[tuple[str, float]] = []  # (decision id, t0): notifications looked up at the end
            rng = random.Random(1)
            for i in range(args.injections):
                run = rng.choice(runs)
                launched = current[run]
                t0 = write(run, "nan")
                deadline = time.monotonic() + args.deadline
                found: dict[str, float] = {}
                wanted = {"metric", "decision", "done"}  # the notification is not waited for: a notifier behind
                while time.monotonic() < deadline and not wanted <= found.keys():
                    for sid, e in store.iter_run(run, after=None, start=f"{int(launched.ts * 1000)}-0"):
                        if not isinstance(e, Event):
                            continue
                        if "metric" not in found and e.type == t.METRIC and str(e.data.get("loss")) == "nan":
                            found["metric"] = sid_seconds(sid)
                        elif "decision" not in found and e.type == t.DECISION and e.data.get("decision") == "STOP":
                            found["decision"] = sid_seconds(sid)
                            found["decision_id"] = e.id  # type: ignore[assignment]
                        elif "done" not in found and e.type == t.STOP_DONE:
                            found["done"] = sid_seconds(sid)
                    time.sleep(0.005)  # (the load's feed) would hold up every injection; (d) is read at the end
                if not wanted <= found.keys():
                    tails = {name: (work / f"{name}.log").read_text()[-800:] for name, _ in commands}
                    raise SystemExit(f"injection {i} into {run}: only {sorted(found)} within {args.deadline:g} s; "
                                     f"logs: {tails}")  # fmt: skip
                current[run] = launch(run)  # the run was stopped: launch it again for a later injection
                time.sleep(0.2)  # a little healthy history for the new launch
                a.append(found["metric"] - t0)
                b.append(found["decision"] - t0)
                c.append(found["done"] - t0)
                posted.append((str(found["decision_id"]), t0))
                if (i + 1) % 50 == 0:
                    print(f"  {i + 1}/{args.injections} injections", file=sys.stderr)
            simulated = (work / "simulate.log").read_text().strip().splitlines()[-1:] if args.background else []
            settle = time.monotonic() + args.deadline  # the notifications still on their way
            while time.monotonic() < settle and not all(key in api.post_times for key, _ in posted):
                time.sleep(0.1)
            n = [api.post_times[key] + perf_to_wall - t0 for key, t0 in posted if key in api.post_times]
        finally:
            stop_writing.set()
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=20)
            subprocess.run(tmux_argv(SOCKET, "kill-server"), capture_output=True, check=False)
            api.close()
    load = f", {args.background} background runs at 1 Hz" if args.background else ""
    print(f"e2e latency: {len(b)} NaN injections into {args.runs} live runs{load} (real agent, dispatcher, "
          f"{args.workers} RQ worker(s), bot)")  # fmt: skip
    for last in simulated:
        print(f"  simulate: {last.strip()}")
    for label, values in (("(a) metric event in Redis", a), ("(b) STOP decision", b),
                          ("(c) stop done (tmux session gone)", c), ("(d) Slack notification", n)):  # fmt: skip
        ms = [1000 * v for v in values] or [math.nan]
        count = "" if len(values) == len(b) else f"   ({len(values)} of {len(b)} arrived within the deadline)"
        print(f"  {label:36} p50 {statistics.median(ms):7.1f} ms   p99 {percentile(ms, 0.99):7.1f} ms{count}")
    print(f"  target: STOP decision p99 <= 1000 ms: {'met' if percentile(b, 0.99) <= 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
