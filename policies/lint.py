"""What `policy check` warns about in a valid policy: a choice that is allowed but is probably not meant. Pure.

A policy that stops runs but has no rule for a non-finite loss lets a NaN run go on burning GPU-hours: the
usual cause is a custom policy written as a whole file (without `extends: default`), which drops the default's
rules (policies/inherit.py).
"""

from __future__ import annotations

from trainwarden.core.metrics import canonical
from trainwarden.events import types as t
from trainwarden.policies.model import Policy, Rule


def _stops(policy: Policy, rule: Rule) -> bool:
    """Whether the rule can stop a run: it decides STOP (at once or on escalation) and is not in shadow mode."""
    decides = t.STOP in (rule.decision, rule.escalate.decision if rule.escalate else None)
    return decides and (rule.mode or policy.mode) == "enforce"


def _watches_nonfinite_loss(rule: Rule) -> bool:
    return rule.kind.kind == "nonfinite" and any(canonical(name) == "loss" for name in rule.kind.keys or ())


def warnings(policy: Policy) -> list[str]:
    """One line per warning; none for the default policy or one that extends it (unless it disables the rule)."""
    stopper = next((r for r in policy.rules if _stops(policy, r)), None)
    if stopper is None or any(_watches_nonfinite_loss(r) for r in policy.rules):
        return []
    return [
        f"warning: policy {policy.name!r} stops runs (rule {stopper.id!r}) but has no rule for a non-finite loss, "
        "so a NaN run is never stopped: add `extends: default` or a `kind: nonfinite` rule on loss"
    ]
