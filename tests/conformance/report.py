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
