"""Where a stalled run is stuck: pure parsing of `py-spy dump` text and a summary of the run's processes.

The agent takes the dump (agent/dumper.py); this module only reads text and numbers, so every rule
here is tested on its own. A thread's "where" is its innermost frame that says something: the
standard library's waiting machinery (threading, selectors, queue, multiprocessing's pipes) is
skipped, and a torch.distributed collective, a DataLoader fetch, a lock or a file read is preferred.

The thread blamed is the one that runs the training loop: the thread whose stack holds a training step,
else the main thread; a helper that waits by design while it idles (`IDLE_HELPERS`: tqdm's monitor, the
pin-memory thread, ...) is never blamed, whatever it waits in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainwarden.core.dumps import COLLECTIVE, DATALOADER, HANG, IO, LOCK, OTHER, SLOW, UNKNOWN

__all__ = ["COLLECTIVE", "DATALOADER", "HANG", "IO", "LOCK", "OTHER", "SLOW", "UNKNOWN"]

IDLE_CPU_PCT = 5.0  # a process tree under this much CPU does no work
IDLE_GPU_PCT = 5.0

COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
    "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list", "barrier",
    "monitored_barrier", "reduce", "gather", "scatter", "send", "recv", "isend", "irecv", "wait",
})  # fmt: skip
DATALOADER_CALLS = frozenset({"_next_data", "_get_data", "_try_get_data", "__next__"})
IO_CALLS = frozenset({"read", "readinto", "readline", "load", "recv_into", "open"})
# the standard library's waiting machinery: the caller says more than these do
SKIP_FILES = re.compile(
    r"(^|/)(threading|selectors|queue|socket|ssl|subprocess|contextlib)\.py$"
    r"|(^|/)multiprocessing/(connection|queues|synchronize|popen_\w+)\.py$"
    r"|torch/distributed/c10d_logger\.py$"
)  # fmt: skip
# Helper threads that wait forever by design: one waiting in its own loop is idle, never the culprit.
# (what, file, function) of the frame it idles in, matched on its innermost frames up to the first one outside
# SKIP_FILES; the one table to extend.
IDLE_HELPERS: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = tuple(
    (what, re.compile(file), re.compile(function)) for what, file, function in (
        ("tqdm's monitor thread", r"(^|/)tqdm/_monitor\.py$", r"(^|\.)run$"),
        ("torch's pin-memory thread", r"torch/utils/data/_utils/pin_memory\.py$", r"_pin_memory_loop$"),
        ("a logging QueueListener", r"(^|/)logging/handlers\.py$", r"(^|\.)(_monitor|dequeue)$"),
        ("W&B's service and internal threads", r"(^|/)wandb/", r"."),
        ("a threading.Timer waiting", r"(^|/)threading\.py$", r"^(Timer\.)?run$"),
        ("an idle concurrent.futures worker", r"(^|/)concurrent/futures/thread\.py$", r"_worker$"),
    )
)  # fmt: skip
# functions whose frame says "this thread runs the training step" (a loop run in a thread of its own)
STEP_FUNCTIONS = frozenset({
    "train_step", "training_step", "train_one_epoch", "train_epoch", "_inner_training_loop", "training_loop",
    "run_training_batch", "optimizer_step", "backward",
})  # fmt: skip
MAIN_THREAD = "MainThread"
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([\w+]+)\)(?:: "(.*)")?\s*$')  # (idle), (active+gil)
_FRAME = re.compile(r"^\s+(\S.*?) \((.+?):(\d+)\)\s*$")
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")
_WITH = re.compile(r"^(?:async\s+)?with\s+([A-Za-z_][\w.]*)\s*(?::|,|\bas\b)")


@dataclass(frozen=True, slots=True)
class Frame:
    function: str
    file: str
    line: int
    code: str | None = None  # the source line, when the agent could read it


@dataclass(frozen=True, slots=True)
class Thread:
    tid: str
    name: str
    idle: bool | None  # py-spy's (idle): off the CPU
    frames: tuple[Frame, ...]  # innermost first


@dataclass(frozen=True, slots=True)
class Where:
    call: str  # what it waits in: `torch.distributed.all_reduce`, `lock.acquire`, `_next_data`
    category: str  # COLLECTIVE | DATALOADER | LOCK | IO | OTHER
    frame: Frame

    @property
    def place(self) -> str:
        return f"{self.frame.function}, {self.frame.file.rsplit('/', 1)[-1]}:{self.frame.line}"


@dataclass(frozen=True, slots=True)
class ProcessState:
    """One process of the run as the dump saw it (numbers measured by the agent)."""

    pid: int
    rank: int | None
    cpu_pct: float | None
    threads: tuple[Thread, ...] = ()  # from py-spy; empty on the fallback
    wchan: str | None = None


def parse_pyspy(text: str) -> list[Thread]:
    """`py-spy dump` output -> its threads, frames innermost first (the header lines are skipped)."""
    out: list[Thread] = []
    head: tuple[str, str, str] | None = None
    frames: list[Frame] = []
    for line in text.splitlines():
        if m := _THREAD.match(line):
            if head is not None:
                out.append(_thread(head, frames))
            head, frames = (m.group(1), m.group(2), m.group(3) or ""), []
        elif head is not None and (f := _FRAME.match(line)):
            frames.append(Frame(function=f.group(1), file=f.group(2), line=int(f.group(3))))
    if head is not None:
        out.append(_thread(head, frames))
    return out


def _thread(head: tuple[str, str, str], frames: list[Frame]) -> Thread:
    state = head[1].lower()
    idle = True if state == "idle" else False if state.startswith("active") else None
    return Thread(tid=head[0], name=head[2], idle=idle, frames=tuple(frames))


def call_on_line(code: str | None) -> str | None:
    """The last call a source line makes (`self.lock.acquire()` -> `lock.acquire`), None without one."""
    calls = _CALL.findall(code or "")
    if not calls:
        return None
    parts = calls[-1].split(".")
    return ".".join(parts[-2:]) if parts[0] != "self" or len(parts) > 2 else parts[-1]


def where(thread: Thread) -> Where | None:
    """The innermost frame that says what the thread waits for (module docstring); None without frames."""
    kept = [f for f in thread.frames if not SKIP_FILES.search(f.file)]
    for f in kept:
        name = f.function.rsplit(".", 1)[-1]
        if "torch/distributed/" in f.file and name in COLLECTIVES:
            return Where(f"torch.distributed.{name}", COLLECTIVE, f)
        if "torch/utils/data/" in f.file and name in DATALOADER_CALLS:
            return Where(name, DATALOADER, kept[0])  # the place: the innermost frame (a Dataset's __getitem__)
    if not kept:
        return None
    inner = kept[0]
    call = call_on_line(inner.code)
    if call is None and (held := _WITH.match(inner.code or "")):
        # innermost on `with self.lock:`: a C-level __enter__ (a Lock, an RLock) or threading's (skipped above)
        return Where(f"with {held.group(1)}", LOCK, inner)
    if call is not None and call.rsplit(".", 1)[-1] in ("acquire", "wait", "join"):
        return Where(call, LOCK, inner)
    if inner.function.rsplit(".", 1)[-1] in IO_CALLS or (call and call.rsplit(".", 1)[-1] in IO_CALLS):
        return Where(call or inner.function, IO, inner)
    return Where(call or inner.function, OTHER, inner)


_RANKING = {COLLECTIVE: 0, DATALOADER: 1, LOCK: 2, IO: 3, OTHER: 4}


def idle_helper(thread: Thread) -> str | None:
    """Which known helper (`IDLE_HELPERS`) the thread is, idling in its own loop; None for any other thread."""
    for f in thread.frames:
        for what, file, function in IDLE_HELPERS:
            if file.search(f.file) and function.search(f.function):
                return what
        if not SKIP_FILES.search(f.file):
            return None  # the innermost frame of its own: the thread works (or waits) in something else
    return None


def holds_step(thread: Thread) -> bool:
    """Whether the thread's stack runs a training step (`STEP_FUNCTIONS`)."""
    return any(f.function.rsplit(".", 1)[-1] in STEP_FUNCTIONS for f in thread.frames)


def is_main(thread: Thread, pid: int) -> bool:
    """Python's main thread: by its name, or by its id (Linux: the main thread's id is the pid)."""
    return thread.name == MAIN_THREAD or thread.tid == str(pid)


def culprit(processes: Sequence[ProcessState]) -> tuple[ProcessState, Where] | None:
    """The most telling (process, where) of the run: in each process the thread that runs the training loop
    (the one holding the step, else the main thread) before any other, and a known idle helper never; then a
    collective first, a data loader, a lock, a read; then the lowest rank."""
    found = []
    for p in processes:
        stepping = any(holds_step(th) for th in p.threads)
        for th in p.threads:
            if idle_helper(th) is not None or (w := where(th)) is None:
                continue
            loop = holds_step(th) if stepping else is_main(th, p.pid)
            found.append((0 if loop else 1, p, w))
    if not found:
        return None
    best = min(found, key=lambda x: (x[0], _RANKING[x[2].category], x[1].rank if x[1].rank is not None else 1 << 30))
    return best[1], best[2]


def verdict(cpu_pct: float | None, gpu_pct: float | None) -> str:
    """HANG: no CPU and no GPU work (an unknown GPU counts as idle: a CPU run); SLOW: either works."""
    if cpu_pct is None:
        return UNKNOWN
    if cpu_pct >= IDLE_CPU_PCT or (gpu_pct is not None and gpu_pct >= IDLE_GPU_PCT):
        return SLOW
    return HANG


def absent_ranks(processes: Sequence[ProcessState], at: Where) -> list[tuple[ProcessState, Where | None]]:
    """For a collective: the ranked processes not in it (the ones the others wait for)."""
    if at.category != COLLECTIVE:
        return []
    out = []
    for p in processes:
        if p.rank is None or not p.threads:
            continue
        places = [where(th) for th in p.threads]
        if not any(w is not None and w.call == at.call for w in places):
            out.append((p, next((w for w in places if w is not None), None)))
    return out
