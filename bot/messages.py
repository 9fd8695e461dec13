"""Every notice the bot posts to the channel, built by a named function.

Notification texts are what a phone's lock screen shows, so each carries the whole meaning in one
line: what happened, to which run on which host, the value that triggered it, and the rule.
Replies to commands are in bot/replies.py. Nothing here touches I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from trainwarden.bot import stall_messages
from trainwarden.bot import watcher_messages as watchers
from trainwarden.bot.message_parts import remedy, truncated
from trainwarden.core.redact import redact_text
from trainwarden.core.words import clock, exit_status, number, said, sparkline, word_end
from trainwarden.events import payloads as p
from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import Event
from trainwarden.policies.durations import fmt_duration

NOTICE_MAX = 3_000  # a notice is shown as one section block, which Slack caps at this (bot/limits.py)
FAILED_TAIL_LINES = 8  # of a failed run's log (its run.failed holds up to 20), each cut at FAILED_LINE_MAX
FAILED_LINE_MAX = 240
MASK_MARGIN = 500  # masked beyond the cut, so that no secret is cut in half and shown in part


# -- formatting helpers ---------------------------------------------------------------------------


def where(event: Event) -> str:
    """`run@host`: `run_host` is in the payload of every worker-made type that names the run's host."""
    return f"{event.run}@{event.data.get('run_host') or event.host}"


def who(user: object) -> str:
    """A Slack mention of the user, or words when none was recorded. A caller of another surface
    (`mcp:research-agent`, an agent over MCP) is no Slack id: it is said as it is, not mentioned."""
    if user and ":" in str(user):
        return str(user)
    return f"<@{user}>" if user else "someone"


def rule_and(d: object, *more: str) -> str:
    """`(rule, severity, ...)`: the parts that are known."""
    data = d if isinstance(d, dict) else {}
    parts = [str(x) for x in (data.get("rule"), data.get("severity"), *more) if x]
    return f" ({', '.join(parts)})" if parts else ""


# -- notifications ---------------------------------------------------------------------------------


def anomaly_opened(event: Event) -> str:
    d = cast(p.AnomalyOpenedData, event.data)
    tried = f" {remedy(str(d.get('remedy')))}." if d.get("remedy") else ""
    return f"ANOMALY {where(event)}: {said(d.get('reason'), 'no reason recorded')}{rule_and(d)}.{tried}"


def metrics_unreadable(event: Event) -> str:
    """The agent reads the run's log and finds no training metric in it: said with a line of it and the fixes."""
    d = cast(p.AnomalyOpenedData, event.data)
    why = said(d.get("reason"), "no training metric read")
    why = why.removeprefix(f"status={reading.UNREADABLE} (").removesuffix(")")  # the status rule's `status=X (why)`
    return f"{reading.label(why)} {where(event)}: {reading.unreadable_text(why)}{rule_and(d)}."


def is_unreadable(event: Event) -> bool:
    """An anomaly opened by the agent's `unreadable` (a status rule on source.status of source `reading`)."""
    values = event.data.get("values")
    return isinstance(values, dict) and values.get("status") == reading.UNREADABLE


def anomaly_resolved(event: Event) -> str:
    d = cast(p.AnomalyResolvedData, event.data)
    how = "" if d.get("reason") in (None, "cleared", "rule removed from the policy") else f"resolved: {d.get('reason')}"
    return f"RESOLVED {where(event)}: {said(d.get('rule'), 'an anomaly')} {how or 'is healthy again'}."


def decision(event: Event) -> str:
    d = cast(p.DecisionData, event.data)
    rule = f" ({d['rule']})" if d.get("rule") else ""
    return f"{said(d.get('decision'), 'DECISION')} {where(event)}: {said(d.get('reason'), 'no reason recorded')}{rule}"


def would_have(event: Event) -> str:
    """A rule in shadow mode: what it would have done, said so that nobody reads it as done."""
    d = cast(p.DecisionShadowData, event.data)
    verb = "WOULD HAVE STOPPED" if d.get("decision") == t.STOP else f"WOULD HAVE DECIDED {said(d.get('decision'))} FOR"
    rule = f"{d['rule']}, " if d.get("rule") else ""
    return (
        f"{verb} {where(event)}: {said(d.get('reason'), 'no reason recorded')} "
        f"({rule}shadow mode: nothing was stopped; "
        "set the rule's `shadow: false` or the policy's `mode: enforce` to let it act)"
    )


def guarded_stop(event: Event) -> str:
    d = cast(p.DecisionData, event.data)
    reason = said(d.get("reason"), "no reason recorded")
    rule = f" ({d['rule']})" if d.get("rule") else ""
    return f"Stopping {where(event)} in {fmt_duration(d.get('confirm_s', 0))}: {reason}{rule}"


def flapping(event: Event, *, openings: int, window_s: float) -> str:
    d = cast(p.AnomalyOpenedData, event.data)
    return (
        f"FLAPPING {where(event)}: {said(d.get('rule'), 'a rule')} opened {openings} times in "
        f"{fmt_duration(window_s)}; quiet until it settles. Last: {said(d.get('reason'), 'no reason recorded')}"
    )


def stop_done(event: Event, evidence_path: str | None, evidence_problem: str | None = None) -> str:
    """A person's reason (`trainwarden stop --reason`, /stop) is said; a policy's was in its STOP notice."""
    d = cast(p.StopResultData, event.data)
    pack = f" Evidence: {evidence_path}" if evidence_path else ""
    problem = f" {evidence_problem}" if evidence_problem else ""
    reason = f" Reason: {d['reason']}." if d.get("reason") and d.get("by") not in (None, "policy") else ""
    detail = said(d.get("detail"), "the run was stopped")
    return f"STOPPED {where(event)}: {detail}.{reason}{pack}{problem}"


def stop_failed(event: Event, evidence_problem: str | None = None) -> str:
    d = cast(p.StopResultData, event.data)
    problem = f" {evidence_problem}" if evidence_problem else ""
    error = said(d.get("error"), "no error recorded")
    by_hand = f"Stop it by hand: {d['hint']}" if d.get("hint") else "Stop the training process by hand."
    return f"STOP FAILED {where(event)}: {error}. {by_hand}{problem}"


def evidence_failed(data: p.EvidenceFailedData) -> str:
    """Said in the STOP message: the stop went on, its evidence (or findings note) did not get written."""
    problems = data.get("problems") or [f"{said(data.get('path'))}: {said(data.get('error'), 'no error recorded')}"]
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"Evidence could not be written: {problems[0]}{more}; fix the path's permissions or space."


def stop_cancelled(event: Event) -> str:
    d = cast(p.StopCancelledData, event.data)
    return (
        f"KEPT RUNNING {where(event)}: {who(d.get('user'))} pressed Keep running; "
        f"{said(d.get('rule'), 'the rule')} is snoozed until {clock(d.get('until', event.ts))}."
    )


def run_failed(event: Event, fault: str | None = None) -> str:
    """`fault`: what the log said before the end (`CUDA out of memory. Tried to allocate 2.00 GiB`), if anything.
    Without one, the log's last lines say why (`bash: --workdir: command not found`, a config error)."""
    d = cast(p.RunEndedData, event.data)
    after = f" after: {fault}" if fault else ""
    text = f"FAILED {where(event)}: the training process {exit_status(d.get('exit_code'))}{after}."
    tail = [str(line)[:FAILED_LINE_MAX].replace("```", "` ` `") for line in d.get("log_tail") or []]
    while tail and not tail[-1].strip():
        tail.pop()
    if tail and not fault:
        text += " The log ends with:\n```\n" + "\n".join(tail[-FAILED_TAIL_LINES:]) + "\n```"
    return text


def policy_rejected(event: Event) -> str:
    d = cast(p.PolicyRejectedData, event.data)
    problems = d.get("problems") or []
    first = problems[0] if problems else "unknown problem"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"POLICY REJECTED: {said(d.get('source'), 'a policy file')} has errors, still using policy "
        f"{said(d.get('kept'), 'the one before')}: {first}{more}. "
        "Fix it (check with `trainwarden policy check FILE`); workers reload it at their next job."
    )


def launched(event: Event) -> str:
    d = cast(p.RunLaunchedData, event.data)
    gpus = ",".join(str(g) for g in d.get("gpus") or []) or "-"
    return (
        f"LAUNCHED {event.run}@{d.get('server') or event.host} by {who(d.get('requested_by'))}: GPUs {gpus}, "
        f"tmux session {said(d.get('session'), '-')}, log {said(d.get('log_path'), 'not recorded')}"
    )


def resumed(event: Event, fault: str | None = None) -> str:
    """An automatic resume, with the failure it follows as the workers' fold knew it; `fault`: what the failed
    attempt's log said (the notifier's state of that attempt)."""
    d = cast(p.RunLaunchedData, event.data)
    after = d.get("resumed_after")
    attempts = f" (attempt {d.get('attempt', '?')} of {int(d.get('max_restarts') or 0) + 1})"
    checkpoint = d.get("checkpoint")
    start = f" from {checkpoint.rsplit('/', 1)[-1]}" if checkpoint else " (its resume_command names no checkpoint)"
    cause = f" after the training process {exit_status(after['exit_code'] if after else None)}"
    rule = after.get("rule") if after else None
    if rule or fault:
        cause += " (" + "; ".join(x for x in (f"rule {rule}" if rule else "", fault or "") if x) + ")"
    return f"RESUMED {event.run}@{d.get('server') or event.host}{attempts}{start}{cause}."


def resume_skipped(event: Event) -> str:
    """A failed run the workers did not relaunch: why, and what to do (a refused or exhausted resume)."""
    d = cast(p.ResumeSkippedData, event.data)
    attempt = f" after attempt {d['attempts']}" if d.get("attempts") else ""
    fix = f" Fix: {d['fix']}." if d.get("fix") else ""
    return f"NOT RESUMED {event.run}{attempt}: {said(d.get('reason'), 'no reason recorded')}.{fix}"


def launch_failed(event: Event) -> str:
    d = cast(p.LaunchFailedData, event.data)
    return (f"LAUNCH FAILED {event.run}@{d.get('server') or event.host} (asked by {who(d.get('user'))}): "
            f"{said(d.get('error'), 'no error recorded')}")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Facts:
    """What a notice's text says beyond its event, as the notifier knew it when the event was selected
    (the text itself is built later, once, by the render stage)."""

    evidence_path: str | None = None
    evidence_problem: str | None = None
    fault: str | None = None


Builder = Callable[[Event, Facts], str]
Choose = Callable[[Event], Builder | None]  # an event's builder, or None where its payload needs nobody
_NOTICES: Dispatch[Choose] = Dispatch("the notices' builders")


def notification_builder(event: Event) -> Builder | None:
    """How to word an event that needs a person, or None for everything else (healthy news, a type with no
    entry in `_NOTICES`): choosing costs no text, so noise control can drop a notice before anything is built."""
    if event.data.get("shadow") is True:
        return None  # a shadow rule's anomaly: its decision.shadow says what it would have done
    choose = _NOTICES.handlers.get(event.type)
    return None if choose is None else choose(event)


@_NOTICES.on(t.ANOMALY_OPENED)
def _anomaly_opened(event: Event) -> Builder:
    return lambda e, _f: metrics_unreadable(e) if is_unreadable(e) else anomaly_opened(e)


@_NOTICES.on(t.DECISION)
def _decision(event: Event) -> Builder | None:
    """A STOP that waits for confirmation, a STOP or a WAIT; a CONTINUE needs nobody."""
    decided = cast(p.DecisionData, event.data)
    if decided.get("decision") == t.STOP and decided.get("confirm_s"):
        return lambda e, _f: guarded_stop(e)
    if decided.get("decision") in (t.STOP, t.WAIT):
        return lambda e, _f: decision(e)
    return None


@_NOTICES.on(t.STOP_DONE)
def _stop_done(event: Event) -> Builder:
    return lambda e, f: stop_done(e, f.evidence_path, f.evidence_problem)


@_NOTICES.on(t.STOP_FAILED)
def _stop_failed(event: Event) -> Builder:
    return lambda e, f: stop_failed(e, f.evidence_problem)


@_NOTICES.on(t.RUN_FAILED)
def _run_failed(event: Event) -> Builder:
    return lambda e, f: run_failed(e, f.fault)


@_NOTICES.on(t.RUN_LAUNCHED)
def _run_launched(event: Event) -> Builder | None:
    """An automatic resume, or a launch a person asked for; a launch by hand (the CLI's) needs nobody."""
    launch = cast(p.RunLaunchedData, event.data)
    if launch.get("resumed_after"):
        return lambda e, f: resumed(e, f.fault)
    if launch.get("requested_by"):
        return lambda e, _f: launched(e)
    return None


# Types whose text needs only the event (no facts, no choice by payload).
_TEXTS: dict[str, Callable[[Event], str]] = {
    t.DECISION_SHADOW: would_have, t.ANOMALY_RESOLVED: anomaly_resolved, t.STOP_CANCELLED: stop_cancelled,
    t.POLICY_REJECTED: policy_rejected, t.RESUME_SKIPPED: resume_skipped, t.LAUNCH_FAILED: launch_failed,
    t.PROCESS_DUMP: stall_messages.process_dump,
}  # fmt: skip


def _text_only(event: Event) -> Builder:
    """This module's `_TEXTS` and, about trainwarden's own daemons, bot/watcher_messages.py's `TEXTS`."""
    text_of = _TEXTS.get(event.type) or watchers.TEXTS[event.type]
    return lambda e, _f: text_of(e)


_NOTICES.on(*_TEXTS)(_text_only)
_NOTICES.on(*watchers.TEXTS)(_text_only)  # a type in both is refused here, at import


def notification_text(
    event: Event, *, evidence_path: str | None = None, evidence_problem: str | None = None, fault: str | None = None
) -> str | None:
    """The line for an event that needs a person, or None for everything else (healthy news)."""
    return notice_line(event, Facts(evidence_path, evidence_problem, fault))


def notice_line(event: Event, facts: Facts) -> str | None:
    """The event's line with the facts captured for it, masked and cut to a notice's size; None: healthy news."""
    build = notification_builder(event)
    return None if build is None else masked_head(build(event, facts), NOTICE_MAX)


def masked_head(text: str, limit: int) -> str:
    """`text` with secrets masked, cut to `limit` with a marker. Only the head is scanned: masking is
    slow on very long texts (a 60,000-character launch error), and only the head is ever shown."""
    if len(text) <= limit:
        return redact_text(text)
    masked = redact_text(text[: limit + MASK_MARGIN])
    keep = word_end(masked, max(0, limit - len(truncated(len(text)))))
    return masked[:keep] + truncated(len(text) - keep)


def with_mentions(text: str, users: Sequence[str]) -> str:
    """A message that asks someone to act, naming who: the run's owner, the route's mentions."""
    return f"{text} cc {' '.join(f'<@{u}>' for u in users)}" if users else text


def pack_shared(event: Event, files: Sequence[str]) -> str:
    """The comment on the evidence files shared in the run's thread."""
    d = cast(p.EvidenceBuiltData, event.data)
    pack_dir = d.get("path") if event.type == t.EVIDENCE_BUILT else cast(p.EvidenceFailedData, event.data).get("pack")
    pack = f" Pack: {pack_dir}" if pack_dir else ""
    return f"EVIDENCE {where(event)} ({d.get('rule')}): {', '.join(files)}.{pack}"


def anomaly_charted(event: Event) -> str:
    """The comment on a critical anomaly's chart, shared in the thread of its ANOMALY message."""
    d = cast(p.AnomalyChartedData, event.data)
    return f"CHART {where(event)}: {d.get('metric')} ({d.get('rule')}, {d.get('severity')}). {d.get('reason')}"


def metric_trend(name: str, values: Sequence[float]) -> str:
    return " ".join(x for x in (name, sparkline(values), f"(last {len(values)}: {number(values[-1])})") if x)
