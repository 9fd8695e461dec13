"""The notification pipeline as small pure stages over a per-run state (Alertmanager-style).

    select -> inhibit -> snooze -> dedup -> group -> flap -> (commit)

One fault, one message: once a critical log rule (an OOM, an NCCL timeout, ...) is posted, what
follows from it in the same launch (another rank's traceback, the run's non-zero exit) is a
follow-on and not posted; where the run's exit is read first, its FAILED message names the fault
line the agent sent before it, and the fault's own anomaly then finds the run ended.

Each stage takes the run's `NotifyState` and a `Notice` and returns the notice (possibly changed)
or None with the reason it was dropped. `observe` moves the state forward by the event afterwards,
whether or not anything is posted. Time is the events' own `ts`, never a clock, so folding a run's
log again gives the same notices and the same state: snoozes, flapping and inhibition are
projections of the event log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from trainwarden.bot import message_parts, messages
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import Event
from trainwarden.faults import logtags, words
from trainwarden.policies.model import CRITICAL

SYSTEM_RUN = t.SYSTEM_RUN  # the pseudo-run holding the dead-man's switch and run-less commands
ALL_RULES = "*"
GUARD = "guard"  # the kind of a STOP decision that waits for confirmation
FLAPPING = "flapping"  # the kind of the one message for a rule that opens too often
STOPPED, KEPT = "stopped", "kept"  # how a guarded stop ended

# Events that change the notifier's state or may be posted; feed entries with none are skipped.
INPUT_TYPES = frozenset(
    {t.RUN_LAUNCHED, t.RUN_FINISHED, t.RUN_FAILED, t.DECISION, t.DECISION_SHADOW, t.ANOMALY_OPENED, t.ANOMALY_RESOLVED,
     t.ANOMALY_CHARTED, t.EVIDENCE_BUILT, t.EVIDENCE_FAILED, t.STOP_REQUESTED, t.STOP_DONE, t.STOP_FAILED,
     t.STOP_CANCELLED, t.SNOOZE_SET, t.LAUNCH_FAILED, t.WATCHDOG_STALLED, t.WATCHDOG_RECOVERED, t.POLICY_REJECTED,
     t.COMPONENT_SILENT, t.COMPONENT_RECOVERED, t.LOG_LINE, t.RESUME_SKIPPED, t.PROCESS_DUMP, t.STOP_HELD}
)  # fmt: skip
# Kinds after which the run's parent message offers nothing that can act: it is closed with the outcome.
ENDS_THREAD = frozenset({t.STOP_DONE, t.RUN_FAILED})
# Kinds that are noise control's business; decisions to STOP, stops and failures always go out (what a rule
# in shadow mode would have decided is not one: it may be snoozed, and is not news once the run ended).
QUIETABLE = frozenset({t.ANOMALY_OPENED, t.ANOMALY_RESOLVED, t.WAIT, t.DECISION_SHADOW, t.PROCESS_DUMP})


@dataclass(frozen=True, slots=True)
class Notice:
    """One message to post, keyed by the id of the event that caused it (exactly-once key). Structured,
    not worded: the stages before rendering decide on its kind and rule; its text is built once, by the
    render stage (bot/render.py), from `event`, `facts` and, for a flapping notice, the openings."""

    key: str
    kind: str  # the event type, or WAIT / STOP / GUARD for decisions, or FLAPPING
    event: Event
    rule: str | None = None
    broadcast: bool = False  # also show in the channel (a STOP)
    update_parent: bool = False  # refresh the run's parent message (a resolve), or close it (ENDS_THREAD)
    close_guard: str | None = None  # key of a guarded-stop message to close ...
    guard_outcome: tuple[str, str | None] | None = None  # ... with this outcome: (STOPPED or KEPT, by whom)
    facts: messages.Facts = field(default_factory=messages.Facts)  # beyond the event, as known when selected
    openings: int = 0  # FLAPPING: openings of the rule within window_s
    window_s: float = 0.0

    @property
    def text(self) -> str:
        """The notice's headline (built on each call: the notify path renders once, in bot/render.py)."""
        return headline(self)


@dataclass(slots=True)
class NotifyState:
    threads: dict[str, str] = field(default_factory=dict)  # channel -> ts of the run's parent message there
    headlines: dict[str, str] = field(default_factory=dict)  # channel -> the parent's first text, for its updates
    project: str | None = None  # the launch's W&B project (or its config's `project`): a routing label
    owners: list[str] = field(default_factory=list)  # who launched it (/launch) and its experiment's owner
    severities: dict[str, str] = field(default_factory=dict)  # rule -> severity of its last opening (routing)
    evidence: str | None = None
    evidence_problem: str | None = None  # said in the STOP message: the pack or findings note could not be written
    wandb_url: str | None = None
    ended: bool = False  # stopped, finished, failed or STOP decided: follow-on symptoms are inhibited
    open_rules: list[str] = field(default_factory=list)  # open per the log
    posted_open: dict[str, str] = field(default_factory=dict)  # rule -> key of its posted opening
    opened_at: float | None = None  # when the last posted anomaly opened: others of that moment are its episode
    openings: dict[str, list[float]] = field(default_factory=dict)  # rule -> openings in the flap window
    flapping: dict[str, float] = field(default_factory=dict)  # rule -> time of its last opening
    snoozes: dict[str, float] = field(default_factory=dict)  # rule or ALL_RULES -> until
    guard: str | None = None  # key of the open guarded-stop message
    stop_by: str | None = None  # Slack user who asked for the latest stop
    stop_asked: bool = False  # a stop was requested: the run's end is the stop's doing, not a failure
    fault: str | None = None  # the posted critical log rule that explains this launch's end and what follows
    fault_line: str | None = None  # the first fault the agent read in this launch's log, in a few words
    held_back: str | None = None  # the log id the fold stopped at: a STOP waiting for its outcome (bot/stop_outcome.py)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, channel: str = "") -> NotifyState:
        """`channel`: where a checkpoint written before routing had its one thread (the default channel)."""
        names = {f.name for f in dataclasses.fields(cls)}
        state = cls(**{k: v for k, v in data.items() if k in names})
        if data.get("thread") and not state.threads:
            state.threads[channel] = data["thread"]
            state.headlines[channel] = data.get("headline") or ""
        return state


Stage = Callable[[NotifyState, Notice], tuple[Notice | None, str]]


def select(state: NotifyState, event: Event) -> Notice | None:
    """A notice for an event that needs a person; None for healthy news (pure payload predicate: no text
    is built here)."""
    if messages.notification_builder(event) is None:
        return None
    kind = event.type
    if event.type == t.DECISION:
        decided = cast(p.DecisionData, event.data)
        kind = GUARD if decided.get("decision") == t.STOP and decided.get("confirm_s") else decided["decision"]
    close: str | None = None
    outcome: tuple[str, str | None] | None = None
    if state.guard and event.type in (t.STOP_DONE, t.STOP_FAILED):
        close, outcome = state.guard, (STOPPED, state.stop_by)
    elif state.guard and event.type == t.STOP_CANCELLED:
        close, outcome = state.guard, (KEPT, cast(p.StopCancelledData, event.data).get("user"))
    return Notice(
        key=event.id,
        kind=kind,
        event=event,
        rule=rule_of(event),
        broadcast=kind in (t.STOP, GUARD),
        update_parent=event.type in (t.ANOMALY_RESOLVED, t.WATCHDOG_RECOVERED) or event.type in ENDS_THREAD,
        close_guard=close,
        guard_outcome=outcome,
        facts=messages.Facts(state.evidence, state.evidence_problem, state.fault_line),
    )


def headline(notice: Notice) -> str:
    """The notice's text (pure): its event's line, or the flapping summary."""
    if notice.kind == FLAPPING:
        return messages.flapping(notice.event, openings=notice.openings, window_s=notice.window_s)
    line = messages.notice_line(notice.event, notice.facts)
    if line is None:  # select() made it, so its event has a builder
        raise ValueError(f"no text for a {notice.event.type} notice")
    return line


def guard_outcome(outcome: tuple[str, str | None]) -> str:
    """How a guarded stop ended, in the words of its closed message."""
    how, by = outcome
    return message_parts.guard_outcome_stopped(by) if how == STOPPED else message_parts.guard_outcome_kept(by)


def inhibit(state: NotifyState, notice: Notice) -> tuple[Notice | None, str]:
    if state.fault and (notice.kind == t.RUN_FAILED or (notice.kind == t.ANOMALY_OPENED and is_log(notice.event))):
        return None, "follow-on"  # the fault's message already said why the run ended
    if state.ended and notice.kind in QUIETABLE:
        return None, "inhibited"  # the run was stopped or has ended
    if state.stop_asked and notice.kind == t.RUN_FAILED:
        return None, "stopped"  # the end of a run we asked to stop (Ctrl-C: exit 130) is no failure
    return notice, ""


def snooze(state: NotifyState, notice: Notice) -> tuple[Notice | None, str]:
    if notice.kind not in QUIETABLE:
        return notice, ""
    until = max(state.snoozes.get(notice.rule or "", 0.0), state.snoozes.get(ALL_RULES, 0.0))
    if notice.event.ts < until:
        return None, "snoozed"
    return notice, ""


def dedup(state: NotifyState, notice: Notice) -> tuple[Notice | None, str]:
    rule = notice.rule or ""
    if notice.kind == t.ANOMALY_OPENED and rule in state.posted_open:
        return None, "duplicate"  # the rule is already open
    if notice.kind in (t.ANOMALY_RESOLVED, t.PROCESS_DUMP) and rule not in state.posted_open:
        return None, "unposted"  # a resolve (or a stall's dump) whose opening was not posted
    return notice, ""


def group(state: NotifyState, notice: Notice) -> tuple[Notice | None, str]:
    """One message per episode: anomalies that open at the moment one was posted (one input, several rules:
    a row with `loss nan` and `val_loss nan`) are that message's episode, not news of their own."""
    if notice.kind == t.ANOMALY_OPENED and state.opened_at is not None and notice.event.ts == state.opened_at:
        return None, "grouped"
    return notice, ""


class Flap:
    """More than `threshold` openings of one rule within `window_s` -> one FLAPPING message, then
    silence for that rule until it has not opened for a whole window."""

    def __init__(self, *, threshold: int, window_s: float) -> None:
        self.threshold = threshold
        self.window_s = window_s

    def __call__(self, state: NotifyState, notice: Notice) -> tuple[Notice | None, str]:
        rule = notice.rule or ""
        ts = notice.event.ts
        if notice.kind == t.ANOMALY_RESOLVED and rule in state.flapping:
            return None, "flapping"
        if notice.kind != t.ANOMALY_OPENED:
            return notice, ""
        if rule in state.flapping:
            if ts - state.flapping[rule] < self.window_s:
                state.flapping[rule] = ts
                return None, "flapping"
            del state.flapping[rule]
        recent = [x for x in state.openings.get(rule, []) if x > ts - self.window_s] + [ts]
        state.openings[rule] = recent
        if len(recent) <= self.threshold:
            return notice, ""
        state.flapping[rule] = ts
        state.openings[rule] = []
        return dataclasses.replace(notice, kind=FLAPPING, openings=len(recent), window_s=self.window_s), ""


class Pipeline:
    def __init__(self, *, flap_threshold: int, flap_window_s: float) -> None:
        self.stages: tuple[Stage, ...] = (
            inhibit,
            snooze,
            dedup,
            group,
            Flap(threshold=flap_threshold, window_s=flap_window_s),
        )

    def process(self, state: NotifyState, event: Event, *, held: bool = False) -> tuple[Notice | None, str]:
        """The notice to post for `event` (or None and a one-word reason); moves `state` past the event.
        `held`: a STOP the stop breaker held, or its anomaly's opening: the STOP BREAKER message says it."""
        notice = select(state, event)
        reason = "healthy"
        if notice is not None and held:
            notice, reason = None, "held"
        if notice is not None:
            for stage in self.stages:
                notice, reason = stage(state, notice)
                if notice is None:
                    break
            else:
                commit(state, notice)
        observe(state, event)
        return notice, reason


def commit(state: NotifyState, notice: Notice) -> None:
    """What posting `notice` changes, before it is delivered."""
    rule = notice.rule or ""
    if notice.kind == t.ANOMALY_OPENED:
        state.posted_open[rule] = notice.key
        state.opened_at = notice.event.ts
        if is_log(notice.event) and notice.event.data.get("severity") == CRITICAL:
            state.fault = rule
    elif notice.kind == t.ANOMALY_RESOLVED:
        state.posted_open.pop(rule, None)
    elif notice.kind == GUARD:
        state.guard = notice.key
    if notice.close_guard:
        state.guard = None


Observe = Callable[[NotifyState, Event], None]
_OBSERVE: Dispatch[Observe] = Dispatch("the notifier's fold")


def observe(state: NotifyState, event: Event) -> None:
    """Move the state forward by one event (context that later notices depend on); a type without a handler
    in `_OBSERVE` changes nothing."""
    if event.type != t.RUN_LAUNCHED and event.data.get("shadow") is True:
        return  # a shadow rule's anomaly is not posted, so it is not among the thread's open rules
    handler = _OBSERVE.handlers.get(event.type)
    if handler is not None:
        handler(state, event)


@_OBSERVE.on(t.RUN_LAUNCHED)
def _launched(state: NotifyState, event: Event) -> None:
    # `config` is free-form (the run's own); no producer of this version writes a top-level `wandb_url`
    launched = cast(p.RunLaunchedData, event.data)
    config = launched.get("config") or {}
    wandb_url = config.get("wandb_url") or event.data.get("wandb_url")
    wandb = launched.get("wandb")
    project = (wandb.get("project") if wandb else None) or config.get("project")
    # Every launch starts clean; a resume carries on the run before it, in its threads (RESUMED ... in the thread),
    # and a new launch of the name is a new run to the people reading: its own threads, the old ones left as they were
    resume = p.is_resume(launched)
    fresh = NotifyState(threads=state.threads if resume else {}, headlines=state.headlines if resume else {},
                        wandb_url=wandb_url, project=project if isinstance(project, str) else None,
                        owners=owners_of(launched) or (state.owners if resume else []))  # fmt: skip
    for f in dataclasses.fields(NotifyState):
        setattr(state, f.name, getattr(fresh, f.name))


@_OBSERVE.on(t.ANOMALY_OPENED)
def _opened(state: NotifyState, event: Event) -> None:
    rule = rule_of(event) or ""
    state.severities[rule] = str(event.data.get("severity") or "warning")
    if rule not in state.open_rules:
        state.open_rules.append(rule)


@_OBSERVE.on(t.ANOMALY_RESOLVED)
def _resolved(state: NotifyState, event: Event) -> None:
    rule = rule_of(event) or ""
    if rule in state.open_rules:
        state.open_rules.remove(rule)
        if rule == state.fault:
            state.fault = None  # training went on: it was no end


@_OBSERVE.on(t.LOG_LINE)
def _log_line(state: NotifyState, event: Event) -> None:
    if state.fault_line is None:
        state.fault_line = fault_said(cast(p.LogLineData, event.data))


@_OBSERVE.on(t.DECISION, t.STOP_DONE, t.RUN_FINISHED, t.RUN_FAILED)
def _ending(state: NotifyState, event: Event) -> None:
    if ends_run(event):
        state.ended = True


@_OBSERVE.on(t.STOP_REQUESTED)
def _stop_requested(state: NotifyState, event: Event) -> None:
    asked = cast(p.StopRequestedData, event.data)
    state.stop_by = asked.get("user") if asked.get("by") == "slack" else None
    state.stop_asked = True


@_OBSERVE.on(t.STOP_CANCELLED)
def _stop_cancelled(state: NotifyState, event: Event) -> None:
    state.ended = False


@_OBSERVE.on(t.EVIDENCE_BUILT)
def _evidence_built(state: NotifyState, event: Event) -> None:
    if path := cast(p.EvidenceBuiltData, event.data).get("path"):
        state.evidence, state.evidence_problem = path, None


@_OBSERVE.on(t.EVIDENCE_FAILED)
def _evidence_failed(state: NotifyState, event: Event) -> None:
    failed = cast(p.EvidenceFailedData, event.data)
    state.evidence, state.evidence_problem = failed.get("pack"), messages.evidence_failed(failed)


@_OBSERVE.on(t.SNOOZE_SET)
def _snooze_set(state: NotifyState, event: Event) -> None:
    snoozed = cast(p.SnoozeSetData, event.data)
    key = snoozed.get("rule") or ALL_RULES
    state.snoozes[key] = max(state.snoozes.get(key, 0.0), float(snoozed.get("until", 0.0)))


def owners_of(launched: p.RunLaunchedData) -> list[str]:
    """Who a run's STOP names: the Slack user of /launch, then the experiment's `owner` (a resume has
    neither of its own: it keeps the run's)."""
    return list(dict.fromkeys(u for u in (launched.get("requested_by"), launched.get("owner")) if u))


def ends_run(event: Event) -> bool:
    """After this, symptoms like "GPU idle" or "run silent" are follow-ons, not news."""
    if event.type == t.DECISION:
        decided = cast(p.DecisionData, event.data)
        return decided.get("decision") == t.STOP and not decided.get("confirm_s")
    return event.type in (t.STOP_DONE, t.RUN_FINISHED, t.RUN_FAILED)


def is_log(event: Event) -> bool:
    """An anomaly opened by a log line (a `log_pattern` rule: its values quote the line)."""
    values = event.data.get("values")
    return isinstance(values, dict) and "line" in values


def fault_said(data: p.LogLineData) -> str | None:
    """A fault line of the agent's (oom, nccl, ...) in a few words; None for any other notable line."""
    tag, text = data.get("tag"), data.get("line")
    if not isinstance(tag, str) or not logtags.is_fault(tag) or not isinstance(text, str):
        return None
    line = logtags.tagged_line(text, tag) or text
    return words.describe(tag, line) or words.quote(line)


def rule_of(event: Event) -> str | None:
    """The rule an event is about: a key that anomalies, decisions, stops and snoozes share, read untyped
    because no one payload type holds it."""
    rule: str | None = event.data.get("rule")
    return rule


def posted(state: NotifyState, channel: str, text: str, ts: str) -> None:
    """The run's first message in a channel becomes the parent of its thread there."""
    if channel not in state.threads:
        state.threads[channel] = ts
        state.headlines[channel] = text
