"""The scorecard: how a policy did on labelled past runs, judged like a careful human. Pure.

A run's backtest (policies/backtest.py) is scored against its label (trainwarden/tools/corpus.py):
a doomed run must be stopped no later than its useful stop point, a healthy run never stopped
nor paged (critical), a fault named by a rule or a message, every file read (metrics > 0), and
each anomaly episode posted at most once. Messages are the ones the Slack bot would post: the
engine's outcomes folded through the bot's own notification pipeline (bot/stages.py).
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from trainwarden.bot.config import FLAP_THRESHOLD, FLAP_WINDOW_S
from trainwarden.bot.stages import GUARD, NotifyState, Pipeline
from trainwarden.events import types as t
from trainwarden.ops.backtest import moment_json
from trainwarden.policies.backtest import Backtest, Moment
from trainwarden.policies.model import CRITICAL
from trainwarden.tools.corpus import DEV, NOSTOP, STOP, TEST, CorpusRun

# How a rule id, its reason or a message names a fault; a word not listed here must appear as itself.
FAULT_NAMES = {
    "oom": r"\boom\b|out of memory|outofmemory|resource ?exhausted",
    "nccl": r"\bnccl",
    "nan": r"\bnan\b|non-?finite|\binf\b",
    "disk": r"disk.?full|no space left",
    "dataloader": r"data ?loader",
    # a hang said as one (`hang: NCCL's watchdog got stuck`, `hung`, a deadlock), not a quoted heartbeat line
    "hang": r"\bhang(?:s|ing)?\b|\bhung\b|\bdeadlock",
}
# The bar, one criterion per failure a run can have (RunScore.failed holds their keys).
CRITERIA = {
    "metrics": "the file yields metrics",
    "stopped_in_time": "a doomed run is stopped no later than its stop_by",
    "healthy_not_stopped": "a healthy run is not stopped",
    "healthy_not_paged": "a healthy run gets no critical alarm",
    "fault_named": "a fault is named by a rule or a message",
    "one_message_per_episode": "the bot posts at most one message per anomaly episode",
}
# Posted notices that are not counted against an episode: a STOP is always posted (and scored as a
# stop), a guarded stop is one, and a RESOLVED note closes the episode.
_NOT_COUNTED = frozenset({t.STOP, GUARD, t.ANOMALY_RESOLVED})


class Lines:
    """Byte offsets -> 1-based line numbers of one file (an event's `seq` is the end of its line)."""

    def __init__(self, data: bytes) -> None:
        self.ends = [i for i, b in enumerate(data) if b == 0x0A]

    def at(self, offset: int) -> int:
        return bisect.bisect_left(self.ends, max(0, offset - 1)) + 1


@dataclass(slots=True)
class RunScore:
    file: str
    label: str
    metrics: int
    part: str = DEV  # the manifest's part: dev (tuned on) or test (held out)
    stop: Moment | None = None
    stop_line: int | None = None
    stop_by: str | None = None  # the manifest's useful stop point, as text
    in_time: bool | None = None  # STOP runs only
    anomalies: int = 0
    critical: int = 0
    fault_named: bool | None = None  # ANOMALY runs only
    episodes: int = 0
    messages: int = 0  # counted against episodes
    worst_episode: int = 0  # the most messages one episode got
    gpu_hours_saved: float | None = None  # STOP runs that were stopped
    problems: list[str] = field(default_factory=list)  # the criteria this run fails, in words ...
    failed: list[str] = field(default_factory=list)  # ... and as CRITERIA keys

    def fail(self, criterion: str, problem: str) -> None:
        self.failed.append(criterion)
        self.problems.append(problem)

    @property
    def ok(self) -> bool:
        return not self.problems


def score_run(run: CorpusRun, result: Backtest, *, lines: Lines | None, gpus: float, interval: float) -> RunScore:
    """`lines` maps the STOP's event to its line (a log file); `gpus`/`interval` are used where the
    manifest gives none (`interval`: the seconds between metric lines the backtest assumed)."""
    score = RunScore(file=run.file, label=run.label, metrics=result.metrics, part=run.part, stop=result.stop)
    score.anomalies = len(result.firings)
    score.critical = sum(1 for m in result.firings if m.what == CRITICAL)
    if score.stop is not None and lines is not None:
        score.stop_line = lines.at(score.stop.seq)
    posted = _posted(result)
    _messages(score, result, posted)
    if score.metrics == 0 and run.metric_lines:
        score.fail("metrics", "no metric read")
    elif score.metrics and not run.metric_lines:
        score.fail("metrics", f"{score.metrics} metric(s) read from a file with no metric line")
    if run.kind == STOP:
        _doomed(score, run, result, gpus=gpus, interval=interval)
    elif run.kind == NOSTOP:
        if score.stop is not None:
            score.fail("healthy_not_stopped", f"healthy run stopped ({score.stop.rule})")
        if score.critical:
            score.fail("healthy_not_paged", f"{score.critical} critical alarm(s) on a healthy run")
    elif run.fault is not None:
        score.fault_named = names_fault(run.fault, result, [text for _, _, text in posted])
        if not score.fault_named:
            score.fail("fault_named", f"fault '{run.fault}' not named")
    if score.worst_episode > 1:
        score.fail("one_message_per_episode", f"{score.worst_episode} messages in one anomaly episode")
    return score


def _doomed(score: RunScore, run: CorpusRun, result: Backtest, *, gpus: float, interval: float) -> None:
    stop, by = score.stop, run.stop_by
    score.stop_by = str(by) if by else None
    if stop is None:
        score.in_time = False
        score.fail("stopped_in_time", "doomed run not stopped")
        return
    at = _position(score, stop, by.unit if by else "step")
    score.in_time = by is not None and at is not None and at <= by.value
    if not score.in_time:
        unit = by.unit if by else "step"
        score.fail("stopped_in_time", f"stopped late: {unit} {at if at is not None else '?'} > {by}")
    score.gpu_hours_saved = saved_gpu_hours(result, stop, run, gpus=gpus, interval=interval)


def _position(score: RunScore, stop: Moment, unit: str) -> float | None:
    value = {"line": score.stop_line, "step": stop.step, "epoch": stop.epoch}[unit]
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def saved_gpu_hours(result: Backtest, stop: Moment, run: CorpusRun, *, gpus: float, interval: float) -> float:
    """GPU-hours between the STOP and the run's end: the run's share after the STOP times its `hours`,
    or the time the backtest assumed (metric lines `interval` apart, rescaled to the run's own)."""
    gpus = run.gpus or gpus
    first, last = result.first_ts or 0.0, result.last_ts or 0.0
    after = max(0.0, last - stop.ts)
    if run.hours is not None:
        return run.hours * gpus * (after / (last - first) if last > first else 0.0)
    return after * ((run.interval or interval) / interval) / 3600 * gpus


def _posted(result: Backtest) -> list[tuple[float, str, str]]:
    """(ts, kind, text) of what the bot would post for the run, in order."""
    pipeline = Pipeline(flap_threshold=FLAP_THRESHOLD, flap_window_s=FLAP_WINDOW_S)
    state = NotifyState()
    out = []
    for event in result.outcomes:
        notice, _ = pipeline.process(state, event)
        if notice is not None:
            out.append((event.ts, notice.kind, notice.text))
    return out


def _messages(score: RunScore, result: Backtest, posted: list[tuple[float, str, str]]) -> None:
    """An episode is the anomalies that open at one moment of the run (in a log: between two metric
    lines); its messages are the notices posted at that moment, but for STOPs and RESOLVED notes."""
    moments = {e.ts for e in result.outcomes if e.type == t.ANOMALY_OPENED}
    counted = Counter(ts for ts, kind, _ in posted if ts in moments and kind not in _NOT_COUNTED)
    score.episodes = len(moments)
    score.messages = sum(counted.values())
    score.worst_episode = max(counted.values(), default=0)


def names_fault(word: str, result: Backtest, texts: list[str]) -> bool:
    """Whether a fired rule (its id or reason) or a posted message names the fault."""
    pattern = re.compile(FAULT_NAMES.get(word, rf"\b{re.escape(word)}\b"), re.IGNORECASE)
    said = [f"{m.rule} {m.reason}" for m in (*result.firings, *result.timeline)] + texts
    return any(pattern.search(text) for text in said)


@dataclass(slots=True)
class Totals:
    runs: int = 0
    doomed: int = 0
    stopped_in_time: int = 0
    stopped_late: int = 0
    healthy: int = 0
    healthy_stopped: int = 0
    healthy_confirm_stops: int = 0  # of those, confirm-STOPs (a person could have kept the run): target <= 1 in 20
    healthy_anomalies: int = 0
    healthy_critical: int = 0
    faults: int = 0
    faults_named: int = 0
    no_metrics: int = 0
    episodes: int = 0
    messages: int = 0
    episodes_over_one: int = 0
    gpu_hours_saved: float = 0.0
    failing: int = 0  # runs with a problem

    @property
    def false_alarms_per_healthy_run(self) -> float:
        return self.healthy_anomalies / self.healthy if self.healthy else 0.0

    @property
    def meets_bar(self) -> bool:
        return self.failing == 0


def totals(scores: list[RunScore]) -> Totals:
    out = Totals(runs=len(scores))
    for s in scores:
        kind = s.label.partition(":")[0]
        out.doomed += kind == STOP
        out.stopped_in_time += bool(s.in_time)
        out.stopped_late += kind == STOP and s.stop is not None and not s.in_time
        out.healthy += kind == NOSTOP
        if kind == NOSTOP:
            out.healthy_stopped += s.stop is not None
            out.healthy_confirm_stops += s.stop is not None and s.stop.confirm_s > 0
            out.healthy_anomalies += s.anomalies
            out.healthy_critical += s.critical
        out.faults += s.fault_named is not None
        out.faults_named += bool(s.fault_named)
        out.no_metrics += "metrics" in s.failed
        out.episodes += s.episodes
        out.messages += s.messages
        out.episodes_over_one += s.worst_episode > 1
        out.gpu_hours_saved += s.gpu_hours_saved or 0.0
        out.failing += not s.ok
    return out


def run_json(s: RunScore, result: Backtest) -> dict[str, Any]:
    stop = None if s.stop is None else moment_json(s.stop, first_ts=result.first_ts, line=s.stop_line)
    return {"file": s.file, "label": s.label, "part": s.part, "metrics": s.metrics, "stop": stop, "stop_by": s.stop_by,
            "in_time": s.in_time, "anomalies": s.anomalies, "critical": s.critical, "fault_named": s.fault_named,
            "episodes": s.episodes, "messages": s.messages, "worst_episode": s.worst_episode,
            "gpu_hours_saved": s.gpu_hours_saved, "problems": s.problems, "failed": s.failed}  # fmt: skip


def totals_json(tot: Totals) -> dict[str, Any]:
    names = [f for f in Totals.__dataclass_fields__]
    out: dict[str, Any] = {name: getattr(tot, name) for name in names}
    out["false_alarms_per_healthy_run"] = tot.false_alarms_per_healthy_run
    out["meets_bar"] = tot.meets_bar
    return out


def parts(scores: list[RunScore]) -> dict[str, Totals]:
    """The totals of the development part and of the held-out test part, reported side by side."""
    return {part: totals([s for s in scores if s.part == part]) for part in (DEV, TEST)}


def part_lines(scores: list[RunScore]) -> list[str]:
    """One line per part: a policy is judged by the test part it was never tuned on, beside the dev part."""
    names = {DEV: "Development part (tuned on):", TEST: "Test part (held out):      "}
    out = []
    for part, tot in parts(scores).items():
        if tot.runs:
            out.append(f"{names[part]} {tot.runs - tot.failing}/{tot.runs} right; doomed stopped in time "
                       f"{tot.stopped_in_time}/{tot.doomed}, healthy stopped {tot.healthy_stopped}/{tot.healthy}, "
                       f"confirm-STOPs on healthy {tot.healthy_confirm_stops}/{tot.healthy}, faults named "
                       f"{tot.faults_named}/{tot.faults}, no metric read {tot.no_metrics}")  # fmt: skip
    return out


def table(scores: list[RunScore], tot: Totals) -> list[str]:
    """The printed scorecard: one line per run (a held-out run marked `*`), then the totals and each part's."""
    width = max([len(s.file) + 1 for s in scores] + [4])
    lines = [f"{'file':<{width}}  {'label':<13} {'metrics':>7}  {'stop':<22} {'alarms':>6} {'msgs/ep':>7}  verdict"]
    for s in scores:
        stop = "-" if s.stop is None else _stop_text(s)
        alarms = f"{s.anomalies}" + (f"({s.critical}!)" if s.critical else "")
        verdict = "ok" if s.ok else "; ".join(s.problems)
        name = s.file + ("*" if s.part == TEST else "")
        lines.append(f"{name:<{width}}  {s.label:<13} {s.metrics:>7}  {stop:<22} {alarms:>6} "
                     f"{s.worst_episode:>7}  {verdict}")  # fmt: skip
    lines += [
        "",
        f"Doomed runs stopped in time:  {tot.stopped_in_time}/{tot.doomed} ({tot.stopped_late} late)",
        f"Healthy runs stopped:         {tot.healthy_stopped}/{tot.healthy}",
        f"Confirm-STOPs asked on healthy runs: {tot.healthy_confirm_stops}/{tot.healthy} (target: at most 1 in 20)",
        f"False alarms per healthy run: {tot.false_alarms_per_healthy_run:.2f} "
        f"({tot.healthy_anomalies} anomalies, {tot.healthy_critical} critical)",
        f"Faults named:                 {tot.faults_named}/{tot.faults}",
        f"Files with no metric read:    {tot.no_metrics}/{tot.runs}",
        f"Messages per anomaly episode: {tot.messages} for {tot.episodes} episodes "
        f"({tot.episodes_over_one} run(s) with an episode posted more than once)",
        f"GPU-hours a STOP would have saved: {tot.gpu_hours_saved:.2f}",
        "",
        *part_lines(scores),
        f"{tot.runs - tot.failing}/{tot.runs} runs judged right: "
        + ("the policy meets the bar." if tot.meets_bar else "the policy does NOT meet the bar."),
    ]
    return lines


def _stop_text(s: RunScore) -> str:
    assert s.stop is not None
    where = f"line {s.stop_line}" if s.stop_line is not None else f"step {s.stop.step}"
    confirm = "?" if s.stop.confirm_s else ""  # a confirm-STOP: asked here, a person could have kept the run
    return f"{where} {(s.stop.rule or '')[: 21 - len(where) - len(confirm)]}{confirm}"
