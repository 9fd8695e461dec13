"""Where a message goes: the `slack.routes` table, Alertmanager-style, first match wins.

A message is described by four labels: the run's name, its project (the W&B project its launch
named, when known), its host, and a severity. Routes are tried in order; the first whose matchers
all hold decides the channel (its own, or the default one) and who is mentioned. No route matches:
the default channel (`slack.channel`), nobody mentioned beyond the run's owner.

A message's severity is its anomaly's (`warning`, `critical`); what belongs to a stop (the STOP,
a guarded stop, the stop's outcome, the evidence upload) and failures are `critical`; a resolve
keeps its opening's severity so it lands in the opening's thread. A run posts into one thread per
channel its messages are routed to: one thread, unless routes split a run by severity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import cast

from trainwarden.bot.config import Route
from trainwarden.bot.stages import GUARD, Notice, NotifyState
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.model import CRITICAL, INFO, WARNING

SEVERITY_OF_KIND = {
    t.STOP: CRITICAL, GUARD: CRITICAL, t.STOP_DONE: CRITICAL, t.STOP_FAILED: CRITICAL, t.STOP_CANCELLED: CRITICAL,
    t.EVIDENCE_BUILT: CRITICAL, t.EVIDENCE_FAILED: CRITICAL, t.RUN_FAILED: CRITICAL, t.POLICY_REJECTED: CRITICAL,
    t.WATCHDOG_STALLED: CRITICAL, t.WATCHDOG_RECOVERED: CRITICAL, t.COMPONENT_SILENT: CRITICAL,
    t.COMPONENT_RECOVERED: CRITICAL, t.WAIT: WARNING, t.DECISION_SHADOW: WARNING, t.RUN_LAUNCHED: INFO,
    t.LAUNCH_FAILED: INFO, t.RESUME_SKIPPED: CRITICAL,
}  # fmt: skip
# Kinds that ask a person to act: the run's owner and the route's mentions are named in them.
NEEDS_SOMEONE = frozenset({t.STOP, GUARD, t.STOP_FAILED, t.RUN_FAILED, t.RESUME_SKIPPED})


@dataclass(frozen=True, slots=True)
class Labels:
    run: str
    host: str | None = None
    project: str | None = None
    severity: str = WARNING


@dataclass(frozen=True, slots=True)
class Destination:
    channel: str
    mention: tuple[str, ...] = ()


def matches(route: Route, labels: Labels) -> bool:
    """Every matcher the route sets holds (one of its alternatives); run, project and host are globs."""

    def globs(patterns: tuple[str, ...], value: str | None) -> bool:
        return not patterns or (value is not None and any(fnmatchcase(value, g) for g in patterns))

    return (
        globs(route.run, labels.run)
        and globs(route.project, labels.project)
        and globs(route.host, labels.host)
        and (not route.severity or labels.severity in route.severity)
    )


def route(routes: Sequence[Route], labels: Labels, *, default: str) -> Destination:
    """The first matching route's channel (or `default`) and mentions; `default` when none matches."""
    for r in routes:
        if matches(r, labels):
            return Destination(channel=r.channel or default, mention=r.mention)
    return Destination(channel=default)


def severity(kind: str, event: Event, state: NotifyState) -> str:
    """A message's severity label (see the module docstring)."""
    rule = cast(p.AnomalyOpenedData, event.data).get("rule") or ""
    if kind in (t.ANOMALY_OPENED, "flapping"):
        return str(event.data.get("severity") or WARNING)
    if kind in (t.ANOMALY_RESOLVED, t.PROCESS_DUMP):  # in the thread of the opening's message
        return state.severities.get(rule, WARNING)
    return SEVERITY_OF_KIND.get(kind, INFO)


def labels(kind: str, event: Event, state: NotifyState) -> Labels:
    host = event.data.get("run_host") or event.host
    return Labels(run=event.run, host=str(host) if host else None, project=state.project,
                  severity=severity(kind, event, state))  # fmt: skip


def mentioned(notice: Notice, severity_label: str, destination: Destination, owners: Sequence[str]) -> tuple[str, ...]:
    """Who is named in the message: the run's owners and the route's mentions, on what asks a person to
    act (a STOP, a guarded stop, a failed stop or run, a critical anomaly); nobody on anything else."""
    if notice.kind not in NEEDS_SOMEONE and not (notice.kind == t.ANOMALY_OPENED and severity_label == CRITICAL):
        return ()
    return tuple(dict.fromkeys([*owners, *destination.mention]))
