"""The metric that matters: which eval metric says whether a run is worth continuing, and whether it
still improves.

Eval loss rising while the word error rate (or accuracy, BLEU, mAP) still improves is no early stop:
rules with `defer` hold off while the run's primary metric beat its best within its last `patience`
evals (its first value is no improvement). Where the primary comes from, first found wins:
1. the launch config: `primary_metric` (and `primary_mode`: min or max), at its top level or under `params`;
2. the policy's `primary: {metric: ..., mode: ...}`;
3. what the run prints: the first eval event holding eval metrics of exactly one known family (core/metrics.py
   `QUALITIES`: wer, cer, bleu, accuracy, top1, map, f1, ...) names it;
4. several families side by side (accuracy, F1 and MCC of one classifier) and none named: their consensus.
   The run improves while at least half of them beat their best within `patience` evals: a val loss rising
   while accuracy, F1 and MCC climb is calibration drift, not a doomed run (issue 39).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainwarden.core.metrics import canonical, quality
from trainwarden.policies.kinds.relations import lookup
from trainwarden.policies.model import Policy, Primary, Rule
from trainwarden.policies.names import expand, finite
from trainwarden.policies.state import PolicyState

DEFAULT_PATIENCE = 3
CONFIG_KEYS = (("primary_metric", "primary_mode"), ("params.primary_metric", "params.primary_mode"))


def from_config(config: Mapping[str, Any]) -> Primary | None:
    """The primary metric the launch config names, or None (also when its direction cannot be told)."""
    for metric_key, mode_key in CONFIG_KEYS:
        name = lookup(dict(config), metric_key)
        if isinstance(name, str) and name:
            mode = lookup(dict(config), mode_key)
            if mode not in ("min", "max"):
                found = quality(name)
                mode = found.mode if found else None
            if mode is not None:
                return Primary(names=expand((canonical(name), name)), mode=str(mode), patience=DEFAULT_PATIENCE)
    return None


def _resolve(policy: Policy, state: PolicyState, qualities: tuple[tuple[str, str], ...]) -> dict[str, Any] | None:
    named = from_config(state.config) or policy.primary
    if named is not None:
        return {"names": list(named.names), "mode": named.mode, "patience": named.patience, "how": "named"}
    families = {quality(k).family for k, _ in qualities if quality(k) is not None}  # type: ignore[union-attr]
    if not families:
        return None
    if len(families) > 1:  # accuracy and F1 side by side, none named: no guess of one, their consensus
        members = {name: {"mode": mode} for name, mode in qualities}
        return {"names": list(members), "members": members, "patience": DEFAULT_PATIENCE, "how": "consensus"}
    name, mode = qualities[0]
    return {"names": [name], "mode": mode, "patience": DEFAULT_PATIENCE, "how": "inferred"}


def track(policy: Policy, state: PolicyState, data: Mapping[str, Any], qualities: tuple[tuple[str, str], ...]) -> None:
    """Fold one eval event into the run's primary metric: its best value and evals since that best."""
    pr = state.primary
    if pr is None:
        pr = state.primary = _resolve(policy, state, qualities)
        if pr is None:
            return
    if "members" in pr:
        for name, member in pr["members"].items():
            if (value := finite(data.get(name))) is not None:
                _fold(member, value, member["mode"])
        return
    value = next((finite(data[n]) for n in pr["names"] if n in data), None)
    if value is None:
        return
    _fold(pr, value, pr["mode"])
    pr["value"], pr["metric"] = value, next(n for n in pr["names"] if n in data)


def _fold(pr: dict[str, Any], value: float, mode: str) -> None:
    """One eval value into a metric's best and the evals since it (its first value is no improvement yet)."""
    best = pr.get("best")
    if best is None:
        pr["best"], pr["since_best"] = value, None
    elif value < best if mode == "min" else value > best:
        pr["best"], pr["since_best"] = value, 0
    elif pr.get("since_best") is not None:
        pr["since_best"] += 1


def improving(state: PolicyState, rule: Rule) -> bool:
    """Whether the run's primary metric improved on its best within its last `patience` evals (and the rule
    does not judge the primary metric itself)."""
    pr = state.primary
    if pr is None or set(pr["names"]) & set(rule.kind.keys or ()):
        return False
    if "members" in pr:  # the consensus: at least half of them improving
        recent = [m for m in pr["members"].values() if _recent(m, pr["patience"])]
        return bool(recent) and 2 * len(recent) >= len(pr["members"])
    return _recent(pr, pr["patience"])


def _recent(pr: dict[str, Any], patience: int) -> bool:
    return pr.get("since_best") is not None and pr["since_best"] < patience
