"""The real frameworks on the CPU under the real agent and workers: each case's verdict against the
one its scenario expects (tests/conformance/matrix.py); a known gap is a strict xfail (GAPS.md)."""

from __future__ import annotations

import pytest

from tests.conformance.matrix import CASES, Case
from tests.conformance.runner import Result

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.gap)] if c.gap else []) for c in CASES],
)
def test_verdict(case: Case, conformance: dict[str, Result]) -> None:
    r = conformance[case.id]
    problems = r.problems()
    assert not problems, (
        f"{case.id}: {problems}\nverdict: {r.verdict}; anomalies: {r.anomalies}; exit {r.exit_code}; "
        f"bad line: {r.trigger_line!r}\n--- log tail\n{r.tail}"
    )
