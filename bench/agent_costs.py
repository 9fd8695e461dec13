"""Agent benchmarks: the parser's speed and the agent's CPU and memory overhead.

parse: log lines/s through the agent's parser vs a bare Python readline loop over the same file.
  Two figures: the parser alone (format detection, metric parsing, name normalisation, notable-
  line tagging, per line) and the whole log path (tail by byte offset, traceback grouping,
  parsing, event building). Target: ratio >= 0.3.
overhead: CPU% of one core and RSS of an agent process watching 8 runs that each write 100
  lines/s, with GPU sampling at 1 Hz (8 recorded GPUs, one per run) and a real Redis; beside it,
  in the same run, a bare Python loop polling the same 8 files at the same interval (the least
  any Python log follower costs). Targets: < 2% CPU, < 100 MB RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness import private_redis
from trainwarden.agent.formats import parse_metrics
from trainwarden.agent.logsource import RunLog
from trainwarden.agent.parse import tag_of
from trainwarden.agent.tail import LogTail
from trainwarden.core.metrics import normalise

RUNS = 8
LINES_PER_S = 100
CLK_TCK = os.sysconf("SC_CLK_TCK")


def training_log(path: Path, lines: int) -> None:
    """A realistic mix: mostly metric lines in several formats, some chatter, a traceback now and then."""
    rnd = random.Random(7)
    out = []
    for i in range(lines):
        r = i % 100
        if r < 60:
            out.append(f"step={i} loss={2 + rnd.random():.4f} grad_norm={rnd.random():.3f} lr=3.0e-04 "
                       f"tokens_per_s={12000 + rnd.random() * 100:.1f}\n")  # fmt: skip
        elif r < 75:
            out.append(f"{{'loss': {2 + rnd.random():.4f}, 'grad_norm': {rnd.random():.4f}, "
                       f"'learning_rate': 4.9e-05, 'epoch': {i / 1000:.2f}}}\n")  # fmt: skip
        elif r < 85:
            out.append(f"iter {i}: loss {2 + rnd.random():.4f}, time {100 + rnd.random():.2f}ms, mfu 35.12%\n")
        elif r < 95:
            out.append(f"2026-12-02 10:00:00,123 - INFO - saving checkpoint shard {i} to /ckpt/step_{i}.pt\n")
        elif r < 99:
            out.append(f'{{"step": {i}, "eval/loss": {2 + rnd.random():.4f}, "eval/ppl": 7.4}}\n')
        else:
            out.append('Traceback (most recent call last):\n  File "train.py", line 1, in <module>\n'
                       "RuntimeError: CUDA error: device-side assert triggered\n")  # fmt: skip
    path.write_text("".join(out))


def bare_readline(path: Path) -> int:
    n = 0
    with open(path) as f:
        while f.readline():
            n += 1
    return n


def parser_only(path: Path) -> int:
    n = 0
    with open(path) as f:
        while line := f.readline():
            metrics = parse_metrics(line)
            if metrics:
                normalise(metrics)
            else:
                tag_of(line)
            n += 1
    return n


def whole_log_path(path: Path) -> int:
    log = RunLog(run="bench", host="gpu1", tail=LogTail(path))
    log.poll(0.0)
    while log.tail.offset < path.stat().st_size:
        log.poll(0.0)
    log.finish(0.0)
    return log.lines_read


def rate(fn, path: Path, repeats: int) -> float:
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        n = fn(path)
        best = max(best, n / (time.perf_counter() - start))
    return best


def bench_parse(lines: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tw-bench-parse-") as d:
        path = Path(d) / "train.log"
        training_log(path, lines)
        base = rate(bare_readline, path, repeats)
        parser = rate(parser_only, path, repeats)
        whole = rate(whole_log_path, path, repeats)
    print(f"parse: {lines:,} lines of mixed formats, best of {repeats}")
    print(f"  bare readline loop:      {base:12,.0f} lines/s")
    print(f"  agent parser:            {parser:12,.0f} lines/s   ratio {parser / base:.3f} (target >= 0.3)")
    print(f"  whole log path (events): {whole:12,.0f} lines/s   ratio {whole / base:.3f}")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])


def rss_mb(pid: int) -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


SERVE = """
import sys, json, threading, signal
sys.path.insert(0, {repo!r})
from pathlib import Path
from trainwarden.agent.gpu import RecordedGpuSampler, GpuSample, frame_of
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.agent.watch import RunWatch
from trainwarden import wiring
from trainwarden.settings import load_settings
cfg = json.loads(sys.argv[1])
settings = load_settings(Path(cfg["settings"]), env={{}})
gpus = [GpuSample(index=i, name="H100", gpu_util=97.0, mem_used_mb=70000.0, mem_total_mb=81559.0, gpu_temp=70.0,
                  power_w=600.0) for i in range({runs})]
sampler = RecordedGpuSampler(frames=[frame_of(gpus, [])])
watches = tuple(RunWatch(run=f"bench{{i}}", log=Path(p), gpus=(i,)) for i, p in enumerate(cfg["logs"]))
agent = wiring.agent(settings, watches=watches, gpu=sampler)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
agent.run(stop=stop)
"""

# `overhead --profile`: CPU time (time.process_time) of the agent's parts, each inclusive of what it calls; the timers
# cost about 1 us a call, a few tenths of a percent of one core in all
PROFILED = (("runner", "Agent", "step"), ("watcher", "RunWatcher", "poll"), ("logsource", "RunLog", "poll"),
            ("logsource", "RunLog", "_lines"), ("tail", "LogTail", "poll"), ("sidecar", "RunSidecar", "poll"),
            ("wandb_source", "RunWandb", "poll"), ("watcher", "RunWatcher", "wandb_use"),
            ("arbiter", "Arbiter", "step"),
            ("runner", "Agent", "_read_control"), ("runner", "Agent", "_gpu_events"), ("runner", "Agent", "flush"),
            ("store", "EventStore", "_script_args"), ("runner", "Agent", "save_state"))  # fmt: skip
PROFILE = """
import time, collections, importlib, atexit
spent, calls = collections.Counter(), collections.Counter()
def timed(cls, name):
    inner = getattr(cls, name)
    def wrapper(*a, **k):
        t = time.process_time()
        try:
            return inner(*a, **k)
        finally:
            spent[cls.__name__ + "." + name] += time.process_time() - t
            calls[cls.__name__ + "." + name] += 1
    setattr(cls, name, wrapper)
for mod, cls, name in {parts!r}:
    pkg = "trainwarden.events." if mod == "store" else "trainwarden.agent."
    timed(getattr(importlib.import_module(pkg + mod), cls), name)
cpu0, wall0 = time.process_time(), time.monotonic()
def report():
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    print(f"  profile: {{cpu / wall * 100:.2f}}% of one core over {{wall:.0f}}s "
          "(CPU time per part, each with what it calls)")
    for key, s in spent.most_common():
        print(f"    {{key:24s}} {{s / wall * 100:5.2f}}%  {{calls[key]:6d}} calls  "
              f"{{s / calls[key] * 1e6:7.1f}} us a call")
atexit.register(report)
"""

BARE_FOLLOWER = """
import sys, time, json
paths = json.loads(sys.argv[1])
files = [open(p) for p in paths]
while True:
    for f in files:
        while f.readline():
            pass
    time.sleep(0.05)
"""


def bench_overhead(seconds: float, warmup: float, poll: float | None, profile: bool = False) -> None:
    repo = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory(prefix="tw-bench-agent-") as d, private_redis() as server:
        root = Path(d)
        logs = [root / f"run{i}.log" for i in range(RUNS)]
        for log in logs:
            log.touch()
        settings = root / "tw.yaml"
        options = {"state_file": str(root / "state.json"), "gpu_interval_s": 1.0}
        if poll is not None:
            options["poll_interval_s"] = poll
        settings.write_text(json.dumps({"redis_url": server.url, "host": "bench", "agent": options}))
        serve = SERVE.format(repo=repo, runs=RUNS)
        if profile:
            serve = serve.replace(
                "stop = threading.Event()", PROFILE.format(parts=PROFILED) + "stop = threading.Event()"
            )
        agent = subprocess.Popen([sys.executable, "-c", serve,
                                  json.dumps({"settings": str(settings), "logs": [str(p) for p in logs]})])  # fmt: skip
        bare = subprocess.Popen([sys.executable, "-c", BARE_FOLLOWER, json.dumps([str(p) for p in logs])])
        stop = threading.Event()
        written = [0]

        def writer() -> None:
            rnd = random.Random(1)
            files = [open(p, "a") for p in logs]  # noqa: SIM115 - closed below
            step = 0
            next_at = time.monotonic()
            while not stop.is_set():
                for f in files:
                    f.write("".join(f"step={step + k} loss={2 + rnd.random():.4f} grad_norm=0.9 lr=3e-4\n"
                                    for k in range(LINES_PER_S // 10)))  # fmt: skip
                    f.flush()
                step += LINES_PER_S // 10
                written[0] += RUNS * (LINES_PER_S // 10)
                next_at += 0.1
                stop.wait(max(0.0, next_at - time.monotonic()))
            for f in files:
                f.close()

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            time.sleep(warmup)
            t0 = time.monotonic()
            a0, b0 = cpu_ticks(agent.pid), cpu_ticks(bare.pid)
            w0 = written[0]
            time.sleep(seconds)
            elapsed = time.monotonic() - t0
            a_cpu = (cpu_ticks(agent.pid) - a0) / CLK_TCK / elapsed * 100
            b_cpu = (cpu_ticks(bare.pid) - b0) / CLK_TCK / elapsed * 100
            lines = written[0] - w0
            a_rss, a_peak = rss_mb(agent.pid)
            b_rss, _ = rss_mb(bare.pid)
        finally:
            stop.set()
            thread.join()
            for proc in (agent, bare):
                proc.terminate()
                proc.wait(timeout=10)
        stored = sum(server.client().xlen(f"tw:{{bench{i}}}:log") for i in range(RUNS))
    polling = f"poll every {poll}s" if poll is not None else "default poll interval"
    print(f"overhead: {RUNS} runs x {LINES_PER_S} lines/s + GPU sampling at 1 Hz, {polling}, {seconds:.0f}s measured")
    print(f"  lines written while measured: {lines:,} ({lines / elapsed:,.0f}/s); events stored in all: {stored:,}")
    print(f"  agent:            CPU {a_cpu:5.2f}% of one core   RSS {a_rss:6.1f} MB (peak {a_peak:.1f})"
          f"   (targets < 2%, < 100 MB)")  # fmt: skip
    print(f"  bare follower:    CPU {b_cpu:5.2f}% of one core   RSS {b_rss:6.1f} MB")
    print(f"  ratio agent/bare: CPU {a_cpu / max(b_cpu, 0.01):.1f}x   RSS {a_rss / b_rss:.1f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("which", nargs="?", choices=["parse", "overhead", "all"], default="all")
    p.add_argument("--lines", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--poll", type=float, help="agent.poll_interval_s for the overhead run (default: the default)")
    p.add_argument("--profile", action="store_true", help="overhead: print the CPU time of the agent's parts")
    args = p.parse_args()
    if args.which in ("parse", "all"):
        bench_parse(args.lines, args.repeats)
    if args.which in ("overhead", "all"):
        bench_overhead(args.seconds, args.warmup, args.poll, args.profile)


if __name__ == "__main__":
    main()
