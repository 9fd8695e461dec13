"""The agent loop: tail each watched run's log, turn lines into events, publish in batches."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from agent import offsets
from agent.parse import notable, parse_metrics
from agent.publisher import Publisher
from agent.tail import Line, LogTail
from events import types as t
from events.envelope import Event, check_run_name, make_event
from events.errors import StoreUnavailable
from events.redact import redact_text

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.05
BACKOFF_MAX_S = 2.0
# Several events may come from one line; each gets seq = line end offset * SLOTS + slot.
SLOTS = 4
METRIC_SLOT = 0
LOG_LINE_SLOT = 1


@dataclass(frozen=True, slots=True)
class LogWatch:
    run: str
    path: Path

    def __post_init__(self) -> None:
        check_run_name(self.run)


def line_events(*, run: str, host: str, producer: str, line: Line, now: float) -> list[Event]:
    """Pure: the events one log line yields (a metric, a notable line, both or none)."""
    out: list[Event] = []
    metrics = parse_metrics(line.text)
    if metrics:
        out.append(
            make_event(t.METRIC, run=run, host=host, producer=producer, seq=line.end * SLOTS + METRIC_SLOT,
                       data=metrics, ts=now)
        )  # fmt: skip
    found = notable(line.text)
    if found is not None:
        out.append(
            make_event(t.LOG_LINE, run=run, host=host, producer=producer, seq=line.end * SLOTS + LOG_LINE_SLOT,
                       data={"tag": found.tag, "line": redact_text(found.line)}, ts=now)
        )  # fmt: skip
    return out


class Agent:
    def __init__(
        self,
        *,
        publisher: Publisher,
        host: str,
        watches: list[LogWatch],
        state_path: Path | None = None,
        poll_interval: float = POLL_INTERVAL_S,
    ) -> None:
        self.publisher = publisher
        self.host = host
        self.state_path = state_path
        self.poll_interval = poll_interval
        saved = offsets.load(state_path)
        self.tails: dict[str, LogTail] = {}
        for w in watches:
            pos = saved.get(w.run, offsets.Position())
            self.tails[w.run] = LogTail(w.path, offset=pos.offset, generation=pos.generation)

    def producer(self, run: str) -> str:
        return f"{self.host}/log/{run}/g{self.tails[run].generation}"

    def poll(self) -> int:
        """Read what is new in every log into the publisher's buffer; returns the events made."""
        made = 0
        now = time.time()
        for run, tail in self.tails.items():
            for line in tail.poll():
                events = line_events(run=run, host=self.host, producer=self.producer(run), line=line, now=now)
                self.publisher.publish(events)
                made += len(events)
        return made

    def flush(self) -> None:
        """Send the buffer, then remember how far each log was read (only after the send worked)."""
        self.publisher.flush()
        offsets.save(
            self.state_path,
            {run: offsets.Position(tail.offset, tail.generation) for run, tail in self.tails.items()},
        )

    def run(self, *, burst: bool = False, stop: threading.Event | None = None) -> None:
        """Tail until `stop` is set; with `burst=True`, return once everything written so far is sent."""
        stop = stop or threading.Event()
        backoff = self.poll_interval
        outage_since: float | None = None
        while not stop.is_set():
            made = self.poll()
            try:
                self.flush()
            except StoreUnavailable as exc:
                if outage_since is None:
                    outage_since = time.monotonic()
                    log.warning("cannot reach Redis (%s); %d events kept, retrying", exc, len(self.publisher.buffer))
                if burst:
                    raise
                stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            if outage_since is not None:
                log.warning("Redis reachable again after %.1fs", time.monotonic() - outage_since)
                outage_since = None
                backoff = self.poll_interval
            if made == 0:
                if burst:
                    return
                stop.wait(self.poll_interval)
