"""W&B as a metric source for one run: its local run directory first, the W&B API when a key is set.

Finding the run directory, in order:
1. `wandb_run_dir` from the watch;
2. a `run-<id>.wandb` file held open by the run's processes (wandb's writer is their child);
3. under `wandb_dir` (or, for a launched run, its workdir and its log's directory): the first
   `run-*` / `offline-run-*` directory written after the launch, not taken by another run; for a
   watch without a launch time, `wandb_dir`'s `latest-run`.

Without a local directory but with `wandb_path` (`entity/project/run_id`) and WANDB_API_KEY set,
history rows come from the W&B API (behind `HistoryApi`, polled every `api_interval_s`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from trainwarden.agent import procfs
from trainwarden.agent.config import WANDB_API_INTERVAL_S, WANDB_BASE_URL
from trainwarden.agent.errors import WandbFileError, WandbUnavailable
from trainwarden.agent.wandb_file import RunFile, RunInfo
from trainwarden.agent.wandb_use import TURNED_OFF
from trainwarden.agent.watch import RunWatch
from trainwarden.core.metrics import normalise
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event

RUN_DIR_RE = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-([A-Za-z0-9]+)$")
DEFAULT_BASE_URL = WANDB_BASE_URL
LAUNCH_SLACK_S = 5.0
SEARCH_INTERVAL_S = 1.0  # how often a run without a W&B directory yet is looked at again
EAGER_SEARCH_S = 30.0  # ... except in its first seconds, when it is looked at on every poll


@dataclass(frozen=True, slots=True)
class Row:
    """One history row, numbered for its event: `producer:seq` is stable across re-reads."""

    producer: str  # `<host>/wandb/<run>/<run dir name>` or `<host>/wandbapi/<run>/<run id>`
    seq: int  # file offset past the record, or the API row's `_step` + 1
    metrics: dict[str, float | int]
    ts: float | None
    step: int | None


@dataclass(slots=True)
class Reading:
    available: bool
    reason: str
    url: str | None = None
    rows: list[Row] = field(default_factory=list)
    finished: bool = False  # W&B recorded the run's exit: nothing more will come


class HistoryApi(Protocol):
    """The W&B API, as far as the agent uses it."""

    def history(self, path: str, *, min_step: int) -> list[dict[str, Any]]:
        """Rows of run `entity/project/run_id` with `_step >= min_step`; raises WandbUnavailable."""
        ...


class PublicApi:
    """`wandb.Api().run(path).scan_history()`: needs the wandb package and network access to W&B."""

    def __init__(self, *, api_key: str, timeout_s: float = 20.0) -> None:
        self.api_key = api_key
        self.timeout_s = timeout_s

    def history(self, path: str, *, min_step: int) -> list[dict[str, Any]]:
        try:
            import wandb
        except ImportError as exc:
            raise WandbUnavailable(
                f"the W&B API needs the wandb package: pip install 'trainwarden[wandb]' ({exc})"
            ) from exc
        try:
            run = wandb.Api(api_key=self.api_key, timeout=int(self.timeout_s)).run(path)
            return list(run.scan_history(min_step=min_step))
        except Exception as exc:  # any failure of the remote API means "unreachable now"
            raise WandbUnavailable(f"W&B API: {type(exc).__name__}: {exc}") from exc


def run_url(info: RunInfo | None, base_url: str = DEFAULT_BASE_URL) -> str | None:
    if info is None or not (info.entity and info.project and info.run_id):
        return None
    return f"{base_url.rstrip('/')}/{info.entity}/{info.project}/runs/{info.run_id}"


def run_file(run_dir: Path) -> Path | None:
    m = RUN_DIR_RE.match(run_dir.name)
    if m is None:
        return None
    path = run_dir / f"run-{m.group(1)}.wandb"
    return path if path.exists() else None


def run_dirs(root: Path) -> list[Path]:
    base = root if root.name == "wandb" else root / "wandb"
    try:
        return sorted(p for p in base.iterdir() if RUN_DIR_RE.match(p.name) and p.is_dir())
    except OSError:
        return []


def find_run_dir(watch: RunWatch, pids: Iterable[int], claimed: set[Path]) -> Path | None:
    if watch.wandb_run_dir is not None:
        return watch.wandb_run_dir
    for path in procfs.open_paths(pids):
        if path.endswith(".wandb") and RUN_DIR_RE.match(Path(path).parent.name):
            return Path(path).parent
    if watch.launched_at is not None:
        roots = [r for r in (watch.wandb_dir, watch.workdir, watch.log.parent) if r is not None]
        for root in dict.fromkeys(roots):
            for d in run_dirs(root):
                f = run_file(d)
                if f is not None and d not in claimed and f.stat().st_mtime >= watch.launched_at - LAUNCH_SLACK_S:
                    return d
        return None
    if watch.wandb_dir is not None:
        base = watch.wandb_dir if watch.wandb_dir.name == "wandb" else watch.wandb_dir / "wandb"
        latest = base / "latest-run"
        if latest.exists():
            return latest.resolve()
    return None


class RunWandb:
    """W&B for one run: discovery, then incremental reads of its run file (or of the API)."""

    def __init__(self, *, watch: RunWatch, host: str, run_dir: Path | None = None, offset: int = 0,
                 api: HistoryApi | None = None, api_interval_s: float = WANDB_API_INTERVAL_S,
                 base_url: str = DEFAULT_BASE_URL) -> None:  # fmt: skip
        self.watch = watch
        self.host = host
        self.api = api
        self.api_interval_s = api_interval_s
        self.base_url = base_url
        self.file: RunFile | None = None
        self.run_dir: Path | None = None
        self.info: RunInfo | None = None
        self.finished = False
        self._api_next = 0.0
        self._next_search = 0.0
        self._first_poll: float | None = None
        self._missing: Reading | None = None  # the same answer while no run directory is found
        self._api_step = 0
        self._api_reason = ""
        if run_dir is not None:
            self._open(run_dir, offset)

    @property
    def offset(self) -> int:
        return self.file.offset if self.file is not None else 0

    def _open(self, run_dir: Path, offset: int = 0) -> None:
        path = run_file(run_dir)
        if path is not None:
            self.run_dir = run_dir
            self.file = RunFile(path, offset=offset)

    def poll(self, now: float, pids: Iterable[int], claimed: set[Path]) -> Reading:
        if self.watch.wandb is False:
            return Reading(False, TURNED_OFF)
        if self._first_poll is None:
            self._first_poll = now
        if self.file is None and (now - self._first_poll < EAGER_SEARCH_S or now >= self._next_search):
            # Looking for a run directory reads /proc and lists directories. In a run's first seconds
            # (when wandb creates it) look on every poll, so W&B is the source from the first rows;
            # after that, once a second is plenty.
            self._next_search = now + SEARCH_INTERVAL_S
            found = find_run_dir(self.watch, pids, claimed)
            if found is not None:
                self._open(found)
        if self.file is not None:
            return self._read_file()
        if self.api is not None and self.watch.wandb_path:
            return self._read_api(now)
        if self._missing is None:
            self._missing = Reading(False, self._missing_reason())
        return self._missing

    def _missing_reason(self) -> str:
        where = self.watch.wandb_dir or self.watch.workdir or self.watch.log.parent
        hint = "" if self.watch.wandb_path else "; set wandb_path and WANDB_API_KEY to read it from the W&B API"
        return f"no W&B run directory found for this run (looked in {where}/wandb and its open files){hint}"

    def _read_file(self) -> Reading:
        assert self.file is not None and self.run_dir is not None
        try:
            decoded = self.file.poll()
        except FileNotFoundError:
            self.file = None
            return Reading(False, f"W&B run file in {self.run_dir} disappeared")
        except (WandbFileError, WandbUnavailable) as exc:
            return Reading(False, str(exc))
        if decoded.info is not None:
            self.info = decoded.info
        if decoded.exit is not None:
            self.finished = True
        producer = f"{self.host}/wandb/{self.watch.run}/{self.run_dir.name}"
        rows = [Row(producer, h.end, h.metrics, h.ts, h.step) for h in decoded.history if h.metrics]
        return Reading(True, f"reading W&B run files in {self.run_dir}", run_url(self.info, self.base_url), rows,
                       self.finished)  # fmt: skip

    def _read_api(self, now: float) -> Reading:
        assert self.api is not None and self.watch.wandb_path
        path = self.watch.wandb_path
        parts = path.split("/")
        url = run_url(RunInfo(parts[2], parts[0], parts[1], ""), self.base_url) if len(parts) == 3 else None
        if now < self._api_next:
            ok = not self._api_reason
            return Reading(ok, self._api_reason or f"reading the W&B API for {path}", url)
        self._api_next = now + self.api_interval_s
        try:
            raw_rows = self.api.history(path, min_step=self._api_step)
        except WandbUnavailable as exc:
            self._api_reason = str(exc)
            return Reading(False, self._api_reason, url)
        self._api_reason = ""
        producer = f"{self.host}/wandbapi/{self.watch.run}/{path.rsplit('/', 1)[-1]}"
        rows: list[Row] = []
        for raw in raw_rows:
            step = raw.get("_step")
            if type(step) is not int:
                continue
            metrics = {k: v for k, v in raw.items() if not k.startswith("_") and type(v) in (int, float)}
            ts = raw.get("_timestamp")
            if metrics:
                rows.append(Row(producer, step + 1, metrics, float(ts) if ts is not None else None, step))
            self._api_step = max(self._api_step, step + 1)
        return Reading(True, f"reading the W&B API for {path}", url, rows)


def history_events(run_dir: Path, *, run: str, host: str = "backtest") -> Iterator[Event]:
    """A finished (or still running) W&B run directory's history as metric events, offline.

    The same numbering and names as the agent's live reading (`producer:seq` from file offsets),
    for `trainwarden policy backtest --wandb-dir`.
    """
    path = run_file(run_dir)
    if path is None:
        raise WandbFileError(f"no run-*.wandb file in {run_dir}: expected a W&B run directory (wandb/run-... )")
    reader = RunFile(path)
    producer = f"{host}/wandb/{run}/{run_dir.name}"
    while True:
        before = reader.offset
        decoded = reader.poll()
        for h in decoded.history:
            if not h.metrics:
                continue
            data = normalise(h.metrics)
            if "step" not in data and h.step is not None:
                data["step"] = h.step
            yield make_event(t.METRIC, run=run, host=host, producer=producer, seq=h.end, data=data, ts=h.ts or 0.0)
        if reader.offset == before:
            return
