"""`trainwarden.log(step=..., **metrics)`: exact metric names and steps from the training process itself.

Each call appends one JSON line to the run's sidecar file (`trainwarden.core.sidecar`), which the agent
follows beside the log. The writer runs inside training, so it must cost nothing and break nothing:

- one `os.write` of the whole line to a file opened with O_APPEND: no buffer to flush, no lock,
  no thread, no network; lines from several threads never interleave;
- it never raises: a value that is not a number is dropped, a file that cannot be opened or written
  (unwritable directory, disk full) drops that line; each kind of trouble is logged once, as a
  warning of the `trainwarden` logger (logging, unlike `warnings`, is never turned into an error);
- only rank 0 writes, when `RANK` (else `LOCAL_RANK`) says this is one of several processes;
- no path (no `init(path=...)`, no `TRAINWARDEN_METRICS` from `trainwarden launch`): nothing is
  written, and one warning says so.

Its imports are the standard library's only: `import trainwarden` in a training script loads no
Redis client, no RQ, no Slack.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from trainwarden.core.sidecar import METRICS_ENV

TYPE_CHECKING = False  # `typing` itself costs a training script more than this whole module
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def rank() -> int:
    """This process's rank among a distributed job's processes (torch.distributed's env), 0 when alone."""
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def number(value: object) -> int | float | None:
    """A plain int or float for JSON, or None when `value` is not one number.

    numpy and torch scalars (and 0-d arrays and tensors) are read with `.item()`: a CUDA tensor waits
    for its value there, as `.item()` in the script would. Booleans and strings are not numbers."""
    kind = type(value)
    if kind is float or kind is int:
        return value  # type: ignore[return-value]
    if kind is bool or isinstance(value, str | bytes):
        return None
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        value = item()
        kind = type(value)
        return value if kind is float or kind is int else None  # type: ignore[return-value]
    try:
        if hasattr(value, "__index__"):
            return int(value.__index__())
        if hasattr(value, "__float__"):
            return float(value.__float__())
    except (TypeError, ValueError, OverflowError):
        return None
    return None


class MetricsLog:
    """One sidecar file. `path=None` writes nothing (the warning is logged once, at the first call)."""

    def __init__(self, path: str | os.PathLike[str] | None, *, enabled: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.enabled = enabled
        self._fd: int | None = None
        self._torn = False  # a write failed part-way: the next line starts on a line of its own
        self._warned: set[str] = set()

    def log(self, metrics: Mapping[str, Any] | None = None, /, *, step: int | None = None, **named: Any) -> None:
        """Append `{"step": step, **metrics, **named}` as one line. Never raises."""
        try:
            self._log(metrics, step, named)
        except Exception as exc:  # whatever it is, it must not reach the training loop
            self._warn("unexpected", f"trainwarden.log failed and drops this line ({type(exc).__name__}: {exc})")

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:  # noqa: SIM105 - contextlib is one more import in every training script
                os.close(fd)
            except OSError:
                pass

    def _log(self, metrics: Mapping[str, Any] | None, step: int | None, named: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        if self.path is None:
            self._warn("no path", f"trainwarden.log writes nothing: no path given (trainwarden.init(path=...)) and "
                                  f"{METRICS_ENV} is not set (trainwarden launch sets it)")  # fmt: skip
            return
        record: dict[str, int | float] = {}
        dropped: list[str] = []
        for source in ({"step": step} if step is not None else {}, metrics or {}, named):
            for name, value in source.items():
                found = number(value)
                if found is None or not isinstance(name, str):
                    dropped.append(str(name))
                else:
                    record[name] = found
        if dropped:
            self._warn("dropped", f"trainwarden.log keeps numbers only; dropped {sorted(dropped)}"
                       " (pass a number, e.g. loss.item())")  # fmt: skip
        if not record or set(record) == {"step"}:
            return
        line = json.dumps(record)  # NaN, Infinity as the agent reads them; the default encoder is cached (fast)
        self._write(("\n" if self._torn else "") + line + "\n")

    def _write(self, line: str) -> None:
        data = line.encode("utf-8")
        try:
            if self._fd is None:
                assert self.path is not None
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(f"wrote {written} of {len(data)} bytes")
            self._torn = False
        except OSError as exc:
            self._torn = True
            self.close()  # opened again at the next line: a full disk may have room by then
            self._warn(f"write {type(exc).__name__}",
                       f"trainwarden.log cannot write {self.path} and drops metrics until it can: {exc}")  # fmt: skip

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            import logging  # only on trouble: the import costs a training script more than the writer itself

            logging.getLogger("trainwarden").warning("%s", message)


class _Default:
    """The writer `trainwarden.log` uses (made at its first call, or by `init`)."""

    writer: MetricsLog | None = None


def writer(path: str | os.PathLike[str] | None = None) -> MetricsLog:
    """A writer to `path`, else to `$TRAINWARDEN_METRICS`; silent on ranks other than 0."""
    chosen = path if path is not None else os.environ.get(METRICS_ENV) or None
    return MetricsLog(chosen, enabled=rank() == 0)


def init(path: str | os.PathLike[str] | None = None) -> MetricsLog:
    """Where `trainwarden.log` writes from now on: `path`, else `$TRAINWARDEN_METRICS`; returns the writer."""
    if _Default.writer is not None:
        _Default.writer.close()
    _Default.writer = writer(path)
    return _Default.writer


def log(metrics: Mapping[str, Any] | None = None, /, *, step: int | None = None, **named: Any) -> None:
    """Append one line of metrics to the sidecar file: `trainwarden.log(step=100, loss=2.3, lr=3e-4)`.

    Names as given (`{"val/loss": 1.9}` for names that are not Python identifiers); never raises."""
    (_Default.writer or init()).log(metrics, step=step, **named)
