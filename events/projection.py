"""The state of a run, rebuilt by folding its events: no I/O, no clock, no mutable record elsewhere.

`fold(events)` replays a whole log; `apply(state, event)` moves an existing state forward one
event, which is how the workers keep it incrementally in their checkpoint. Windows are bounded so
the state stays small however long the run.

Handlers read `event.data` through its payload type (events/payloads/), with `.get`: a log may
hold events written by another version, and a missing field must not stop the fold.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from trainwarden.core.redact import redact
from trainwarden.events import payloads as p
from trainwarden.events import reading
from trainwarden.events import types as t
from trainwarden.events.dispatch import Dispatch
from trainwarden.events.envelope import Event
from trainwarden.events.window import EncodedWindow

log = logging.getLogger(__name__)

RECENT_METRICS = 50
RECENT_LOG_LINES = 20
HISTORY = 200
ENDED = ("stopped", "finished", "failed")  # statuses of a run that is over


@dataclass(slots=True)
class RunState:
    run: str = ""
    host: str = ""
    status: str = "unknown"
    launch: p.RunLaunchedData = field(default_factory=p.RunLaunchedData)
    launch_seq: int | None = None  # seq of the latest run.launched: ends of that launch use it
    watched: p.RunWatchedData | None = None  # the latest run.watched: how the host's agent can stop it
    step: int | None = None
    exit_code: int | None = None  # the current launch's, once it ended (None: not ended, or unknowable)
    last_metrics: dict[str, Any] = field(default_factory=dict)
    recent_metrics: EncodedWindow = field(default_factory=lambda: EncodedWindow(maxlen=RECENT_METRICS))
    recent_log_lines: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_LOG_LINES))
    source: str | None = None
    reading: dict[str, Any] | None = None  # the latest `reading` status.source: unreadable (reason, sample), readable
    decision: str | None = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    open_anomalies: dict[str, dict[str, Any]] = field(default_factory=dict)
    anomalies_opened: int = 0
    commands: list[dict[str, Any]] = field(default_factory=list)
    stops: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    dump: dict[str, Any] | None = None  # the latest process.dump, without its text: where the run was stuck
    first_ts: float | None = None
    last_ts: float | None = None  # the log's last event, of any type
    last_activity_ts: float | None = None  # the run's last activity (events/types.py ACTIVITY_TYPES): its last event
    # as people read it, which an agent's heartbeat or a /status asked about it does not move
    last_metric_ts: float | None = None
    event_count: int = 0
    type_counts: Counter[str] = field(default_factory=Counter)

    def to_dict(self, *, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
        """JSON-ready fields but those in `skip` (the checkpoint stores `recent_metrics` in its own form)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            if name in skip:
                continue
            value = getattr(self, name)
            if isinstance(value, deque | EncodedWindow):
                value = list(value)
            elif isinstance(value, Counter):
                value = dict(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        state = cls()
        for name in cls.__slots__:
            if name not in data:
                continue
            value = data[name]
            current = getattr(state, name)
            if isinstance(current, deque):
                value = deque(value, maxlen=current.maxlen)
            elif isinstance(current, EncodedWindow):
                value = EncodedWindow(value, maxlen=current.maxlen)
            elif isinstance(current, Counter):
                value = Counter(value)
            setattr(state, name, value)
        if "last_activity_ts" not in data:  # saved before the field existed: its last event is the best known
            state.last_activity_ts = state.last_ts
        return state


_APART = frozenset({"recent_metrics"})  # stored beside the state's JSON, one record a line (events/window.py)


def encode_state(state: RunState) -> tuple[str, str]:
    """The stored form (the workers' checkpoint, the readers' view): the JSON of the state but its recent
    metrics, and those one a line. A turn at 1 Hz adds one metric and reads none: each is encoded once, and
    decoded only when read (/status decodes the 15 runs it shows, not all 400)."""
    return json.dumps(state.to_dict(skip=_APART)), state.recent_metrics.lines()


def decode_state(data: bytes | str, recent: bytes | None) -> RunState:
    """`encode_state`'s form back; a state written before the metrics had their own field holds them inside
    its JSON, and those win (a writer of that version leaves the field it does not know as it was)."""
    fields = json.loads(data)
    state = RunState.from_dict(fields)
    if recent is not None and "recent_metrics" not in fields:
        state.recent_metrics = EncodedWindow.from_lines(recent.decode(), maxlen=RECENT_METRICS)
    return state


Handler = Callable[[RunState, Event], None]
_DISPATCH: Dispatch[Handler] = Dispatch("the run projection")
on = _DISPATCH.on
_HANDLERS = _DISPATCH.handlers


def apply(state: RunState, event: Event) -> RunState:
    """Move `state` forward by one event (in place, returned for chaining)."""
    if not state.run:
        state.run = event.run
    if state.first_ts is None:
        state.first_ts = event.ts
    state.last_ts = event.ts
    if event.type in t.ACTIVITY_TYPES:
        state.last_activity_ts = event.ts
    state.event_count += 1
    state.type_counts[event.type] += 1
    handler = _HANDLERS.get(event.type)
    if handler is not None:
        try:
            handler(state, event)
        except Exception as exc:  # a payload of the wrong shape (`rule: {}`): the view goes on without it
            log.warning("run %s: event %s does not fit its type's payload (%s: %s); the run view skips it",
                        event.run, event.id, type(exc).__name__, exc)  # fmt: skip
    return state


def fold(events: Iterable[Event], state: RunState | None = None) -> RunState:
    state = RunState() if state is None else state
    for event in events:
        apply(state, event)
    return state


def _history(items: list[dict[str, Any]], item: dict[str, Any]) -> None:
    items.append(item)
    if len(items) > HISTORY:
        del items[: len(items) - HISTORY]


# What a run's log holds whatever the launch: a new launch of the name keeps these and starts the rest afresh
_OF_THE_LOG = frozenset({"run", "host", "watched", "first_ts", "last_ts", "last_activity_ts", "event_count",
                         "type_counts"})  # fmt: skip


@on(t.RUN_LAUNCHED)
def _launched(state: RunState, event: Event) -> None:
    data = cast(p.RunLaunchedData, redact(event.data))  # masked at the source too: kept only masked
    if not p.is_resume(data):  # a new launch of the name: nothing of the previous one (its step, metrics,
        fresh = RunState()  # decisions, evidence) is this one's; replay still shows both, from the log
        for name in RunState.__slots__:
            if name not in _OF_THE_LOG:
                setattr(state, name, getattr(fresh, name))
    state.launch = p.RunLaunchedData(**data)
    state.launch_seq = event.seq
    state.host = data.get("host", event.host)
    state.status = "launched"
    state.decision = None
    state.open_anomalies = {}


@on(t.RUN_WATCHED)
def _watched(state: RunState, event: Event) -> None:
    data = cast(p.RunWatchedData, event.data)
    state.watched = p.RunWatchedData(**data)
    if not state.host:
        state.host = data.get("host", event.host)


@on(t.RUN_STARTED)
def _started(state: RunState, event: Event) -> None:
    state.status = "running"


@on(t.METRIC)
def _metric(state: RunState, event: Event) -> None:
    data = event.data  # p.MetricData plus any metric name: read as the open mapping it is
    state.last_metrics.update(data)
    step = data.get("step")
    if type(step) is int:
        state.step = step
    state.recent_metrics.append({"ts": event.ts, "id": event.id, **data})
    state.last_metric_ts = event.ts
    if not state.host:
        state.host = event.host
    if state.status in ("unknown", "launched"):
        state.status = "running"


@on(t.LOG_LINE)
def _log_line(state: RunState, event: Event) -> None:
    state.recent_log_lines.append({"ts": event.ts, **redact(event.data)})  # masked at the source too


@on(t.SOURCE_STATUS)
def _source(state: RunState, event: Event) -> None:
    # the data source of the run's metrics (sidecar | wandb_ok | log_fallback | log | unreachable); statuses of
    # other sources (`source: nvml`) are kept in the log but are not the run's data source
    data = cast(p.SourceStatusData, event.data)
    if data.get("source", "metrics") == "metrics":
        state.source = data.get("status")
    elif data.get("source") == reading.SOURCE:  # whether the agent reads its metrics at all
        state.reading = {"ts": event.ts, **redact(event.data)}


@on(t.DECISION)
def _decision(state: RunState, event: Event) -> None:
    state.decision = cast(p.DecisionData, event.data).get("decision")
    _history(state.decisions, {"id": event.id, "ts": event.ts, **event.data})


@on(t.ANOMALY_OPENED)
def _anomaly_opened(state: RunState, event: Event) -> None:
    rule = cast(p.AnomalyOpenedData, event.data).get("rule", "?")
    state.open_anomalies[rule] = {"id": event.id, "ts": event.ts, **event.data}
    state.anomalies_opened += 1


@on(t.ANOMALY_RESOLVED)
def _anomaly_resolved(state: RunState, event: Event) -> None:
    state.open_anomalies.pop(cast(p.AnomalyResolvedData, event.data).get("rule", "?"), None)


DUMP_SUMMARY = ("where", "category", "place", "pid", "rank", "verdict", "method", "cpu_pct", "gpu_pct", "stalled_s",
                "absent", "rule")  # fmt: skip


@on(t.PROCESS_DUMP)
def _dump(state: RunState, event: Event) -> None:
    state.dump = {"id": event.id, "ts": event.ts, **{k: v for k, v in event.data.items() if k in DUMP_SUMMARY}}


@on(t.EVIDENCE_BUILT)
def _evidence(state: RunState, event: Event) -> None:
    path = cast(p.EvidenceBuiltData, event.data).get("path")
    if path:
        state.evidence.append(path)


@on(t.EVIDENCE_FAILED)
def _evidence_failed(state: RunState, event: Event) -> None:
    pack = cast(p.EvidenceFailedData, event.data).get("pack")  # written when only the findings note failed
    if pack:
        state.evidence.append(pack)


@on(t.STOP_REQUESTED, t.STOP_DONE, t.STOP_FAILED)
def _stop(state: RunState, event: Event) -> None:
    _history(state.stops, {"type": event.type, "id": event.id, "ts": event.ts, **event.data})
    if event.type == t.STOP_REQUESTED and state.status not in ENDED:
        state.status = "stopping"
    elif event.type == t.STOP_DONE:
        state.status = "stopped"


@on(t.STOP_HELD)
def _held(state: RunState, event: Event) -> None:
    """The stop breaker held the policy's STOP (workers/breaker.py): the run goes on until a person decides."""
    _history(state.stops, {"type": event.type, "id": event.id, "ts": event.ts, **event.data})
    if state.status == "stopping":
        state.status = "running"


def _of_current_launch(state: RunState, event: Event) -> bool:
    launch = cast(p.RunEndedData, event.data).get("launch")
    return type(launch) is not int or state.launch_seq is None or launch == state.launch_seq


@on(t.RUN_FINISHED, t.RUN_FAILED)
def _ended(state: RunState, event: Event) -> None:
    if not _of_current_launch(state, event):
        return  # the end of an earlier launch, noticed late
    if state.status in ("stopping", "stopped"):
        # a stop was asked for: however the process ended (Ctrl-C gives exit code 130, a killed session
        # none at all), it is the stop's doing, never a failure to report or resume
        state.status = "stopped"
    else:
        state.status = "finished" if event.type == t.RUN_FINISHED else "failed"
    code = cast(p.RunEndedData, event.data).get("exit_code")
    state.exit_code = code if type(code) is int else None


@on(t.COMMAND_RECEIVED, t.COMMAND_DENIED)
def _command(state: RunState, event: Event) -> None:
    _history(state.commands, {"type": event.type, "id": event.id, "ts": event.ts, **event.data})


def is_finite_number(value: Any) -> bool:
    return (type(value) is float and math.isfinite(value)) or type(value) is int


def unknown_types(state: RunState) -> dict[str, int]:
    """Event types in the run that this version does not know: kept and shown, never dropped."""
    return {name: n for name, n in state.type_counts.items() if name not in t.KNOWN_TYPES}
