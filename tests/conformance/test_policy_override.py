"""The stall cases' configured policy: the default with only run-stalled's budgets changed, loadable by the
workers, and the overrides the installed stall kind does not take yet named, not silently kept or lost."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from trainwarden.policies.default import default_policy
from trainwarden.policies.kinds.stall import Stall
from trainwarden.workers.policy_source import read_policy_file

from tests.conformance.matrix import STALL_POLICY
from tests.conformance.policy import HERE, derive


def test_stall_fast_changes_only_run_stalled(tmp_path: Path) -> None:
    path, dropped = derive(STALL_POLICY, tmp_path / "p.yaml")
    derived, default = read_policy_file(path), default_policy()
    assert derived.name == f"conformance-{STALL_POLICY}"
    assert [r for r in derived.rules if r.id != "run-stalled"] == [r for r in default.rules if r.id != "run-stalled"]
    stalled = next(r for r in derived.rules if r.id == "run-stalled")
    assert isinstance(stalled.kind, Stall)
    assert (stalled.kind.floor, stalled.kind.busy_floor) == (10.0, 20.0)
    assert stalled.decision == "WAIT"
    overrides = yaml.safe_load((HERE / "policies" / f"{STALL_POLICY}.yaml").read_text())["rules"]["run-stalled"]
    taken = {f.name for f in dataclasses.fields(Stall)}
    assert dropped == [f"run-stalled.{k}" for k in overrides if k not in taken]
    assert all(getattr(stalled.kind, k) > 0 for k in overrides if k in taken)
