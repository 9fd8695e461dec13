"""Reading processes from /proc (Linux): pure parsers, thin readers. No dependency needed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PROC = "/proc"
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class ProcStat:
    pid: int
    comm: str
    ppid: int
    cpu_ticks: int  # utime + stime
    start_ticks: int  # start time after boot: with the pid, names one process for good
    rss_bytes: int
    state: str = "R"  # R running, S sleeping, Z zombie (exited, not yet reaped), ...


def parse_stat(text: str) -> ProcStat:
    """`/proc/<pid>/stat`; the command name may hold spaces and parentheses, so split at the last ')'."""
    head, _, rest = text.rpartition(")")
    pid_text, _, comm = head.partition(" (")
    f = rest.split()
    # after ')': state(0) ppid(1) ... utime(11) stime(12) ... starttime(19) vsize(20) rss(21)
    return ProcStat(
        pid=int(pid_text),
        comm=comm,
        ppid=int(f[1]),
        cpu_ticks=int(f[11]) + int(f[12]),
        start_ticks=int(f[19]),
        rss_bytes=int(f[21]) * PAGE_SIZE,
        state=f[0],
    )


def parse_environ(raw: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _dir(pid: int, tid: int | None) -> str:
    return f"{PROC}/{pid}" if tid is None else f"{PROC}/{pid}/task/{tid}"


def read_stat(pid: int, tid: int | None = None) -> ProcStat | None:
    """The process's stat, or with `tid` one of its threads'."""
    try:
        with open(f"{_dir(pid, tid)}/stat") as f:
            return parse_stat(f.read())
    except (OSError, ValueError, IndexError):
        return None


def read_wchan(pid: int, tid: int | None = None) -> str | None:
    """The kernel function a sleeping process waits in (`futex_do_wait`: a lock; `pipe_read`: a read); None
    when it runs, or when the kernel does not say (another user's process reads as `0`)."""
    try:
        with open(f"{_dir(pid, tid)}/wchan") as f:
            name = f.read().strip()
    except OSError:
        return None
    return name if name and name != "0" else None


def snapshot() -> dict[int, ProcStat]:
    """Every live process on the machine (the ones that vanish while we look, and zombies: exited
    processes their parent has not reaped yet, are skipped)."""
    out: dict[int, ProcStat] = {}
    try:
        names = os.listdir(PROC)
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None and stat.state != "Z":
                out[stat.pid] = stat
    return out


def descendants(root: int, procs: Mapping[int, ProcStat]) -> list[int]:
    """`root` and every process below it, root first."""
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out: list[int] = []
    todo = [root] if root in procs else []
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def read_argv(pid: int) -> list[str] | None:
    """The command line as its arguments (None when it cannot be read, [] for a kernel thread)."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")] if raw else []


def read_cmdline(pid: int) -> str | None:
    """The command line, arguments joined by spaces (None when it cannot be read)."""
    argv = read_argv(pid)
    return None if argv is None else " ".join(argv)


def matching(pattern: str, procs: Mapping[int, ProcStat], *, exclude: Iterable[int] = ()) -> list[int]:
    """The topmost processes whose command line matches `pattern` (`re.search`, like `pgrep -f`): a
    matching process under another matching one (a shell and the python it runs) counts once, as its
    ancestor's descendant. `exclude`: pids never matched (the agent itself)."""
    regex = re.compile(pattern)
    skip = set(exclude)
    found = set()
    for pid in procs:
        if pid in skip:
            continue
        cmdline = read_cmdline(pid)
        if cmdline and regex.search(cmdline):
            found.add(pid)
    return sorted(pid for pid in found if procs[pid].ppid not in found)


def read_environ(pid: int) -> dict[str, str] | None:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as f:
            return parse_environ(f.read())
    except OSError:
        return None


def open_paths(pids: Iterable[int]) -> list[str]:
    """Paths of the files these processes hold open (those we may look at)."""
    out: list[str] = []
    for pid in pids:
        for fd in descriptors(pid):
            try:
                out.append(os.readlink(f"{PROC}/{pid}/fd/{fd}"))
            except OSError:
                continue
    return out


def descriptors(pid: int | str) -> list[str]:
    """The process's open file descriptors, as names under /proc/PID/fd ([] for one we may not look at)."""
    try:
        return os.listdir(f"{PROC}/{pid}/fd")
    except OSError:
        return []


def writing(dev: int, ino: int) -> bool:
    """Whether a process (one we may look at) holds the file `dev`/`ino` open for writing: a renamed log's
    writer (`>> train.log`, `tee`, a `FileHandler`) still alive. Costs a walk over every process's descriptors,
    so the log follower asks only once a renamed log has been quiet for a while."""
    try:
        pids = [p for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        for fd in descriptors(pid):
            try:
                st = os.stat(f"{PROC}/{pid}/fd/{fd}")
                if st.st_ino != ino or st.st_dev != dev:
                    continue
                with open(f"{PROC}/{pid}/fdinfo/{fd}") as info:
                    flags = next((line.split()[1] for line in info if line.startswith("flags:")), "0")
            except (OSError, IndexError):
                continue
            if int(flags, 8) & (os.O_WRONLY | os.O_RDWR):
                return True
    return False
