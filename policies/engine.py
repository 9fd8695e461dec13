"""Incremental evaluation: `evaluate(policy, state, event)` -> what to append. Pure; the caller owns I/O.

Semantics (the training-check method):
- STOP > WAIT > CONTINUE. The decision is the strongest one asked by the rules firing now; it is
  recorded when it changes, and a STOP is final for the run's current launch.
- Persistence: a rule fires once its condition has held `for` N samples or a duration, so a first
  fluctuation does not stop a run; `escalate` asks for a stronger decision if it persists longer.
- Anomalies: `anomaly.opened` once per (run, rule) while it stays open, `anomaly.resolved` when
  the condition clears. Every output names the event that triggered it.
- Time comes only from events (`ts`, never the wall clock), so a replay decides exactly the same.
  `now` is the largest `ts` seen; `tick` events move it forward when a run is quiet.
- Phases: `startup` is the first `startup` seconds after the run's first event (or its launch), or
  its first steps or evals (`500 steps`, `3 evals`); a rule may only open in its phase, and stays
  open until its condition clears. `for`, `escalate.for` and `cooldown` may count steps or evals too.
- Shadow mode: a rule in `mode: shadow` (or every rule of a policy in shadow mode) opens and resolves
  its anomalies as usual (marked `shadow`), but what it would have decided is recorded as a
  `decision.shadow` event and never becomes the run's decision: nothing acts on it.
- The primary metric (policies/primary.py): rules with `defer` do not open, or escalate, while the
  run's primary eval metric is still improving.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from trainwarden.core.plan import NUM_CLASSES
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import Event
from trainwarden.events.payloads import (
    AnomalyOpenedData,
    AnomalyResolvedData,
    DecisionData,
    DecisionShadowData,
    PolicyAppliedData,
    RunEndedData,
    StopCancelledData,
    StopRequestedData,
)
from trainwarden.policies import position
from trainwarden.policies.durations import Persistence, fmt_duration
from trainwarden.policies.model import Outcome, Policy, Rule
from trainwarden.policies.plan import share_done
from trainwarden.policies.primary import improving, track
from trainwarden.policies.rootcause import folded_into
from trainwarden.policies.state import PolicyState, RuleState

_TICK, _METRIC = t.TICK, t.METRIC  # module globals: the hot path reads them often


Lifecycle = Callable[[Policy, PolicyState, Event], list[Outcome]]
_LIFECYCLE: Dispatch[Lifecycle] = Dispatch("the engine's run lifecycle")


def evaluate(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    """Advance `state` (in place) by one event and return the outcomes to append, in order.

    A launch, a stop asked or cancelled and a run's end have a handler in `_LIFECYCLE`; every other type
    is an input the rules read (a dict lookup first: the hot path)."""
    lifecycle = _LIFECYCLE.handlers.get(event.type)
    if lifecycle is not None:
        return lifecycle(policy, state, event)
    if state.ended or event.type not in policy.index.input_types:
        return []
    return _evaluate_input(policy, state, event)


@_LIFECYCLE.on(t.RUN_LAUNCHED)
def _launched(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    position.reset(state, event)
    return []


@_LIFECYCLE.on(t.STOP_REQUESTED)
def _stop_requested(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    # A person asked for the stop (the policy's own requests follow its STOP decision, and where they
    # land in the log depends on batching, so they must not count): what follows is the stop working.
    # Either way the fault lines the stop's signals make belong to it (`_stop_echo`).
    state.stop_asked = event.ts
    if cast(StopRequestedData, event.data).get("by") != "policy":
        state.ended = True
    return []


@_LIFECYCLE.on(t.RUN_FINISHED, t.RUN_FAILED, t.STOP_DONE)
def _ended(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    if not is_current_launch(event, state.launch_seq):
        return []  # the end of an earlier launch, noticed after the relaunch was recorded
    # Rules may watch how a run ends (`run.failed`), but only an end nobody asked for.
    asked = state.ended or state.decision == t.STOP
    out = [] if asked or event.type not in policy.index.input_types else _evaluate_input(policy, state, event)
    state.ended = True
    return out


def _evaluate_input(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    typ = event.type
    index = policy.index
    now = event.ts if state.now is None or event.ts > state.now else state.now
    state.now = now
    if state.start is None:
        state.start = now
    if typ != _TICK:
        state.last_input = now
        if typ == _METRIC:
            position.place(state, event.data, now)
    observed, timed, is_eval, qualities = index.concerned(event)
    if is_eval and position.carried(state, event.data):
        is_eval = False  # the last eval printed again on a training line: no new eval
    if is_eval:
        state.evals += 1
        track(policy, state, event.data, qualities)
    startup = in_startup(policy, state)
    out: list[Outcome] = []
    changed = state.dirty
    if state.kept:
        expired = [rule_id for rule_id, until in state.kept.items() if until <= now]
        for rule_id in expired:
            del state.kept[rule_id]  # the rule may decide again (and STOP, if it still fires)
        changed = changed or bool(expired)
    rules, states, timed_set, planned = policy.rules, state.rules, index.timed_set, index.planned
    startup_only = () if startup else index.startup_only
    for i, rule_id, observe, name, clear_only in observed:
        rs = states.get(rule_id)
        if rs is None:
            rs = _new_rule_state(policy, state, i, start=state.start)
        elif (clear_only or i in startup_only) and not rs.holding and rs.opened_by is None:
            continue  # quiet, and this event cannot make it fire (or its phase is over until a relaunch)
        if i in planned:
            rs.kind_state["progress"] = [share_done(state), state.evals, state.plan.get(NUM_CLASSES)]
        cond = observe(rs.kind_state, event, now, name)
        if cond is None:
            if i not in timed_set:
                continue
        elif not cond and not rs.holding and rs.opened_by is None:
            continue  # the common case: healthy, and was healthy
        changed = (
            _advance(policy, state, rules[i], rs, cond, event=event, startup=startup, out=out, is_eval=is_eval)
            or changed
        )
    for i in timed:
        rule = rules[i]
        rs = states.get(rule.id)
        if rs is not None and (rs.holding or rs.opened_by is not None):
            changed = (
                _advance(policy, state, rule, rs, None, event=event, startup=startup, out=out, is_eval=is_eval)
                or changed
            )
    if changed or state.decision is None:
        state.dirty = False
        out.extend(_decide(policy, state, event, out))
    return out


def apply_policy(policy: Policy, state: PolicyState) -> list[Outcome]:
    """Switch a run's state to `policy` (first evaluation, or a hot reload): returns `policy.applied`
    and the resolution of anomalies whose rule left the policy. Rules whose parameters changed keep
    their open anomaly but start their window over."""
    out: list[Outcome] = []
    sigs = {r.id: sig for r, sig in zip(policy.rules, policy.sigs, strict=True)}
    for rule_id, rs in list(state.rules.items()):
        if rule_id not in sigs:
            if rs.opened_by is not None:
                removed: AnomalyResolvedData = {"rule": rule_id, "reason": "rule removed from the policy",
                                                "opened_by": rs.opened_by, "policy": policy.hash}  # fmt: skip
                out.append(Outcome(t.ANOMALY_RESOLVED, removed))
                state.dirty = True
            del state.rules[rule_id]
            state.deciding.pop(rule_id, None)
        elif rs.sig != sigs[rule_id]:
            rule = policy.rule(rule_id)
            assert rule is not None
            rs.sig, rs.kind_state = sigs[rule_id], rule.kind.initial(state.config, state.now)
            rs.holding, rs.since, rs.samples, rs.escalated = False, None, 0, False
            if rs.opened_by is not None:
                state.dirty = True
                if rule.decision and rule_id not in policy.shadow:
                    state.deciding[rule_id] = rule.decision
                else:
                    state.deciding.pop(rule_id, None)
    if state.now is not None:  # rules new to a running run count from now, not from the run's start
        for i, rule in enumerate(policy.rules):
            if rule.id not in state.rules:
                _new_rule_state(policy, state, i, start=state.now)
    previous, state.policy = state.policy, policy.hash
    applied: PolicyAppliedData = {"policy": policy.hash, "name": policy.name, "previous": previous}
    return [Outcome(t.POLICY_APPLIED, applied), *out]


def in_startup(policy: Policy, state: PolicyState) -> bool:
    """Whether the run is in its startup phase: time since its start, steps since its first, or evals."""
    now, start = state.now, state.start
    elapsed = 0.0 if now is None or start is None else now - start
    return policy.startup.within(elapsed, _steps_since(state, state.first_step), state.evals)


def _steps_since(state: PolicyState, mark: Any) -> int:
    """Steps from `mark` to the run's step now; 0 when either is unknown (a step is a whole number, `7.0` too)."""
    step = state.step
    if type(step) not in (int, float) or type(mark) not in (int, float):
        return 0
    return int(step - mark)


def is_current_launch(event: Event, launch_seq: int | None) -> bool:
    """Whether an ending event (which may name its launch) belongs to the launch `launch_seq`."""
    launch = cast(RunEndedData, event.data).get("launch")
    return type(launch) is not int or launch_seq is None or launch == launch_seq


def _new_rule_state(policy: Policy, state: PolicyState, i: int, *, start: float | None) -> RuleState:
    rule = policy.rules[i]
    rs = RuleState(sig=policy.sigs[i], kind_state=rule.kind.initial(state.config, start))
    state.rules[rule.id] = rs
    return rs


def _advance(
    policy: Policy, state: PolicyState, rule: Rule, rs: RuleState, cond: bool | None, *, event: Event,
    startup: bool, out: list[Outcome], is_eval: bool = False,
) -> bool:  # fmt: skip
    """Move one rule's persistence and anomaly lifecycle forward; True when what it asks for changed."""
    if cond is not None:
        if cond:
            if rs.holding:
                rs.samples += 1
            else:
                rs.holding, rs.since, rs.samples = True, state.now, 1
                rs.since_step, rs.since_evals = state.step, state.evals - is_eval
        elif rs.holding:
            rs.holding, rs.since, rs.samples = False, None, 0
    now: float = state.now  # type: ignore[assignment]  # set by _evaluate_input before any rule advances
    if rs.opened_by is None:
        if not rs.holding or not _persisted(rule.persist, rs, state):
            return False
        if rule.phase != "any" and (rule.phase == "startup") != startup:
            return False
        if (
            rule.cooldown
            and rs.resolved_at is not None
            and rule.cooldown.within(
                now - rs.resolved_at, _steps_since(state, rs.resolved_step), state.evals - rs.resolved_evals
            )
        ):
            return False
        if rule.defer and improving(state, rule):
            return False  # the metric that matters still improves: not an early stop
        if _stop_echo(rule, state, event):
            rs.holding, rs.since, rs.samples = False, None, 0  # the stop's own doing (a Ctrl-C's traceback)
            rs.kind_state = rule.kind.initial(state.config, state.now)
            return False
        if folded_into(policy, state, rule, rs) is not None:
            rs.holding, rs.since, rs.samples = False, None, 0  # a follow-on of the fault open now: its message says it
            rs.kind_state = rule.kind.initial(state.config, state.now)
            return False
        shadow = rule.id in policy.shadow
        rs.reason, rs.values = _explain(rule, rs, state)
        rs.opened_by = event.id
        if (noted := getattr(rule.kind, "opened", None)) is not None:
            noted(rs.kind_state, state.step)  # a log fault clears only once training passes this step
        kind_remedy = getattr(rule.kind, "remedy", None)
        remedy = rule.remedy or (kind_remedy(rs.kind_state) if kind_remedy is not None else None) or ""
        opened: AnomalyOpenedData = {
            "rule": rule.id, "severity": rule.severity, "reason": rs.reason, "values": rs.values,
            "remedy": remedy, "decision": rule.decision, "trigger": event.id, "policy": policy.hash,
        }  # fmt: skip
        if shadow:
            opened["shadow"] = True
        out.append(Outcome(t.ANOMALY_OPENED, opened))
        if rule.decision:
            _ask(policy, state, rule, rs, rule.decision, event=event, out=out)
        _escalate(policy, rule, rs, state, event=event, out=out)
        return True
    if not rs.holding:
        said = getattr(rule.kind, "resolved", None)  # a kind may say how it ended (stall: how long it lasted)
        reason = (said(rs.kind_state) if said is not None else None) or "cleared"
        cleared: AnomalyResolvedData = {
            "rule": rule.id, "reason": reason, "trigger": event.id, "opened_by": rs.opened_by, "policy": policy.hash,
        }  # fmt: skip
        if rule.id in policy.shadow:
            cleared["shadow"] = True
        out.append(Outcome(t.ANOMALY_RESOLVED, cleared))
        rs.opened_by, rs.escalated, rs.resolved_at = None, False, now
        rs.resolved_step, rs.resolved_evals = state.step, state.evals
        state.deciding.pop(rule.id, None)
        return True
    return _escalate(policy, rule, rs, state, event=event, out=out)


def _stop_echo(rule: Rule, state: PolicyState, event: Event) -> bool:
    """Whether a log line is a fault the run's STOP made (its Ctrl-C's KeyboardInterrupt traceback): read within
    the rule kind's `stop_echo_s` after the stop was asked. It is the stop's, recorded by the stop's outcome and
    the line in the log, never an anomaly of its own."""
    window: float | None = getattr(rule.kind, "stop_echo_s", None)
    asked = state.stop_asked
    return window is not None and asked is not None and event.type == t.LOG_LINE and asked <= event.ts <= asked + window


def _persisted(persist: Persistence, rs: RuleState, state: PolicyState) -> bool:
    if not persist.progress:
        return persist.met(rs.samples, _held_for(rs, state.now))
    return persist.met(rs.samples, _held_for(rs, state.now), _steps_since(state, rs.since_step),
                       state.evals - rs.since_evals)  # fmt: skip


def _escalate(
    policy: Policy, rule: Rule, rs: RuleState, state: PolicyState, *, event: Event, out: list[Outcome]
) -> bool:
    esc = rule.escalate
    if esc is None or rs.escalated or not _persisted(esc.persist, rs, state):
        return False
    if rule.defer and improving(state, rule):
        return False
    rs.escalated = True
    rs.reason = f"{rs.reason}, persisting {esc.persist.describe()}"
    if t.DECISION_RANK[esc.decision] > t.DECISION_RANK.get(state.deciding.get(rule.id, t.CONTINUE), 0):
        _ask(policy, state, rule, rs, esc.decision, event=event, out=out)
    return True


def _ask(policy: Policy, state: PolicyState, rule: Rule, rs: RuleState, decision: str, *, event: Event,
         out: list[Outcome]) -> None:  # fmt: skip
    """A rule asks for `decision`: the run's decision weighs it, or, in shadow mode, it is only recorded."""
    if rule.id not in policy.shadow:
        state.deciding[rule.id] = decision
        return
    shadow: DecisionShadowData = {
        "decision": decision, "rule": rule.id, "reason": rs.reason, "values": rs.values, "severity": rule.severity,
        "remedy": rule.remedy, "anomaly": rs.opened_by, "trigger": event.id, "policy": policy.hash,
    }  # fmt: skip
    out.append(Outcome(t.DECISION_SHADOW, shadow))


def _held_for(rs: RuleState, now: float | None) -> float:
    """Seconds the condition has held (0 while it does not)."""
    return 0.0 if rs.since is None or now is None else now - rs.since


def _explain(rule: Rule, rs: RuleState, state: PolicyState) -> tuple[str, dict[str, Any]]:
    reason, values = rule.kind.explain(rs.kind_state)
    values = dict(values)
    if state.step is not None and "step" not in values:
        values["step"] = state.step
        reason += f" at step {state.step}"
    if rule.persist.progress:
        reason += f" for {rule.persist.describe()}"
    elif rule.persist.seconds:
        reason += f" for {fmt_duration(_held_for(rs, state.now))}"
    elif rule.persist.samples > 1:
        reason += f" ({rs.samples} samples in a row)"
    return reason, values


def _decide(policy: Policy, state: PolicyState, event: Event, out: list[Outcome]) -> list[Outcome]:
    if state.decision == t.STOP:
        return []
    strongest: Rule | None = None
    rank = 0
    if state.deciding:
        for rule in policy.rules:
            asked = state.deciding.get(rule.id)
            if asked is not None and t.DECISION_RANK[asked] > rank and rule.id not in state.kept:
                strongest, rank = rule, t.DECISION_RANK[asked]
    if strongest is None:
        if state.decision == t.CONTINUE or (state.decision is None and event.type != t.METRIC):
            return []
        cleared = [o.data["rule"] for o in out if o.type == t.ANOMALY_RESOLVED]
        reason = f"healthy again: {', '.join(cleared)} resolved" if state.decision and cleared else "healthy"
        state.decision = t.CONTINUE
        return [_healthy(policy, event, reason)]
    decision = state.deciding[strongest.id]
    if decision == state.decision:
        return []
    state.decision = decision
    rs = state.rules[strongest.id]
    data: DecisionData = {
        "decision": decision, "rule": strongest.id, "reason": rs.reason, "values": rs.values,
        "severity": strongest.severity, "remedy": strongest.remedy, "anomaly": rs.opened_by, "trigger": event.id,
        "policy": policy.hash,
    }  # fmt: skip
    if decision == t.STOP and strongest.confirm_s:
        data["confirm_s"] = strongest.confirm_s  # a guarded stop: a person may keep it running
    return [Outcome(t.DECISION, data)]


@_LIFECYCLE.on(t.STOP_CANCELLED)
def _keep_running(policy: Policy, state: PolicyState, event: Event) -> list[Outcome]:
    """`stop.cancelled` (Keep running): leave STOP; the rule that asked for it may not decide again
    until `until`. Other rules still decide."""
    if state.decision != t.STOP or state.ended:
        return []
    cancel = cast(StopCancelledData, event.data)  # read with .get: a log may hold other versions' events
    rule = cancel.get("rule") or ""
    until = cancel.get("until")
    state.kept[rule] = float(until) if isinstance(until, int | float) else float("inf")
    state.decision = t.CONTINUE
    who = cancel.get("user") or cancel.get("by") or "someone"
    kept = f"kept running by {who} ({rule} may not stop it again until {until})"
    out = _decide(policy, state, event, [])  # another open rule may still ask for WAIT or STOP
    if not out:
        return [_healthy(policy, event, kept)]
    return [Outcome(o.type, {**o.data, "reason": f"{kept}; {o.data['reason']}"}) for o in out]


def _healthy(policy: Policy, event: Event, reason: str) -> Outcome:
    data: DecisionData = {"decision": t.CONTINUE, "rule": None, "reason": reason, "trigger": event.id,
                          "policy": policy.hash}  # fmt: skip
    return Outcome(t.DECISION, data)
