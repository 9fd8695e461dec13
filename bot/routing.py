"""Where a message goes: the `slack.routes` tree, Alertmanager-style (the route stage of bot/notify_path.py).

A message is described by its labels: the run's name, its project (the W&B project its launch
named, when known), its host, the rule it is about, and a severity. The tree's root is the default
channel (`slack.channel`); its children are the `slack.routes` entries, each with children of its
own. From a node, the children are tried in order: the first whose matchers all hold takes the
message (down to its own deepest match), and the search stops there unless that child says
`continue`, in which case the next matching siblings take it too: a message can go to two channels.
No child matches: the node itself is the destination. A node without a channel has its parent's;
its mentions add to its parent's. Today's flat list is this tree one level deep (first match wins).

A message's severity is its anomaly's (`warning`, `critical`); what belongs to a stop (the STOP,
a guarded stop, the stop's outcome, the evidence upload) and failures are `critical`; a resolve
keeps its opening's severity so it lands in the opening's thread. A run posts into one thread per
channel its messages are routed to: one thread, unless routes split a run by severity.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import cast

from trainwarden.bot.config import Route
from trainwarden.bot.stages import FLAPPING, GUARD, Notice, NotifyState, rule_of
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
    rule: str | None = None


@dataclass(frozen=True, slots=True)
class Destination:
    channel: str
    mention: tuple[str, ...] = ()


GLOBBED = ("run", "project", "host", "rule")  # label names matched by shell-style globs; severity exactly


def matches(route: Route, labels: Labels) -> bool:
    """Every matcher the route sets holds (one of its alternatives); a label a message lacks matches no glob."""

    def globs(patterns: tuple[str, ...], value: str | None) -> bool:
        return not patterns or (value is not None and any(fnmatchcase(value, g) for g in patterns))

    return all(globs(getattr(route, name), getattr(labels, name)) for name in GLOBBED) and (
        not route.severity or labels.severity in route.severity
    )


def tree(routes: Sequence[Route], *, default: str) -> Route:
    """The routing tree: a root that matches everything and goes to `default`, with `routes` below it."""
    return Route(channel=default, routes=tuple(routes))


def destinations(node: Route, labels: Labels) -> list[Destination]:
    """Where a message matching `node` goes (see the module docstring), in tree order, one per channel."""
    found: list[Destination] = []
    for child in node.routes:
        if not matches(child, labels):
            continue
        inherited = replace(child, channel=child.channel or node.channel,
                            mention=tuple(dict.fromkeys([*node.mention, *child.mention])))  # fmt: skip
        found.extend(destinations(inherited, labels))
        if not child.continue_:
            break
    if not found:
        found = [Destination(channel=node.channel or "", mention=node.mention)]
    merged: dict[str, Destination] = {}
    for d in found:  # two branches to one channel: one message, both branches' mentions
        had = merged.get(d.channel)
        merged[d.channel] = (
            d if had is None else Destination(d.channel, tuple(dict.fromkeys([*had.mention, *d.mention])))
        )
    return list(merged.values())


def route(routes: Sequence[Route], labels: Labels, *, default: str) -> Destination:
    """The first destination of `labels` under `routes` (the one that owns the run's uploads)."""
    return destinations(tree(routes, default=default), labels)[0]


def severity(kind: str, event: Event, state: NotifyState) -> str:
    """A message's severity label (see the module docstring)."""
    rule = cast(p.AnomalyOpenedData, event.data).get("rule") or ""
    if kind in (t.ANOMALY_OPENED, FLAPPING):
        return str(event.data.get("severity") or WARNING)
    if kind in (t.ANOMALY_RESOLVED, t.PROCESS_DUMP):  # in the thread of the opening's message
        return state.severities.get(rule, WARNING)
    return SEVERITY_OF_KIND.get(kind, INFO)


def labels(kind: str, event: Event, state: NotifyState) -> Labels:
    host = event.data.get("run_host") or event.host
    return Labels(run=event.run, host=str(host) if host else None, project=state.project,
                  severity=severity(kind, event, state), rule=rule_of(event))  # fmt: skip


def mentioned(notice: Notice, severity_label: str, destination: Destination, owners: Sequence[str]) -> tuple[str, ...]:
    """Who is named in the message: the run's owners and the route's mentions, on what asks a person to
    act (a STOP, a guarded stop, a failed stop or run, a critical anomaly); nobody on anything else."""
    if notice.kind not in NEEDS_SOMEONE and not (notice.kind == t.ANOMALY_OPENED and severity_label == CRITICAL):
        return ()
    return tuple(dict.fromkeys([*owners, *destination.mention]))


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A notice addressed to one channel: what the stages after routing carry. `key` is the exactly-once
    key of this copy: the notice's own for its first destination, `KEY@CHANNEL` for each further one."""

    notice: Notice
    destination: Destination
    key: str
    mentions: tuple[str, ...] = ()

    @property
    def primary(self) -> bool:
        return self.key == self.notice.key


def copy_key(key: str, channel: str) -> str:
    """The exactly-once key of a notice's copy in a further channel (a route with `continue`)."""
    return f"{key}@{channel}"


def address(state: NotifyState, notice: Notice, *, tree: Route) -> list[Outgoing]:
    """The route stage (pure): where `notice` goes, and who each copy names."""
    found = labels(notice.kind, notice.event, state)
    return [
        Outgoing(
            notice=notice,
            destination=d,
            key=notice.key if i == 0 else copy_key(notice.key, d.channel),
            mentions=mentioned(notice, found.severity, d, state.owners),
        )
        for i, d in enumerate(destinations(tree, found))
    ]
