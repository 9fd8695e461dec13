"""The root cause wins: a follow-on of a fault already open does not open an anomaly of its own.

When one rank fails, the others report what they see of it: the NCCL watchdog times out on every rank after
an ECC error, torchrun sends SIGTERM to the survivors and prints ChildFailedError, tracebacks repeat the
error. Each fault line has a stage in a failure (faults/model.py: cause, unexplained,
collective, teardown); a log rule whose line is at a later stage than a log anomaly open now, opened at most
`FOLD_WINDOW_S` before, folds into it: the first cause's message already says what happened. A fault at
the same or an earlier stage (a second, different cause; an ECC error after a plain traceback) opens as
usual, and once training goes on (the open fault cleared) or the window passed, anything new reports.
Pure: reads the engine's state, changes nothing.
"""

from __future__ import annotations

from typing import Any

from trainwarden.faults import CAUSE, TEARDOWN, UNEXPLAINED, logtags, signature_of
from trainwarden.policies.model import Policy, Rule
from trainwarden.policies.state import PolicyState, RuleState

# The NCCL watchdog's default timeout is 10 min (30 in older torch) and torchrun reports after it: an hour
# covers a follow-on; a fault later than that is news even if the first one never cleared.
FOLD_WINDOW_S = 3600.0
_NON_FAULT = {logtags.TRACEBACK: UNEXPLAINED, logtags.ERROR: UNEXPLAINED, logtags.FILE_NOT_FOUND: CAUSE}


def stage(st: dict[str, Any]) -> int | None:
    """Where the line a log rule holds stands in a failure; None for a rule holding no line."""
    tag, line = st.get("tag"), st.get("line")
    if not isinstance(tag, str) or not isinstance(line, str):
        return None
    if tag in _NON_FAULT:
        return _NON_FAULT[tag]
    signature = signature_of(line, tag)
    return (
        TEARDOWN if signature is None and tag == logtags.KILLED else (CAUSE if signature is None else signature.stage)
    )


def folded_into(policy: Policy, state: PolicyState, rule: Rule, rs: RuleState) -> str | None:
    """The log rule open now whose fault `rule`'s line follows from, or None (the line is news)."""
    if rule.kind.kind != "log_pattern":
        return None
    mine = stage(rs.kind_state)
    if mine is None or mine == CAUSE:
        return None
    now = state.now or 0.0
    for other in policy.rules:
        if other.id == rule.id or other.kind.kind != "log_pattern" or other.id in policy.shadow:
            continue
        ors = state.rules.get(other.id)
        if ors is None or ors.opened_by is None or (ors.since is not None and now - ors.since > FOLD_WINDOW_S):
            continue
        theirs = stage(ors.kind_state)
        if theirs is not None and theirs < mine:
            return other.id
    return None
