"""Kinds that judge what arrives (or does not): absence, log_pattern, status."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.faults.logtags import matching_line, tagged_line
from trainwarden.faults.words import MAX_QUOTE, describe, quote
from trainwarden.faults.words import remedy as fault_remedy
from trainwarden.policies.durations import fmt_duration
from trainwarden.policies.names import finite, pick

# Every event the engine evaluates; absence rules look at all of them, because time moves with each.
ANY_INPUT = frozenset({t.METRIC, t.GPU, t.HEALTH, t.LOG_LINE, t.SOURCE_STATUS, t.AGENT_HEARTBEAT, t.RUN_STARTED,
                       t.TICK})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Absence:
    """No event of type `watch` (with a finite value of `names`, when given) for `duration` seconds.

    The clock starts at the run's start (its launch, or its first event), or when the rule came
    into the policy; "first finite loss within 10 min" is `absence` of `loss` for 10m.
    """

    kind: ClassVar[str] = "absence"
    time_driven: ClassVar[bool] = True
    duration: float
    watch: frozenset[str] = frozenset({t.METRIC})
    names: tuple[str, ...] = ()
    events: frozenset[str] = ANY_INPUT
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        return {} if start is None else {"seen": start}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        if "seen" not in st:
            st["seen"] = now
        if event.type in self.watch and (
            not self.names or ((found := pick(event.data, self.names)) is not None and finite(found[1]) is not None)
        ):
            st["seen"] = now
        st["now"] = now
        return now - st["seen"] >= self.duration

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        what = "/".join(self.names[:1]) or "/".join(sorted(self.watch))
        silent = st["now"] - st["seen"]
        return f"no {what} for {fmt_duration(silent)}", {"silent_s": round(silent, 3)}

    def params(self) -> dict[str, Any]:
        return {"duration": self.duration, "watch": sorted(self.watch), "metric": list(self.names)}


# A STOP's own signals make the run print faults: the Ctrl-C's KeyboardInterrupt traceback, torchrun's
# ChildFailedError, `Killed` after the SIGKILL. A log line read this long after the stop was asked (the signal
# ladder's SIGINT and SIGTERM graces at their default 10 s each, and slack for the agent's reading) belongs to the
# stop and opens no anomaly (policies/engine.py).
STOP_ECHO_S = 60.0


@dataclass(frozen=True, slots=True)
class LogPattern:
    """A log line with one of the agent's `tags` (faults/logtags.py: oom, nccl, ...) and/or matching
    `pattern`.

    A fault does not clear itself: a later number in the log (`local_rank: 0`) says nothing. It clears when
    training goes on for real: a `loss` at a step past the one the fault came at, or `CLEAR_LOSSES` new loss
    samples; a run that ended keeps it (nothing is judged after the end, and a relaunch starts clean).

    The reason is what the fault line says in a few words (the catalogue of signatures, faults/,
    through faults/words.py): `out of memory (host): tried to allocate 4.00 EiB`, `NCCL ALLREDUCE timed out
    after 10m on rank 3 (SeqNum 808)`; a line no signature explains is quoted (a traceback by its exception
    line). The signature's remedy is the anomaly's when the rule has none of its own."""

    kind: ClassVar[str] = "log_pattern"
    time_driven: ClassVar[bool] = False
    stop_echo_s: ClassVar[float] = STOP_ECHO_S  # a fault line this soon after a STOP was asked is the stop's
    clear_only: ClassVar[frozenset[str]] = frozenset({t.METRIC})
    pattern: str
    regex: re.Pattern[str] | None = field(compare=False, repr=False)
    tags: tuple[str, ...] = ()
    events: frozenset[str] = frozenset({t.LOG_LINE, t.METRIC})
    keys: None = None

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        return {}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        if event.type == t.METRIC:
            if "line" not in st:
                return False
            if not _went_on(st, event.data):
                return None  # a number that is no training step: the fault stands
            st.clear()
            return False
        text, tag = event.data.get("line"), event.data.get("tag")
        if not isinstance(text, str) or (self.tags and tag not in self.tags):
            return None
        if self.regex is not None:
            line = matching_line(text, self.regex)
        elif self.tags:
            line = tagged_line(text, str(tag)) or text.split("\n", 1)[0]
        else:
            return None  # a pattern that did not compile (the policy was refused)
        if line is None:
            return None
        if "line" not in st:  # the first line of a fault names it; its repeats (other ranks) do not
            st["line"], st["tag"] = line[:MAX_QUOTE], tag
            if isinstance(tag, str) and (said := describe(tag, line, text)) is not None:
                st["said"] = said
        return True

    def opened(self, st: dict[str, Any], step: Any) -> None:
        """The engine's note when the anomaly opens: the run's step then, which training must pass to clear it."""
        st["at"] = step

    def remedy(self, st: dict[str, Any]) -> str | None:
        tag, line = st.get("tag"), st.get("line")
        return fault_remedy(tag, line) if isinstance(tag, str) and isinstance(line, str) else None

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        line, tag = st.get("line", ""), st.get("tag")
        return (st.get("said") or f"log: {quote(line)}"), {"line": line, "tag": tag}

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pattern": self.pattern} if self.pattern else {}
        if self.tags:
            out["tag"] = list(self.tags)
        return out


CLEAR_LOSSES = 3  # new loss samples after a fault that say training went on, where no step says it


def _went_on(st: dict[str, Any], data: dict[str, Any]) -> bool:
    """Whether a metric event after a fault shows training going on: a loss at a later step, or the
    `CLEAR_LOSSES`-th loss since the fault. A fault before any step has no step to be later than: one loss
    after it is no proof (a progress bar's last redraw, flushed as the process dies after a CUDA OOM)."""
    if "loss" not in data:
        return False
    st["n"] = st.get("n", 0) + 1
    step, at = data.get("step"), st.get("at")
    later = isinstance(step, int | float) and isinstance(at, int | float) and step > at
    return later or st["n"] >= CLEAR_LOSSES


@dataclass(frozen=True, slots=True)
class Status:
    """A status field of an event (`source.status`'s `status`, say) takes one of `values`
    (compared as text; `"*"` matches any value, e.g. any `exit_code` of `run.failed`).

    With `source`, only events whose `source` is that one count. Without it, each source speaks for
    itself: a status from another source than the one that opened the rule does not resolve it
    (the agent re-announces its GPU sampling at every restart; that says nothing about W&B)."""

    kind: ClassVar[str] = "status"
    time_driven: ClassVar[bool] = False
    event_type: str
    field_name: str
    values: tuple[str, ...]
    source: str | None = None
    events: frozenset[str] = frozenset()
    keys: None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", frozenset({self.event_type}))

    def initial(self, config: dict[str, Any], start: float | None) -> dict[str, Any]:
        return {}

    def observe(self, st: dict[str, Any], event: Event, now: float, name: str | None) -> bool | None:
        if self.field_name not in event.data:
            return None
        source = event.data.get("source")
        if self.source is not None and source != self.source:
            return None
        matches = "*" in self.values or str(event.data[self.field_name]) in self.values
        if not matches and st.get("matched") and st.get("source") != source:
            return None  # another source's news: the one that opened the rule has not recovered
        st["value"] = event.data[self.field_name]
        st["why"] = str(event.data.get("reason") or "")[:200]
        st["source"] = source
        st["matched"] = matches
        return matches

    def explain(self, st: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        why = f" ({st['why']})" if st.get("why") else ""
        shown = "unknown" if st["value"] is None else st["value"]  # a run that vanished has no exit code
        return f"{self.field_name}={shown}{why}", {self.field_name: st["value"]}

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.event_type, "field": self.field_name, "values": list(self.values)}
        if self.source is not None:
            out["source"] = self.source
        return out
