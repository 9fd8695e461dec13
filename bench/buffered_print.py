"""NaN -> STOP for a plain, block-buffered `print` loop under `trainwarden launch`, as a lab runs it.

Each trial launches, with launch_local in a private tmux server, a Python loop that prints
`step=N loss=X` every `--interval` s and a NaN at step `--nan-at`, and times from the NaN's print (the
loop writes its wall-clock time to a side file) to the STOP decision in the event log (its stream id is
Redis's clock, the same machine's clock). The real agent, dispatcher and RQ worker run as processes;
PYTHONUNBUFFERED is removed from every process's environment, tmux's server included.

Three variants, alternated trial by trial:
- `buffered`: plain `print`, under launch's own environment (remote/wrapper.py LAUNCH_ENV: PYTHONUNBUFFERED=1).
- `flushed`: the baseline, `print(..., flush=True)`: what a careful script does itself.
- `buffered-as-before`: plain `print` with the run's env saying `PYTHONUNBUFFERED=` (empty: Python buffers),
  which is what every launch did before LAUNCH_ENV. Its NaN reaches the log when the 8 KB buffer fills or the
  process exits: the loop's `--steps` bound that (`--before-trials` of them, each as long as its loop).
Target: `buffered` NaN -> STOP p99 <= 1 s, as `flushed`.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
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

SOCKET = f"tw-buffered-{os.getpid()}"
LOOP = """
import sys, time
flush = sys.argv[2] == "flushed"
for step in range(1, int(sys.argv[3]) + 1):
    print(f"step={step} loss={'nan' if step == int(sys.argv[4]) else 2.0 - step / 10000}", flush=flush)
    if step == int(sys.argv[4]):
        with open(sys.argv[1], "w") as f:
            f.write(repr(time.time()))
    time.sleep(float(sys.argv[5]))
"""


def trial(store: EventStore, work: Path, n: int, variant: str, args: argparse.Namespace) -> float | None:
    """Seconds from the NaN's print to the STOP decision; None when no STOP came while the loop ran."""
    run = f"buf-{n:03d}"
    printed = work / f"{run}.printed"
    steps = args.steps if variant == "buffered-as-before" else args.nan_at + int(args.deadline / args.interval)
    env = {"PYTHONUNBUFFERED": ""} if variant == "buffered-as-before" else {}
    command = (sys.executable, "-c", LOOP, str(printed), variant, str(steps), str(args.nan_at), str(args.interval))
    spec = LaunchSpec(run=run, command=command, workdir=work, log_path=work / f"{run}.log", tmux_socket=SOCKET, env=env)
    launched = launch_local(spec, store=store, host="bench")
    deadline = time.monotonic() + steps * args.interval + args.deadline
    while time.monotonic() < deadline:
        for sid, e in store.iter_run(run, after=None, start=f"{int(launched.ts * 1000)}-0"):
            if isinstance(e, Event) and e.type == t.DECISION and e.data.get("decision") == t.STOP:
                return sid_seconds(sid) - float(printed.read_text())
        time.sleep(0.01)
    subprocess.run(tmux_argv(SOCKET, "kill-session", "-t", f"=train-{run}"), capture_output=True, check=False)
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=10, help="trials of `buffered` and of `flushed` each")
    p.add_argument("--before-trials", type=int, default=2, help="trials of `buffered-as-before`")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between the loop's prints")
    p.add_argument("--nan-at", type=int, default=10, help="the step whose loss is NaN")
    p.add_argument("--steps", type=int, default=100, help="the `buffered-as-before` loop's length, in steps")
    p.add_argument("--deadline", type=float, default=10.0, help="seconds a STOP may take after the NaN's print")
    args = p.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    os.environ.pop("PYTHONUNBUFFERED", None)  # the tmux server that launch_local starts inherits this environment
    with tempfile.TemporaryDirectory(prefix="tw-buffered-") as d, private_redis() as server:
        work = Path(d)
        store = EventStore(server.client(), keys=Keys())
        config = work / "trainwarden.yaml"
        config.write_text(yaml.safe_dump({
            "redis_url": server.url, "host": "bench", "data_dir": str(work), "evidence_dir": str(work / "evidence"),
            "findings_file": str(work / "findings.md"),
            "agent": {"state_file": str(work / "offsets.json"), "poll_interval_s": 0.02},
        }))  # fmt: skip
        procs = []
        for name in ("agent", "dispatcher", "worker"):
            with open(work / f"{name}.log", "wb") as sink:
                argv = [sys.executable, "-m", "trainwarden", "--config", str(config), "--log-level", "WARNING", name]
                procs.append(subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                              start_new_session=True))  # fmt: skip
        results: dict[str, list[float | None]] = {"buffered": [], "flushed": [], "buffered-as-before": []}
        try:
            time.sleep(2.0)  # every process up
            trial(store, work, 999, "flushed", args)  # warm-up, not counted: the worker's first STOP loads its charts
            order = [v for _ in range(args.trials) for v in ("buffered", "flushed")]
            order += ["buffered-as-before"] * args.before_trials
            for n, variant in enumerate(order):
                results[variant].append(trial(store, work, n, variant, args))
                print(f"  {n + 1}/{len(order)} {variant}: {results[variant][-1]}", file=sys.stderr)
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=30)
            subprocess.run(tmux_argv(SOCKET, "kill-server"), capture_output=True, check=False)
    print(f"buffered print: NaN printed -> STOP decision, a Python loop printing every {args.interval:g} s under "
          "`trainwarden launch` (real agent, dispatcher, RQ worker; no PYTHONUNBUFFERED on the machine)")  # fmt: skip
    for variant, values in results.items():
        seen = [1000 * v for v in values if v is not None]
        ms = seen or [math.nan]
        missed = len(values) - len(seen)
        said = f"   ({missed} of {len(values)} never stopped while the loop ran)" if missed else ""
        print(f"  {variant:20} n={len(values):3}  p50 {statistics.median(ms):8.1f} ms   "
              f"p99 {percentile(ms, 0.99):8.1f} ms   max {max(ms):8.1f} ms{said}")  # fmt: skip
    buffered = [v for v in results["buffered"] if v is not None]
    flushed = [v for v in results["flushed"] if v is not None]
    if buffered and flushed:
        print(f"  buffered / flushed p50 ratio: {statistics.median(buffered) / statistics.median(flushed):.2f}")
    met = len(buffered) == len(results["buffered"]) and buffered and percentile(buffered, 0.99) <= 1.0
    print(f"  target: buffered NaN -> STOP p99 <= 1000 ms: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
