"""Recording where a stalled run is stuck: the workers ask (a `dump` control message, agent/watch.py) when
a stall anomaly opens; the agent answers with one `process.dump` event.

Per process of the run: a Python stack dump with `py-spy dump --nonblocking` (the `debug` extra; it never
pauses training), else what /proc tells anyone: the kernel stack (root only), `wchan` and each
thread's state. Around it, the CPU the processes burn now (measured over the dump, at least
`CPU_WINDOW_S`), the CPU seconds used since the last step, and the GPUs' utilisation and memory. In a
thread of its own: a dump takes seconds and the other runs are watched on meanwhile. The event's id is
`<reply_as>:1`, so a repeated request records one dump.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainwarden.agent import procfs, stacks
from trainwarden.agent.gpu import GpuSample
from trainwarden.agent.watch import DumpOrder
from trainwarden.core.redact import known_secrets, redact_text
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.events.payloads import DumpGpu, ProcessDumpData

log = logging.getLogger(__name__)

PYSPY_TIMEOUT_S = 10.0  # per process
CPU_WINDOW_S = 1.0
MAX_PROCESSES = 16  # a run's processes dumped at most (its wrappers and ranks; DataLoader workers beyond)
MAX_TEXT_CHARS = 64_000  # the whole dump in the event; the pack's stacks.txt holds the same


@dataclass(frozen=True, slots=True)
class Target:
    """What the runner knows of the run when the request comes."""

    pids: tuple[int, ...]
    gpus: tuple[GpuSample, ...] = ()
    cpu_base: tuple[float, int] | None = None  # (time, CPU ticks of the tree) at the sample after the last step


def find_pyspy() -> str | None:
    """py-spy on PATH, or beside this Python (a venv's bin/ that is not on PATH)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if beside.exists() else None)


class Dumper:
    def __init__(self, host: str, clock: Callable[[], float] = time.time, pyspy: str | None = None) -> None:
        self.host = host
        self.clock = clock
        self.pyspy = pyspy
        self._taken: set[str] = set()
        self._done: queue.SimpleQueue[Event] = queue.SimpleQueue()

    def start(self, order: DumpOrder, target: Target) -> bool:
        """Take the dump in a thread; False when this request was taken already (the event says it once)."""
        if order.reply_as in self._taken:
            return False
        self._taken.add(order.reply_as)
        threading.Thread(target=self._work, args=(order, target), name=f"dump-{order.run}", daemon=True).start()
        return True

    def finished(self) -> list[Event]:
        out = []
        while not self._done.empty():
            out.append(self._done.get())
        return out

    def _work(self, order: DumpOrder, target: Target) -> None:
        try:
            data = take_dump(order, target, pyspy=self.pyspy, clock=self.clock)
        except Exception as exc:  # recorded, so the thread in Slack says why there is no stack
            log.exception("dump of %s failed", order.run)
            data = empty_dump(order, f"the dump failed: {type(exc).__name__}: {exc}")
        self._done.put(make_event(t.PROCESS_DUMP, run=order.run, host=self.host, producer=order.reply_as, seq=1,
                                  data=data, ts=self.clock()))  # fmt: skip


def empty_dump(order: DumpOrder, error: str) -> ProcessDumpData:
    return {"anomaly": order.anomaly, "rule": order.rule, "method": "none", "verdict": stacks.UNKNOWN,
            "processes": 0, "cpu_pct": None, "gpus": [], "gpu_pct": None, "text": "", "errors": [error]}  # fmt: skip


def take_dump(order: DumpOrder, target: Target, *, pyspy: str | None, clock: Callable[[], float]) -> ProcessDumpData:
    """Blocking: dump the run's processes and measure them (module docstring)."""
    pids = list(target.pids)[:MAX_PROCESSES]
    if not pids:
        return empty_dump(order, "the agent knows no live process of the run (is it still running?)")
    started, before = time.monotonic(), _ticks(pids)
    secrets = known_secrets()
    states, texts, errors = [], [], []
    for pid in pids:
        text, error = _pyspy(pyspy, pid) if pyspy else (None, None)
        if error:
            errors.append(f"pid {pid}: {error}")
        threads = tuple(_with_code(th) for th in stacks.parse_pyspy(text)) if text else ()
        rank = _rank(pid)
        texts.append(redact_text(text if text else _proc_text(pid), secrets))
        states.append((pid, rank, threads))
    time.sleep(max(0.0, CPU_WINDOW_S - (time.monotonic() - started)))
    elapsed, after = time.monotonic() - started, _ticks(pids)
    cpu = {p: (after[p] - before[p]) / procfs.CLK_TCK / elapsed * 100 for p in pids if p in after and p in before}
    procs = [stacks.ProcessState(pid=p, rank=r, cpu_pct=cpu.get(p), threads=th, wchan=procfs.read_wchan(p))
             for p, r, th in states]  # fmt: skip
    gpus: list[DumpGpu] = [{"gpu": g.index, "util": g.gpu_util, "mem_used_mb": g.mem_used_mb,
                            "mem_total_mb": g.mem_total_mb} for g in target.gpus]  # fmt: skip
    utils = [g.gpu_util for g in target.gpus if g.gpu_util is not None]
    gpu_pct = max(utils) if utils else None
    cpu_pct = round(sum(cpu.values()), 1) if cpu else None
    text = "\n".join(texts)
    data: ProcessDumpData = {
        "anomaly": order.anomaly, "rule": order.rule, "method": "py-spy" if any(th for _, _, th in states) else "proc",
        "verdict": stacks.verdict(cpu_pct, gpu_pct), "processes": len(pids), "cpu_pct": cpu_pct, "gpus": gpus,
        "gpu_pct": gpu_pct, "text": text[:MAX_TEXT_CHARS],
    }  # fmt: skip
    if len(text) > MAX_TEXT_CHARS:
        data["truncated"] = True
    if errors:
        data["errors"] = [redact_text(e, secrets) for e in errors]
    if order.since is not None:
        data["since"] = order.since
        data["stalled_s"] = round(max(0.0, clock() - order.since), 1)
    if target.cpu_base is not None and after:
        data["cpu_s_since_step"] = round(max(0.0, (sum(after.values()) - target.cpu_base[1]) / procfs.CLK_TCK), 1)
    found = stacks.culprit(procs)
    if found is not None:
        proc, at = found
        data.update({"where": at.call, "category": at.category, "place": at.place, "pid": proc.pid, "rank": proc.rank})
        data["absent"] = [f"rank {p.rank} (pid {p.pid}" + (f", in `{w.call}`: {w.place})" if w else ")")
                          for p, w in stacks.absent_ranks(procs, at)]  # fmt: skip
    else:
        waiting = next(((p.pid, p.wchan) for p in procs if p.wchan and p.wchan != "do_wait"), None)
        if waiting is not None:
            data.update({"where": f"kernel {waiting[1]}", "category": stacks.OTHER, "pid": waiting[0]})
    return data


def _ticks(pids: Sequence[int]) -> dict[int, int]:
    out = {}
    for pid in pids:
        stat = procfs.read_stat(pid)
        if stat is not None:
            out[pid] = stat.cpu_ticks
    return out


def _rank(pid: int) -> int | None:
    env = procfs.read_environ(pid) or {}
    value = env.get("RANK", "")
    return int(value) if value.isdigit() else None


def _pyspy(pyspy: str, pid: int) -> tuple[str | None, str | None]:
    """(py-spy's text, None) or (None, why not): not a Python process, no permission, timed out."""
    argv = [pyspy, "dump", "--pid", str(pid), "--nonblocking", "--full-filenames"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=PYSPY_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None, f"py-spy took over {PYSPY_TIMEOUT_S:.0f}s"
    except OSError as exc:
        return None, f"py-spy cannot run: {exc}"
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["py-spy failed"])[-1][:300]
    return proc.stdout, None


def _with_code(thread: stacks.Thread) -> stacks.Thread:
    """The innermost frames' source lines (what `lock.acquire()` they sit on), where the file is readable."""
    frames = [stacks.Frame(f.function, f.file, f.line, _source_line(f.file, f.line)) if i < 4 else f
              for i, f in enumerate(thread.frames)]  # fmt: skip
    return stacks.Thread(thread.tid, thread.name, thread.idle, tuple(frames))


def _source_line(path: str, line: int) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, text in enumerate(f, 1):
                if i == line:
                    return text.strip()[:200]
    except OSError:
        return None
    return None


def _proc_text(pid: int) -> str:
    """The fallback: what /proc says of the process and each of its threads."""
    stat = procfs.read_stat(pid)
    head = f"Process {pid} ({stat.comm if stat else '?'}): state {stat.state if stat else '?'}, " \
           f"wchan {procfs.read_wchan(pid) or '-'}"  # fmt: skip
    lines = [head]
    try:
        with open(f"{procfs.PROC}/{pid}/stack") as f:
            lines += ["  kernel stack:", *(f"    {ln}" for ln in f.read().splitlines()[:32])]
    except OSError:
        lines.append("  kernel stack: not readable (root only)")
    try:
        tids = sorted(os.listdir(f"{procfs.PROC}/{pid}/task"), key=int)
    except OSError:
        tids = []
    for tid in tids[:64]:
        th = procfs.read_stat(pid, int(tid))
        if th is not None:
            lines.append(f"  thread {tid} ({th.comm}): {th.state}, wchan {procfs.read_wchan(pid, int(tid)) or '-'}")
    return "\n".join(lines)
