"""Policy files: YAML -> `Policy`, with every problem reported as `file:line:column: message`.

    name: default
    startup: 30m                 # the startup phase (the seed's "active watch"); or '500 steps', '3 evals'
    mode: enforce                # or shadow: record what rules would decide, act on nothing (a rule: shadow: true)
    primary: {metric: wer, mode: min}   # the eval metric that matters (else: the launch config's, or inferred)
    aliases:                     # extra spellings of a metric, added to the built-in ones
      loss: [loss, my/loss]
    extends: default             # the default policy's rules, changed by this file's (policies/inherit.py);
    disable: [gpu-util-low]      # without it the file is the whole policy
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
from typing import Any

import yaml
from trainwarden.core.errors import YamlFileError
from trainwarden.core.metrics import canonical, is_validation, quality
from trainwarden.core.yamlfile import Schema, compose, did_you_mean, document_schema, in_file_order
from trainwarden.events import types as t
from trainwarden.policies.durations import Persistence, Span, fmt_duration
from trainwarden.policies.errors import PolicyError
from trainwarden.policies.inherit import BASE_SCHEMA, DISABLE_SCHEMA, disabled, merge
from trainwarden.policies.kinds import READERS
from trainwarden.policies.model import (
    DECISIONS,
    DEFAULT_STARTUP_S,
    MODES,
    PHASES,
    SEVERITIES,
    Escalation,
    Kind,
    Policy,
    Primary,
    Rule,
)
from trainwarden.policies.names import expand
from trainwarden.policies.schema import PolicyContext, PolicyReader

RULE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")
DECISION_SCHEMA = {"enum": ["STOP", "WAIT", "none", "anomaly", "stop", "wait", None],
                   "description": "STOP, WAIT or none (anomaly only)"}  # fmt: skip
ALIASES_SCHEMA = {"type": "object", "description": "extra spellings of a metric, added to the built-in ones",
                  "additionalProperties": {"type": "array", "items": {"type": "string"}, "minItems": 1}}  # fmt: skip


def load_policy(text: str, *, source: str, base_text: str | None = None) -> Policy:
    """Parse and validate a policy; raises PolicyError listing every problem. `base_text`: the text of the
    policy that `extends: default` names, as recorded with this one (None: the packaged default)."""
    ctx = PolicyContext(source=source)
    try:
        root = compose(text, source)
    except YamlFileError as exc:
        raise PolicyError([str(exc)], source=source) from None
    if root is None:
        raise PolicyError([f"{source}:1:1: the policy is empty; expected 'name' and a list of 'rules'"], source=source)
    top = PolicyReader(root, ctx, "the policy")
    base = _base(top, base_text)
    name, startup, mode, primary = _header(top, base)
    rules: list[Rule] = []
    nodes: dict[str, yaml.Node] = {}
    if top.has("rules"):
        node = top.value_node("rules")
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            ctx.problem(node, "'rules' must be a non-empty list of rules")
        else:
            for item in node.value:
                rule = _rule(item, ctx, nodes)
                if rule is not None:
                    rules.append(rule)
    elif top.ok and not top.has("extends"):
        ctx.problem(root, "the policy needs a list of 'rules'")
    off = disabled(top)
    if base is not None:
        rules = merge(top, base.rules, rules, off)
    elif off and top.ok and not top.has("extends"):
        top.fail("disable", "'disable' removes rules of the policy this one extends: add 'extends: default'")
    top.finish()
    if ctx.problems:
        raise PolicyError(in_file_order(ctx.problems), source=source)
    return Policy(name=name, rules=tuple(rules), startup=startup, mode=mode, primary=primary, text=text,
                  source=source, base_text=None if base is None else base.text)  # fmt: skip


def _base(top: PolicyReader, base_text: str | None) -> Policy | None:
    """The policy `extends` names (only 'default': the packaged one, or its text as recorded), or None."""
    got = top.raw("extends", BASE_SCHEMA)
    if got is None:
        return None
    node, value = got
    if value != "default":
        top.ctx.problem(node, f"'extends' must be 'default' (the policy shipped with trainwarden), got {value!r}"
                        f"{did_you_mean(str(value), ['default'])}")  # fmt: skip
        return None
    if base_text is None:
        from trainwarden.policies.default import default_policy  # deferred: default.py loads with this module

        return default_policy()
    try:
        return load_policy(base_text, source=f"{top.ctx.source}'s recorded base")
    except PolicyError as exc:
        top.ctx.problem(node, f"the recorded text of the policy it extends does not load: {exc.problems[0]}")
        return None


def _header(top: PolicyReader, base: Policy | None = None) -> tuple[str, Span, str, Primary | None]:
    """The policy's name, startup phase, mode and primary metric (those it does not set: its base's); reads
    its aliases into the context (rules use them)."""
    name = top.string("name", default="policy") or "policy"
    startup = top.span("startup", default=base.startup if base else Span(seconds=DEFAULT_STARTUP_S))
    mode = top.choice("mode", MODES, default=base.mode if base else "enforce")
    got = top.raw("aliases", ALIASES_SCHEMA)
    if got is not None:
        top.ctx.aliases = _aliases(top, *got)
    primary = _primary(top)
    return name, startup, mode, primary if primary is not None or base is None else base.primary


def _primary(top: PolicyReader) -> Primary | None:
    sub = top.section("primary", "the policy's primary metric")
    names = sub.strings("metric", required=sub.present)
    mode = sub.choice("mode", ("min", "max", "auto"), default="auto")
    patience = sub.integer("patience", default=3, minimum=1)
    sub.finish()
    if not names:
        return None
    if mode == "auto":
        found = quality(names[0])
        if found is None:
            sub.ctx.problem(sub.node, f"the primary metric {names[0]!r} is not one whose direction is known "
                            "(wer, bleu, accuracy, map, ...): say 'mode: min' or 'mode: max'")  # fmt: skip
            return None
        mode = found.mode
    spellings = expand([n for name in names for n in (canonical(name), name)], top.ctx.aliases)
    return Primary(names=spellings, mode=mode, patience=patience)


def _aliases(top: PolicyReader, node: yaml.Node, value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and v and all(isinstance(x, str) for x in v)
        for k, v in value.items()
    ):
        top.ctx.problem(node, "'aliases' must map a metric name to a list of names, e.g. loss: [loss, train/loss]")
        return {}
    return {k: tuple(v) for k, v in value.items()}


def _rule(node: yaml.Node, ctx: PolicyContext, seen: dict[str, yaml.Node]) -> Rule | None:
    r = PolicyReader(node, ctx, "a rule")
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
    common = _common(r)
    if kind_name is None:
        r.finish()
        return None
    reader = READERS.get(kind_name)
    if reader is None:
        r.fail(
            "kind",
            f"unknown rule kind {kind_name!r}; expected one of: {', '.join(sorted(READERS))}"
            f"{did_you_mean(kind_name, READERS)}",
        )
        return None
    r.what = f"rule '{rule_id}' (kind {kind_name})"
    kind = reader(r)
    _early_stop(r, kind, common)
    defer = r.boolean("defer", default=_defers(kind))
    r.finish()
    return Rule(id=rule_id, kind=kind, defer=defer, **common)


COLLECTIVE_TIMEOUT_S = 600.0  # PyTorch's default: a rank waits this long for the others before it fails


def _early_stop(r: PolicyReader, kind: Kind, common: dict[str, Any]) -> None:
    """A stall rule that decides STOP may not act before the collective timeout (a slow rank may still arrive)
    unless it says `allow_early_stop: true`."""
    earliest = getattr(kind, "earliest", None)
    escalate = common["escalate"]
    if earliest is None or getattr(kind, "allow_early_stop", True):
        return
    if t.STOP not in (common["decision"], escalate.decision if escalate else None):
        return
    key, seconds = earliest()
    if seconds < COLLECTIVE_TIMEOUT_S:
        r.fail(key if r.has(key) else "decision",
               f"a stall rule that decides STOP would stop after {key} {fmt_duration(seconds)}, sooner than "
               f"PyTorch's collective timeout (10m), while a slow rank may still arrive: set {key} (and the other "
               "budgets: floor, busy_floor, eval_floor, save_budget, first_step_budget) to 10m or more, "
               "or add `allow_early_stop: true`")  # fmt: skip


DEFERRING_KINDS = frozenset({"trend", "divergence", "plateau", "runaway", "past_best"})


def _defers(kind: Kind) -> bool:
    """By default, rules that judge whether eval metrics still improve or ran past their best (trend, divergence,
    plateau, runaway, past_best on a validation metric: the loss-based early stops) hold off while the run's
    primary metric improves: a val loss rising while val accuracy climbs is calibration drift."""
    judged = getattr(kind, "rising", None) or kind.keys or ()
    return kind.kind in DEFERRING_KINDS and bool(judged) and is_validation(judged[0])


def _common(r: PolicyReader) -> dict[str, Any]:
    """The fields every rule kind has."""
    persist = r.persistence("for")
    phase = r.choice("phase", PHASES, default="any")
    severity = r.choice("severity", SEVERITIES, default="warning")
    decision = _decision(r, "decision")
    escalate = _escalation(r)
    remedy = r.string("remedy", default="") or ""
    cooldown = r.span("cooldown", default=Span())
    confirm = r.duration("confirm", default=0.0)
    if confirm and t.STOP not in (decision, escalate.decision if escalate else None):
        r.fail("confirm", "'confirm' applies to rules that decide STOP (decision: STOP, or escalate to STOP)")
    # `shadow`, not `mode`: some kinds have a `mode` of their own (min or max)
    shadow = r.boolean("shadow")
    mode = None if shadow is None else "shadow" if shadow else "enforce"
    return dict(persist=persist, phase=phase, severity=severity, decision=decision, escalate=escalate, remedy=remedy,
                cooldown=cooldown, confirm_s=confirm, mode=mode)  # fmt: skip


def _decision(r: PolicyReader, key: str) -> str | None:
    got = r.raw(key, DECISION_SCHEMA)
    if got is None:
        return None
    _, value = got
    if value is None or (isinstance(value, str) and value.lower() in ("none", "anomaly")):
        return None
    if isinstance(value, str) and value.upper() in DECISIONS:
        return value.upper()
    r.fail(key, f"'{key}' must be STOP, WAIT or none (anomaly only), got {value!r}")
    return None


def _escalation(r: PolicyReader) -> Escalation | None:
    sub = r.section("escalate", f"{r.what}'s escalate")
    decision = _decision(sub, "decision")
    persist = sub.persistence("for")
    if sub.present and sub.ok and "decision" not in sub.fields:
        sub.ctx.problem(sub.node, "escalate needs 'decision' (STOP or WAIT) and 'for' (how long the anomaly persists)")
    sub.finish()
    if decision is None:
        return None
    return Escalation(decision=decision, persist=persist if persist != Persistence() else Persistence(samples=2))


def policy_schema() -> Schema:
    """The policy file's JSON Schema, recorded by running the loader's readers on empty documents."""
    ctx = PolicyContext(source="schema", probe=True)
    top = PolicyReader(None, ctx, "the policy")
    top.raw("extends", BASE_SCHEMA)
    top.raw("disable", DISABLE_SCHEMA)
    _header(top)
    variants = []
    for kind_name, reader in sorted(READERS.items()):
        r = PolicyReader(None, ctx, "a rule")
        r.string("id", required=True, pattern=RULE_ID_RE)
        r.raw("kind", {"const": kind_name}, required=True)
        _common(r)
        reader(r)
        r.boolean("defer", default=False)
        variants.append(r.json_schema())
    rules = {"type": "array", "minItems": 1, "items": {"oneOf": variants}}
    top.declare("rules", rules)  # required without `extends`: the loader says so
    return document_schema("trainwarden policy", top, "A policy file: rules that turn a run's events into anomalies, "
                           "WAIT and STOP decisions (`trainwarden policy check FILE`).")  # fmt: skip
