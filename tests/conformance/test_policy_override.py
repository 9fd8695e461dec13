"""The stall cases' configured policy: the default with only the overridden rules' parameters changed, loadable
by the workers, and the overrides the installed kinds do not take yet named, not silently kept or lost."""

from __future__ import annotations

from pathlib import Path

import yaml
from trainwarden.policies.default import default_policy
from trainwarden.policies.kinds.stall import Stall
from trainwarden.policies.kinds.throughput import Throughput
from trainwarden.workers.policy_source import read_policy_file

from tests.conformance.matrix import STALL_POLICY
from tests.conformance.policy import HERE, KNOWN, derive


def test_stall_fast_changes_only_the_rules_it_names(tmp_path: Path) -> None:
    path, dropped = derive(STALL_POLICY, tmp_path / "p.yaml")
    derived, default = read_policy_file(path), default_policy()
    assert derived.name == f"conformance-{STALL_POLICY}"
    overrides = yaml.safe_load((HERE / "policies" / f"{STALL_POLICY}.yaml").read_text())["rules"]
    assert set(overrides) == {"run-stalled", "throughput-drop"}
    assert [r for r in derived.rules if r.id not in overrides] == [r for r in default.rules if r.id not in overrides]
    rules = {r.id: r for r in derived.rules}
    stalled, drop = rules["run-stalled"].kind, rules["throughput-drop"].kind
    assert isinstance(stalled, Stall) and isinstance(drop, Throughput)
    assert (stalled.floor, stalled.busy_floor) == (10.0, 20.0)
    assert (drop.warmup, drop.window, drop.sustained, drop.span) == (10.0, 20.0, 15.0, 3.0)
    assert rules["run-stalled"].decision == "WAIT"
    kinds = {"run-stalled": "stall", "throughput-drop": "throughput"}
    want = [f"{rule}.{k}" for rule, params in overrides.items() for k in params if k not in KNOWN[kinds[rule]]]
    assert dropped == want
