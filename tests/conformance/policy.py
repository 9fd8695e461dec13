"""A case's configured policy: the packaged default with some rules' parameters overridden by a file under
tests/conformance/policies/ (`base: default`, `rules: {rule id: {parameter: value}}`).

Only the named parameters change, so a case tests the default policy's rules at a budget a CI run can wait
for. A parameter the installed rule kind does not take yet (a budget another branch adds) is left out of the
written policy rather than failing every case of the group at load; `dropped` names them for the report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml
from trainwarden.policies.kinds.stall import Stall
from trainwarden.policies.kinds.throughput import Throughput

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parents[1] / "policies" / "default.yaml"
KNOWN = {kind.kind: {f.name for f in dataclasses.fields(kind)} - {"events", "keys"} for kind in (Stall, Throughput)}


def derive(name: str, out: Path) -> tuple[Path, list[str]]:
    """Write policies/NAME.yaml applied to the default policy to `out`; return it and the parameters left out."""
    spec = yaml.safe_load((HERE / "policies" / f"{name}.yaml").read_text())
    if spec.get("base") != "default":
        raise ValueError(f"{name}.yaml: 'base' must be 'default' (the only policy the cases derive from)")
    policy: dict[str, Any] = yaml.safe_load(DEFAULT.read_text())
    policy["name"] = f"conformance-{name}"
    rules = {r["id"]: r for r in policy["rules"]}
    dropped = []
    for rule_id, params in spec["rules"].items():
        rule = rules.get(rule_id)
        if rule is None:  # a rule the default policy does not have (yet)
            dropped += [f"{rule_id}.{key}" for key in params]
            continue
        known = KNOWN.get(rule["kind"])
        for key, value in params.items():
            if known is None or key in known:
                rule[key] = value
            else:
                dropped.append(f"{rule_id}.{key}")
    out.write_text(yaml.safe_dump(policy, sort_keys=False))
    return out, dropped


def stall_budget(name: str | None) -> str:
    """run-stalled's budgets under the policy `name` (None: the default), as the stall table shows them."""
    default = next(r for r in yaml.safe_load(DEFAULT.read_text())["rules"] if r["id"] == "run-stalled")
    params = {k: v for k, v in default.items() if k in KNOWN["stall"] or k.endswith(("_floor", "_budget"))}
    if name is not None:
        params |= yaml.safe_load((HERE / "policies" / f"{name}.yaml").read_text())["rules"]["run-stalled"]
    order = ("floor", "busy_floor", "factor", "eval_floor", "eval_factor", "save_budget", "first_step_budget")
    return ", ".join(f"{k} {params[k]}" for k in order if k in params)
