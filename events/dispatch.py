"""A table of handlers by event type, filled by `@table.on(t.X)`: how a fold or a reader tells event types apart,
instead of an if-chain on `event.type` (the projection, the plan's fold, the fast lane's test).

One handler per type and table: a second registration of a type is a programming error, refused at import, so
two handlers cannot silently shadow each other. Looking one up is a dict lookup: the hot paths use it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class Dispatch(Generic[F]):
    """`handlers` maps an event type to its handler; `on(*types)` registers a function for those types."""

    def __init__(self, name: str) -> None:
        self.name = name  # said when a type is registered twice
        self.handlers: dict[str, F] = {}

    def on(self, *event_types: str) -> Callable[[F], F]:
        def register(fn: F) -> F:
            for event_type in event_types:
                if event_type in self.handlers:
                    raise ValueError(f"{self.name}: {event_type!r} has a handler already; keep one")
                self.handlers[event_type] = fn
            return fn

        return register
