"""Policy files: YAML -> `Policy`, with every problem reported as `file:line:column: message`.

    name: default
    startup: 30m                 # the startup phase (the seed's "active watch")
    aliases:                     # extra spellings of a metric, added to the built-in ones
      loss: [loss, my/loss]
    rules:
      - id: loss-nonfinite
        kind: nonfinite
        metric: loss
        decision: STOP
        severity: critical
        remedy: lower the learning rate, add warmup or gradient clipping

Pure: takes text and a name for messages; reading files is the caller's business.
"""

from __future__ import annotations

import re

import yaml
from trainwarden.events import types as t
from trainwarden.policies.durations import Persistence
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.kinds import READERS
from trainwarden.policies.model import DECISIONS, DEFAULT_STARTUP_S, PHASES, SEVERITIES, Escalation, Policy, Rule
from trainwarden.policies.schema import Context, Reader, plain

RULE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


def load_policy(text: str, *, source: str) -> Policy:
    """Parse and validate a policy; raises PolicyError listing every problem."""
    ctx = Context(source=source)
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise PolicyError([f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"], source=source) from None
    if root is None:
        raise PolicyError([f"{source}:1:1: the policy is empty; expected 'name' and a list of 'rules'"], source=source)
    top = Reader(root, ctx, "the policy")
    name = top.string("name", default="policy") or "policy"
    startup_s = top.duration("startup", default=DEFAULT_STARTUP_S)
    if top.has("aliases"):
        ctx.aliases = _aliases(top, ctx)
    rules: list[Rule] = []
    if top.has("rules"):
        node = top.value_node("rules")
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            ctx.problem(node, "'rules' must be a non-empty list of rules")
        else:
            seen: dict[str, yaml.Node] = {}
            for item in node.value:
                rule = _rule(item, ctx, seen)
                if rule is not None:
                    rules.append(rule)
    elif top.ok:
        ctx.problem(root, "the policy needs a list of 'rules'")
    top.finish()
    if ctx.problems:
        raise PolicyError(ctx.problems, source=source)
    return Policy(name=name, rules=tuple(rules), startup_s=startup_s, text=text, source=source)


def _aliases(top: Reader, ctx: Context) -> dict[str, tuple[str, ...]]:
    node = top.value_node("aliases")
    value = plain(node)
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and v and all(isinstance(x, str) for x in v)
        for k, v in value.items()
    ):
        ctx.problem(node, "'aliases' must map a metric name to a list of names, e.g. loss: [loss, train/loss]")
        return {}
    return {k: tuple(v) for k, v in value.items()}


def _rule(node: yaml.Node, ctx: Context, seen: dict[str, yaml.Node]) -> Rule | None:
    r = Reader(node, ctx, "a rule")
    if not r.ok:
        return None
    rule_id = r.string("id", required=True) or "?"
    if r.has("id") and rule_id != "?":
        if not RULE_ID_RE.match(rule_id):
            r.fail("id", f"rule id {rule_id!r} must be 1-80 letters, digits, '_', '.', '-'")
        elif rule_id in seen:
            r.fail("id", f"rule id {rule_id!r} is used twice (first at line {seen[rule_id].start_mark.line + 1})")
        seen.setdefault(rule_id, r.value_node("id"))
    r.what = f"rule '{rule_id}'"
    kind_name = r.string("kind", required=True)
    persist = r.persistence("for")
    phase = r.choice("phase", PHASES, default="any")
    severity = r.choice("severity", SEVERITIES, default="warning")
    decision = _decision(r, "decision")
    escalate = _escalation(r, ctx)
    remedy = r.string("remedy", default="") or ""
    cooldown = r.duration("cooldown", default=0.0)
    confirm = r.duration("confirm", default=0.0)
    if confirm and t.STOP not in (decision, escalate.decision if escalate else None):
        r.fail("confirm", "'confirm' applies to rules that decide STOP (decision: STOP, or escalate to STOP)")
    if kind_name is None:
        r.finish()
        return None
    reader = READERS.get(kind_name)
    if reader is None:
        r.fail("kind", f"unknown rule kind {kind_name!r}; expected one of: {', '.join(sorted(READERS))}")
        return None
    r.what = f"rule '{rule_id}' (kind {kind_name})"
    kind = reader(r)
    r.finish()
    return Rule(id=rule_id, kind=kind, persist=persist, phase=phase, severity=severity, decision=decision,
                escalate=escalate, remedy=remedy, cooldown_s=cooldown, confirm_s=confirm)  # fmt: skip


def _decision(r: Reader, key: str) -> str | None:
    if not r.has(key):
        return None
    value = plain(r.value_node(key))
    if value is None or (isinstance(value, str) and value.lower() in ("none", "anomaly")):
        return None
    if isinstance(value, str) and value.upper() in DECISIONS:
        return value.upper()
    r.fail(key, f"'{key}' must be STOP, WAIT or none (anomaly only), got {value!r}")
    return None


def _escalation(r: Reader, ctx: Context) -> Escalation | None:
    if not r.has("escalate"):
        return None
    sub = Reader(r.value_node("escalate"), ctx, f"{r.what}'s escalate")
    decision = _decision(sub, "decision")
    persist = sub.persistence("for")
    if sub.ok and "decision" not in sub.fields:
        ctx.problem(sub.node, "escalate needs 'decision' (STOP or WAIT) and 'for' (how long the anomaly persists)")
    sub.finish()
    if decision is None:
        return None
    return Escalation(decision=decision, persist=persist if persist != Persistence() else Persistence(samples=2))
