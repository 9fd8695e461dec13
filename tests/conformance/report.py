"""The conformance matrix as text: framework x scenario -> verdict and latency (bad line -> STOP)."""

from __future__ import annotations

from tests.conformance.matrix import CASES, SCENARIOS
from tests.conformance.runner import Result


def cell(r: Result) -> str:
    mark = "ok" if not r.problems() else ("xfail" if r.case.gap else "FAIL")
    latency = f", {r.latency_ms:.0f} ms" if r.latency_ms is not None else ""
    return f"{r.verdict}{latency} [{mark}]"


def matrix_text(results: dict[str, Result]) -> str:
    frameworks = list(dict.fromkeys(c.framework for c in CASES))
    scenarios = [s for s in SCENARIOS if any(c.scenario == s for c in CASES)]
    rows = ["| framework | " + " | ".join(scenarios) + " |", "|---" * (len(scenarios) + 1) + "|"]
    for fw in frameworks:
        cells = [cell(results[f"{fw}-{s}"]) if f"{fw}-{s}" in results else "" for s in scenarios]
        rows.append(f"| {fw} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def stall_text(results: dict[str, Result]) -> str:
    """The stall cases: the configured budget, the measured delay (last step -> run-stalled; for a quiet case
    the longest gap between steps, which had to outlast the step budget), the verdict."""
    from tests.conformance.policy import stall_budget

    cols = ("case", "policy: run-stalled's budget", "last step -> run-stalled", "longest step gap", "verdict",
            "differs", "alert")  # fmt: skip
    rows = ["| " + " | ".join(cols) + " |", "|---" * len(cols) + "|"]
    for r in results.values():
        e = SCENARIOS[r.case.scenario]
        if e.wait_s is None and e.slow_gap_s is None:
            continue
        delay = f"{r.stall_ms / 1000:.1f} s" if r.stall_ms is not None else "none"
        gap = f"{r.max_gap_s:.1f} s" if r.max_gap_s is not None else "-"
        policy = f"{r.case.policy or 'default'}: {stall_budget(r.case.policy)}"
        differs = "; ".join(r.problems()) or "-"
        alert = (r.stall_reason or "-") + (f"; dump: {r.dumps[0]}" if r.dumps else "")
        rows.append(f"| {r.case.id} | {policy} | {delay} | {gap} | {cell(r)} | {differs} | {alert} |")
    return "\n".join(rows) + "\n" if len(rows) > 2 else ""
