"""Building events and running a policy over them with a fixed clock (every event says its own ts)."""

from __future__ import annotations

from typing import Any

from trainwarden.agent.parse import tag_of
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event
from trainwarden.policies.engine import PolicyState, apply_policy, evaluate
from trainwarden.policies.loader import load_policy
from trainwarden.policies.model import Policy

T0 = 1_800_000_000.0  # a fixed epoch: tests never read the clock


class Clock:
    """Hands out events at explicit offsets (seconds after T0), numbered in order."""

    def __init__(self, run: str = "r") -> None:
        self.run = run
        self.seq = 0

    def event(self, typ: str, at: float, **data: Any) -> Event:
        self.seq += 1
        return make_event(typ, run=self.run, host="gpu1", producer="p", seq=self.seq, data=data, ts=T0 + at)

    def metric(self, at: float, **data: Any) -> Event:
        return self.event(t.METRIC, at, **data)

    def tick(self, at: float) -> Event:
        return self.event(t.TICK, at)

    def log(self, at: float, line: str, tag: str | None = None) -> Event:
        """A `log.line` event tagged as the agent tags it (`error` for a line it would not send)."""
        return self.event(t.LOG_LINE, at, line=line, tag=tag or tag_of(line) or "error")


def policy(rules_yaml: str, *, startup: str = "30m") -> Policy:
    return load_policy(f"name: test\nstartup: {startup}\nrules:\n{rules_yaml}", source="test.yaml")


def run(pol: Policy, events: list[Event], state: PolicyState | None = None) -> list[tuple[str, dict[str, Any]]]:
    state = state if state is not None else PolicyState()
    if state.policy != pol.hash:
        apply_policy(pol, state)
    out: list[tuple[str, dict[str, Any]]] = []
    for e in events:
        out += [(o.type, o.data) for o in evaluate(pol, state, e)]
    return out


def summary(out: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """A compact, readable form: 'opened:rule', 'resolved:rule', 'CONTINUE', 'STOP:rule', 'shadow:STOP:rule'."""
    lines = []
    for typ, data in out:
        if typ == t.ANOMALY_OPENED:
            lines.append(f"opened:{data['rule']}")
        elif typ == t.ANOMALY_RESOLVED:
            lines.append(f"resolved:{data['rule']}")
        elif typ == t.DECISION:
            lines.append(data["decision"] + (f":{data['rule']}" if data.get("rule") else ""))
        elif typ == t.DECISION_SHADOW:
            lines.append(f"shadow:{data['decision']}:{data['rule']}")
    return lines
