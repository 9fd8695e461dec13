"""Process health of one run: alive, CPU% and RSS of its process tree, how it ended, the W&B guard.

The run's processes are found from its wrapper pid (`pid`), its tmux pane (`session`), or, for a
run watched by `match`, the processes whose command line matches (looked up at every sample). How it
ended comes from the exit file the launch wrapper writes (`<log>.exit`): 0 -> `run.finished`,
anything else -> `run.failed` with the code and the log's last lines. A run whose processes are
gone without an exit file also failed (exit code unknown: killed, machine rebooted) -- judged only
on evidence: the process the agent followed is gone, or the pid a launch recorded is. A tmux
session that cannot be found proves nothing (it may live on another tmux server than the one
asked), so a run known only by its session is judged once the agent has seen it alive, and a
watch listed before its run starts is not taken for a dead run.
"""

from __future__ import annotations

import os
import subprocess
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trainwarden.agent import procfs
from trainwarden.agent.wandb_use import wandb_variables
from trainwarden.agent.watch import RunWatch
from trainwarden.core.redact import known_secrets, redact_text
from trainwarden.core.tmux import tmux_argv, tmux_env

LOG_TAIL_LINES = 20
LOG_TAIL_BYTES = 16384
TMUX_TIMEOUT_S = 5.0
OFFLINE_MODES = ("offline", "disabled", "dryrun")


@dataclass(frozen=True, slots=True)
class Ended:
    exit_code: int | None  # None: gone without an exit code
    exit_mtime_us: int | None  # when the exit file was written (numbers the event when no launch id)


@dataclass(frozen=True, slots=True)
class GuardFinding:
    mode: str  # offline | disabled | dryrun
    variable: str  # WANDB_MODE=offline, WANDB_DISABLED=true
    pid: int
    comm: str
    start_ticks: int


def read_exit_code(path: Path, *, not_before: float | None = None) -> tuple[int, int] | None:
    """(exit code, mtime in µs) from the wrapper's exit file; None while absent, stale or half-written."""
    try:
        st = path.stat()
        text = path.read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not_before is not None and st.st_mtime < not_before - 1.0:
        return None  # left over from an earlier launch
    if not text.lstrip("-").isdigit():
        return None
    return int(text), st.st_mtime_ns // 1000


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, *, secrets: Iterable[str] | None = None) -> list[str]:
    """The log's last lines, secrets masked (for `run.failed`)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - LOG_TAIL_BYTES))
            data = f.read()
    except OSError:
        return []
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    secrets = known_secrets() if secrets is None else list(secrets)
    return [redact_text(line, secrets) for line in text.splitlines()[-lines:]]


def wandb_guard(env: Mapping[str, str]) -> tuple[str, str] | None:
    """Pure: (mode, the variable that says so) when this environment keeps metrics out of W&B."""
    mode = env.get("WANDB_MODE", "").strip().lower()
    if mode in OFFLINE_MODES:
        return mode, f"WANDB_MODE={mode}"
    disabled = env.get("WANDB_DISABLED", "").strip().lower()
    if disabled in ("true", "1", "yes"):
        return "disabled", f"WANDB_DISABLED={disabled}"
    return None


def tmux_pane_pid(session: str, socket: str | None) -> int | None:
    argv = tmux_argv(socket, "list-panes", "-t", f"={session}", "-F", "#{pane_pid}")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TMUX_TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL, env=tmux_env())  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = proc.stdout.split()[:1]
    return int(first[0]) if proc.returncode == 0 and first and first[0].isdigit() else None


HISTORY_SAMPLES = 720  # (time, CPU ticks) kept: two hours at the default 10 s
MAX_WAIT_READS = 8  # wchan files read per sample at most (a run's wrappers, then its workers)


class ProcessHealth:
    def __init__(self, watch: RunWatch) -> None:
        self.watch = watch
        self.root: procfs.ProcStat | None = None
        self.pids: list[int] = []
        self.seen_alive = False
        self.gone = False  # its processes were known (seen, or a launch's pid) and are not there now
        self.guard_reported = False
        self.tops: list[tuple[int, int]] = []  # (pid, start ticks) of its top processes at the last sample
        self.env_read = not self.trackable  # a run without a pid or session has no environment to read
        self.wandb_env: list[str] = []  # names of the WANDB_* variables its processes have (agent.wandb_use)
        self._last: tuple[float, int] | None = None  # (time, cpu ticks of the tree)
        self.history: deque[tuple[float, int]] = deque(maxlen=HISTORY_SAMPLES)  # for a dump's CPU since the last step

    @property
    def trackable(self) -> bool:
        return bool(self.watch.pid or self.watch.session or self.watch.match)

    def roots(self, procs: Mapping[int, procfs.ProcStat]) -> list[procfs.ProcStat]:
        """The run's top processes now: its pid or pane (followed by start time), else those matching."""
        if self.watch.pid is None and not self.watch.session and self.watch.match:
            return [procs[pid] for pid in procfs.matching(self.watch.match, procs, exclude=(os.getpid(),))]
        root = self._find_root(procs)
        return [root] if root is not None else []

    def _find_root(self, procs: Mapping[int, procfs.ProcStat]) -> procfs.ProcStat | None:
        if self.root is not None:
            current = procs.get(self.root.pid)
            if current is not None and current.start_ticks == self.root.start_ticks:
                return current
            return None  # the process we followed is gone (a reused pid is another process)
        pid = self.watch.pid
        if pid is None and self.watch.session:
            pid = tmux_pane_pid(self.watch.session, self.watch.tmux_socket)
        return procs.get(pid) if pid is not None else None

    def sample(self, procs: Mapping[int, procfs.ProcStat], now: float) -> dict[str, object] | None:
        """A `health` event's data for the run's process tree; None when it has no known processes."""
        if not self.trackable:
            return None
        roots = self.roots(procs)
        if not roots:
            self.pids = []
            self.gone = self.seen_alive or (bool(self.watch.launch) and self.watch.pid is not None)
            return {"alive": False} if self.gone else None
        root = roots[0]
        self.tops = [(r.pid, r.start_ticks) for r in roots]
        if self.watch.pid is not None or self.watch.session:
            self.root = root
        self.seen_alive = True
        self.pids = [pid for r in roots for pid in procfs.descendants(r.pid, procs)]
        ticks = sum(procs[p].cpu_ticks for p in self.pids)
        rss = sum(procs[p].rss_bytes for p in self.pids)
        data: dict[str, object] = {"alive": True, "pid": root.pid, "processes": len(self.pids),
                                   "rss_mb": round(rss / 2**20, 1)}  # fmt: skip
        if self._last is not None and now > self._last[0]:
            cpu = (ticks - self._last[1]) / procfs.CLK_TCK / (now - self._last[0]) * 100
            data["cpu_pct"] = round(max(0.0, cpu), 1)
        self._last = (now, ticks)
        self.history.append(self._last)
        if (waiting := self._waiting(procs)) is not None:
            data["waiting"] = waiting  # where a stalled run waits (policies/kinds/stall.py says it in words)
        return data

    def _waiting(self, procs: Mapping[int, procfs.ProcStat]) -> str | None:
        """Where the run's work sleeps: the kernel function of its busiest process that is not a wrapper waiting
        for its children (`do_wait`: a shell, a launcher); None while it runs."""
        for pid in sorted(self.pids, key=lambda p: procs[p].cpu_ticks, reverse=True)[:MAX_WAIT_READS]:
            if procs[pid].state not in ("S", "D") or procs[pid].cpu_ticks == 0:
                return None  # the busiest process that is no wrapper is running, or nothing has worked yet
            waiting = procfs.read_wchan(pid)
            if waiting != "do_wait":
                return waiting
        return None

    def ticks_since(self, since: float) -> tuple[float, int] | None:
        """The first sample at or after `since`: the CPU ticks the tree had then (a dump subtracts them)."""
        return next((s for s in self.history if s[0] >= since), None)

    def guard(self, procs: Mapping[int, procfs.ProcStat]) -> GuardFinding | None:
        """The first process of the run whose environment keeps W&B offline (reported once per run; never
        for a run that does not use W&B, `wandb: 0`, or allows offline). Notes the W&B variables' names on the way."""
        self.env_read = True
        if self.guard_reported and self.wandb_env:
            return None
        for pid in self.pids:
            env = procfs.read_environ(pid)
            if env is None:
                continue
            self.wandb_env = self.wandb_env or wandb_variables(env)
            found = None if self.guard_reported or not self.guards_wandb else wandb_guard(env)
            if found is not None and pid in procs:
                self.guard_reported = True
                return GuardFinding(mode=found[0], variable=found[1], pid=pid, comm=procs[pid].comm,
                                    start_ticks=procs[pid].start_ticks)  # fmt: skip
        return None

    @property
    def guards_wandb(self) -> bool:
        """Whether an offline W&B is a finding: not for a run without W&B (`wandb: 0`), nor for one whose
        experiment allows offline (`allow_offline_wandb`, from its launch)."""
        return self.watch.wandb is not False and not self.watch.allow_offline_wandb

    def died(self) -> bool:
        """Cheap enough for every poll (a stat of each top process and of the exit file): whether the run's end
        shows, so the agent samples it now and records the end within a poll, not at the next process sample."""
        for pid, start in self.tops:
            now = procfs.read_stat(pid)
            if now is None or now.start_ticks != start or now.state == "Z":
                return True
        return read_exit_code(self.watch.exit_path, not_before=self.watch.launched_at) is not None

    def ended(self) -> Ended | None:
        """How the run ended, or None while it runs (or while that cannot be told)."""
        code = read_exit_code(self.watch.exit_path, not_before=self.watch.launched_at)
        if code is not None:
            return Ended(code[0], code[1])
        if self.gone:
            # the exit file is written before the wrapper exits: look once more to avoid a race
            code = read_exit_code(self.watch.exit_path, not_before=self.watch.launched_at)
            return Ended(code[0], code[1]) if code is not None else Ended(None, None)
        return None
