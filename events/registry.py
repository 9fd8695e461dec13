"""The one declaration of each event type: `declare(...)`, written under the type's payload class in
events/payloads/, registers its name, payload, catalogue text and replay line in `REGISTRY`.

Everything else is made from it: events/types.py (the constants producers use, generated so a type checker
sees each as a literal), docs/events.md, the readers' payload checks (events/catalogue.py `problems`) and
replay's one line per event (`describe`). Adding a type is one `declare` call plus its producer and readers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainwarden.core.words import said

if TYPE_CHECKING:
    from trainwarden.events.envelope import Event

SYSTEM_RUN = "trainwarden.system"  # events/types.py's: written out here, as types.py is made from this module
RUN = "a run's log"
SYSTEM = f"`{SYSTEM_RUN}`"
PLAN = "the plan's stream"

Describe = Callable[["Event"], str]


def fields_line(event: Event) -> str:
    """The replay line of a type without its own: its fields, sorted, cut to 300 characters."""
    return " ".join(f"{k}={_field(v)}" for k, v in sorted(event.data.items()))[:300]


def _field(value: Any) -> str:
    """A payload field in a timeline line: `-` when absent, JSON only for nested values."""
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, sort_keys=True)
    return said(value, "-")


@dataclass(frozen=True, slots=True)
class EventType:
    name: str
    payload: Any  # a TypedDict class of events/payloads/
    meaning: str
    emitted_by: str  # process (module)
    log: str = RUN  # where it is appended
    more: str = ""  # keys beyond the typed ones (a metric's values)
    describe: Describe = fields_line  # replay's line for one event (`trainwarden replay`, `runs`)
    worker_output: bool = False  # written by the workers or the bot as a result: a feed entry of only these
    # needs no further processing by the workers (workers/dispatcher.py, workers/process.py)
    activity: bool = False  # the run's own doing (training or its lifecycle): its latest such event is the run's
    # last activity (`trainwarden runs`, /status, a backtest's end); an agent's heartbeat or a person's command is not

    @property
    def constant(self) -> str:
        """Its name in events/types.py: run.launched -> RUN_LAUNCHED."""
        return self.name.upper().replace(".", "_")


REGISTRY: dict[str, EventType] = {}


def declare(
    name: str,
    payload: Any,
    *,
    meaning: str,
    emitted_by: str,
    log: str = RUN,
    more: str = "",
    describe: Describe = fields_line,
    worker_output: bool = False,
    activity: bool = False,
) -> EventType:
    """Register one event type; a second declaration of a name is a programming error, refused at import."""
    if name in REGISTRY:
        raise ValueError(f"event type {name!r} is declared twice (events/payloads/): keep one declaration")
    REGISTRY[name] = spec = EventType(name, payload, meaning, emitted_by, log, more, describe, worker_output, activity)
    return spec
