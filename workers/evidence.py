"""Evidence packs: why a run was stopped, in a form a person can read on their own later.

`build_pack` is pure (state + decision -> JSON, Markdown and the FINAL_SUMMARY line); `write_pack`
is the only I/O and is safe to repeat: the directory name comes from the decision, and files are
replaced atomically.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trainwarden.core.redact import redact, redact_text
from trainwarden.events.codec import json_safe
from trainwarden.events.envelope import Event
from trainwarden.events.packfiles import CHART, REPORT, STACKS
from trainwarden.events.projection import RunState
from trainwarden.workers.report import data_source, next_check, render_report, utc

# Values rules report beside the offending metric; the chart plots the metric itself.
NOT_METRICS = frozenset({"step", "baseline", "verdict", "improvement", "silent_s", "line"})


@dataclass(frozen=True, slots=True)
class Pack:
    relative_dir: str
    evidence: dict[str, Any]
    report: str
    summary: str  # the FINAL_SUMMARY line
    chart: bytes | None = None
    stacks: str | None = None  # where a stalled run was stuck (workers/dump_request.py stacks_text)

    @property
    def files(self) -> list[str]:
        return ["evidence.json", REPORT, *([CHART] if self.chart else []), *([STACKS] if self.stacks else [])]


def triggering_metric(values: dict[str, Any], recent: list[dict[str, Any]]) -> str | None:
    """The metric that fired, when it is one of the recorded metrics (so it can be plotted)."""
    return next((k for k in values if k not in NOT_METRICS and not k.startswith("trailing_")
                 and any(k in m for m in recent)), None)  # fmt: skip


def build_pack(
    *, state: RunState, decision: Event, log_tail: list[str], files_inspected: list[str], root: Path,
    chart: bytes | None = None, log_lines: str | None = None, stacks: str | None = None,
) -> Pack:  # fmt: skip
    """`log_lines`: where `log_tail` is in the run's log (`lines 41-50`), cited as evidence."""
    data = decision.data
    rule = data.get("rule") or "manual"
    trigger_step = (data.get("values") or {}).get("step")
    decided = utc(decision.ts)
    relative_dir = f"{decision.run}/{decided:%Y%m%dT%H%M%SZ}-{rule}"
    source, actual = data_source(state, now=decision.ts)
    evidence = json_safe(
        redact(
            {
                "run": decision.run,
                "host": data.get("run_host") or state.host,
                "decision": data.get("decision"),
                "rule": rule,
                "reason": data.get("reason"),
                "severity": data.get("severity"),
                "remedy": data.get("remedy"),
                "offending_values": data.get("values", {}),
                "trigger_event": data.get("trigger"),
                "decision_event": decision.id,
                "policy": data.get("policy"),
                "decided_at": decided.isoformat(),
                "status": state.status,
                # where the rule fired (the run may have gone on since: `last_step`)
                "step": trigger_step if isinstance(trigger_step, int) else state.step,
                "last_step": state.step,
                "last_metrics": state.last_metrics,
                "recent_metrics": list(state.recent_metrics),
                "open_anomalies": state.open_anomalies,
                "log_tail": log_tail,
                "config": state.launch,
                "log_path": state.launch.get("log_path"),
                "log_lines": log_lines,
                "wandb_url": state.launch.get("wandb_url"),
                "evidence_pack": str(root / relative_dir),
                "data_source": source,  # the training-check method's: wandb_ok | log_fallback | unreachable
                "source": actual,  # the agent's own, in words
                "files_inspected": files_inspected,
                "chart": CHART if chart else None,
                "stuck": state.dump,  # the latest process.dump's summary (its text: stacks.txt)
                "stacks": STACKS if stacks else None,
                "next_check": next_check(state.status, data.get("decision"), now=decision.ts, interval_s=0),
            }
        )
    )
    summary = final_summary(evidence, root / relative_dir)
    evidence["final_summary"] = summary
    return Pack(relative_dir=relative_dir, evidence=evidence, report=render_report(evidence), summary=summary,
                chart=chart, stacks=stacks)  # fmt: skip


def final_summary(ev: dict[str, Any], pack_dir: Path | str) -> str:
    """One line that says it all (the training-check method prints it when it stops a run): the step is the
    trigger's; `-` for a fact not known (`step=-`: the stop came before any metric line, a fault at start-up)."""

    def v(key: str) -> str:
        return "-" if ev.get(key) is None else str(ev[key])

    def quoted(key: str) -> str:
        return "-" if ev.get(key) is None else repr(str(ev[key]))

    return (
        f"FINAL_SUMMARY run={v('run')} host={v('host')} decision={v('decision')} rule={v('rule')} "
        f"step={v('step')} reason={quoted('reason')} remedy={quoted('remedy')} evidence={pack_dir}"
    )


def write_pack(root: Path, pack: Pack) -> Path:
    """Write the pack's files under root/<run>/<time>-<rule>/; returns that directory."""
    target = root / pack.relative_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".pack-", dir=target.parent))
    (tmp / "evidence.json").write_text(json.dumps(pack.evidence, indent=2, default=str, allow_nan=False) + "\n")
    (tmp / REPORT).write_text(pack.report)
    if pack.chart:
        (tmp / CHART).write_bytes(pack.chart)
    if pack.stacks:
        (tmp / STACKS).write_text(pack.stacks)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


TAIL_LINES = 30  # log lines in a pack
AFTER_TRIGGER = 10  # of those, how many follow the trigger's line when it is no longer in the last ones


def read_log_tail(
    path: str | None, *, lines: int = TAIL_LINES, max_bytes: int = 256 * 1024, step: int | None = None,
    words: tuple[str, ...] = (),
) -> list[str]:  # fmt: skip
    """Lines of a local log file around the trigger, secrets masked, or [] when it is not readable from here."""
    found = log_excerpt(path, lines=lines, max_bytes=max_bytes, step=step, words=words)
    return found.lines if found else []


@dataclass(frozen=True, slots=True)
class LogExcerpt:
    path: str
    first: int  # the first line's number in the file (1-based): evidence cites `train.log lines 41-50`
    lines: list[str]

    @property
    def span(self) -> str:
        last = self.first + len(self.lines) - 1
        return f"line {self.first}" if last == self.first else f"lines {self.first}-{last}"


def log_excerpt(
    path: str | None, *, lines: int = TAIL_LINES, max_bytes: int = 256 * 1024, step: int | None = None,
    words: tuple[str, ...] = (),
) -> LogExcerpt | None:  # fmt: skip
    """Lines of a local log file around the trigger with the first one's number, secrets masked; None when
    the file is not readable from here (or empty).

    The pack is built a moment after the decision; a fast trainer has printed many lines since, so
    the lines shown end shortly after the one that fired (see `excerpt`), not at the end of the file."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            start = max(0, size - max_bytes)
            before = _newlines(f, start)  # lines wholly before the window: the numbers evidence cites
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    every = text.splitlines()
    first = 1
    if start > 0 and every:
        every, first = every[1:], before + 2  # the first one was cut by the seek
    if not every:
        return None
    begin = excerpt_start(every, lines=lines, step=step, words=words)
    shown = every[begin : begin + lines]
    return LogExcerpt(path=path, first=first + begin, lines=[redact_text(line) for line in shown])


def _newlines(f: BinaryIO, end: int, chunk: int = 1 << 20) -> int:
    f.seek(0)
    count = 0
    while (left := end - f.tell()) > 0:
        data = f.read(min(chunk, left))
        if not data:
            break
        count += data.count(b"\n")
    return count


def excerpt(every: list[str], *, lines: int, step: int | None, words: tuple[str, ...]) -> list[str]:
    """Pure: the lines `excerpt_start` picks."""
    begin = excerpt_start(every, lines=lines, step=step, words=words)
    return every[begin : begin + lines]


def excerpt_start(every: list[str], *, lines: int, step: int | None, words: tuple[str, ...]) -> int:
    """Pure: where the shown lines start: the last `lines` lines, or, when the trigger's line is older than
    those, the `lines` lines ending `AFTER_TRIGGER` after it. The trigger's line is the last one naming `step`
    as a number of its own and one of `words` (the metric, its value); else the last one naming `step`."""
    last = max(0, len(every) - lines)
    if step is None or len(every) <= lines:
        return last
    token = re.compile(rf"(?<![\w.]){step}(?![\w.])")
    wanted = tuple(w.lower() for w in words if w)
    found: int | None = None
    for i in range(len(every) - 1, -1, -1):
        if token.search(every[i]):
            if not wanted or any(w in every[i].lower() for w in wanted):
                found = i
                break
            found = i if found is None else found
    if found is None or found >= len(every) - lines:
        return last
    return max(0, found + 1 + min(AFTER_TRIGGER, lines // 3) - lines)
