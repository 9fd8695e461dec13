"""Wait until a watched log grows, instead of waking every poll interval to find most logs as they were.

Linux: inotify (through ctypes, no dependency) on each watched file's directory, so a rename, a new file at the
path, a truncation and a write to a renamed file still held (agent.tail's rotation) all wake the loop; only events
for names that start with a watched file's name count (a checkpoint written beside the log does not). Elsewhere,
and for a file whose directory cannot be watched (not there yet, no permission, inotify's watch limit reached):
a stat per poll interval, waking when its inode, size or mtime changed.

The agent loop (agent.runner) still steps at most once per poll interval, and at least once per `longest` wait
(the control stream, process exits, settle and idle timers are checked then): a quiet agent steps five times a
second instead of twenty, and a line written while it waits is read at once instead of at the next tick.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import struct
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x4000, 0x8000
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
        | IN_MOVE_SELF)  # fmt: skip
SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW | IN_IGNORED  # the directory itself, or events lost: wake
COALESCE_S = 0.003  # after a wake, the writes that follow within this long are read in the same step
EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


def _inotify() -> tuple[int, Callable[..., int], Callable[..., int]] | None:
    """An inotify descriptor and the calls to add and remove watches, or None where there is none."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        init1, add, rm = libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch
    except (OSError, AttributeError):
        return None  # not Linux
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    rm.argtypes, rm.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    fd = init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        log.info("inotify is not available (%s): logs are checked by a stat each poll", os.strerror(ctypes.get_errno()))
        return None
    return fd, add, rm


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class Growth:
    """Waits until a file of `paths` (or a sibling named after it: `train.log.1`) changes (module docstring)."""

    def __init__(self, *, use_inotify: bool = True) -> None:
        made = _inotify() if use_inotify else None
        self._fd: int | None = made[0] if made else None
        self._add: Callable[..., int] | None = made[1] if made else None
        self._rm: Callable[..., int] | None = made[2] if made else None
        self._dirs: dict[str, int] = {}  # watched directory -> watch descriptor
        self._names: dict[int, tuple[str, ...]] = {}  # watch descriptor -> the watched names in its directory
        self._paths: tuple[Path, ...] = ()
        self._polled: tuple[Path, ...] = ()  # paths whose directory is not watched: a stat per poll
        self._seen: dict[Path, tuple[int, int, int] | None] = {}

    @property
    def inotify(self) -> bool:
        return self._fd is not None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def wait(self, paths: Iterable[Path], timeout: float, *, stop: threading.Event, every: float) -> bool:
        """Block until one of `paths` changes (True), `timeout` passes or `stop` is set (False); `every`: how often
        a path whose directory is not watched is checked, and how soon `stop` is seen."""
        self._sync(tuple(paths))
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            if self._changed_polled():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            pause = min(left, every)
            if self._fd is None:
                stop.wait(pause)
            elif self._events(pause):
                return True
        return False

    def _sync(self, paths: tuple[Path, ...]) -> None:
        """Watch the directories of `paths` (again when one went away); the rest are polled."""
        if paths == self._paths and not self._polled:
            return  # all watched, as at the last wait
        self._paths = paths
        names: dict[str, list[str]] = {}
        for path in paths:
            names.setdefault(str(path.parent), []).append(path.name)
        polled = []
        for directory, in_it in names.items():
            wd = self._dirs.get(directory)
            if wd is None and self._fd is not None and self._add is not None:
                wd = self._add(self._fd, os.fsencode(directory), MASK)
                if wd >= 0:
                    self._dirs[directory] = wd
                else:
                    wd = None
            if wd is None:
                polled += [Path(directory) / n for n in in_it]
            else:
                self._names[wd] = tuple(in_it)
        for directory in [d for d in self._dirs if d not in names]:  # a run no longer watched
            wd = self._dirs.pop(directory)
            self._names.pop(wd, None)
            if self._fd is not None and self._rm is not None:
                self._rm(self._fd, wd)
        self._polled = tuple(polled)
        for path in self._polled:
            self._seen.setdefault(path, _signature(path))

    def _changed_polled(self) -> bool:
        changed = False
        for path in self._polled:
            now = _signature(path)
            if now != self._seen.get(path):
                self._seen[path] = now
                changed = True
        return changed

    def _events(self, pause: float) -> bool:
        """Whether inotify reports a change to a watched name within `pause` seconds. A wake waits `COALESCE_S`
        more and takes the events that came meanwhile: a trainer writing several logs at once (ranks, a log and
        its sidecar) is read in one step, not one step for the first write and another for the rest."""
        assert self._fd is not None
        ready, _, _ = select.select([self._fd], [], [], pause)
        if not ready or not self._drain():
            return False
        time.sleep(COALESCE_S)
        self._drain()
        return True

    def _drain(self) -> bool:
        """Read every queued event; whether one is for a watched name (or the directory itself)."""
        assert self._fd is not None
        woke = False
        while True:
            try:
                buf = os.read(self._fd, 65536)
            except BlockingIOError:
                return woke
            offset = 0
            while offset < len(buf):
                wd, mask, _cookie, size = EVENT.unpack_from(buf, offset)
                name = os.fsdecode(buf[offset + EVENT.size : offset + EVENT.size + size].rstrip(b"\0"))
                offset += EVENT.size + size
                if mask & SELF:
                    woke = True
                    if mask & IN_IGNORED:  # the directory went away: watched again (or polled) at the next wait
                        self._names.pop(wd, None)
                        self._dirs = {d: w for d, w in self._dirs.items() if w != wd}
                        self._paths = ()
                elif name.startswith(self._names.get(wd, ())):
                    woke = True
