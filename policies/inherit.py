"""`extends:` and `disable:`: a policy written as changes to the default policy, so that a lab's one rule does not
drop the default's safety rules (a NaN loss's STOP).

    name: mine
    extends: default              # the packaged default policy's rules ...
    disable: [gpu-util-low]       # ... less these ...
    rules:                        # ... with a rule of the same id replaced (in its place), a new id added
      - {id: gn-high, kind: threshold, metric: grad_norm, above: 100, decision: WAIT}

Without `extends` the file is the whole policy, as it always was (docs/decisions/0039-policy-extends.md).
The merged rules make the policy: its hash, recorded with every decision, covers them. Pure.
"""

from __future__ import annotations

import yaml
from trainwarden.core.yamlfile import did_you_mean
from trainwarden.policies.model import Rule
from trainwarden.policies.schema import PolicyReader

BASE_SCHEMA = {"enum": ["default"], "description": "the policy whose rules this file changes: 'default', the "
               "packaged one (without it the file is the whole policy)"}  # fmt: skip
DISABLE_SCHEMA = {"type": "array", "items": {"type": "string", "minLength": 1},
                  "description": "ids of the extended policy's rules to leave out"}  # fmt: skip


def disabled(top: PolicyReader) -> tuple[tuple[yaml.Node, str], ...]:
    """The `disable:` entries, each with its node (an unknown id is reported there)."""
    top.declare("disable", DISABLE_SCHEMA)
    return top.string_list("disable", expected="a list of rule ids, e.g. [gpu-util-low]")


def merge(
    top: PolicyReader, base: tuple[Rule, ...], own: list[Rule], off: tuple[tuple[yaml.Node, str], ...]
) -> list[Rule]:
    """`base`'s rules less the disabled ones, each replaced by `own`'s rule of the same id, then `own`'s new ids;
    a disabled id the base lacks, or that this file also defines, is a problem at its entry."""
    ids = {r.id for r in base}
    mine = {r.id: r for r in own}
    gone: set[str] = set()
    for node, rule_id in off:
        if rule_id not in ids:
            top.ctx.problem(node, f"'disable' names rule {rule_id!r}, which the default policy does not have"
                            f"{did_you_mean(rule_id, ids)}")  # fmt: skip
        elif rule_id in mine:
            top.ctx.problem(node, f"rule {rule_id!r} is both disabled and defined in 'rules': keep one (a rule of "
                            "the same id already replaces the default's)")  # fmt: skip
        gone.add(rule_id)
    kept = [mine.get(r.id, r) for r in base if r.id not in gone]
    return kept + [r for r in own if r.id not in ids]
