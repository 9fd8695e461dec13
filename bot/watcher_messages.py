"""What the bot says about trainwarden's own daemons (a stalled pipeline, a silent agent or worker, their
recovery): apart from bot/messages.py, which speaks of runs. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from trainwarden.core.words import said
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.policies.durations import fmt_duration


def watchdog_stalled(event: Event) -> str:
    detail = cast(p.WatchdogStalledData, event.data).get("detail")
    return f"TRAINWARDEN STALLED: {said(detail, 'no detail recorded')}. Runs are not being watched until it recovers."


def watchdog_recovered(event: Event) -> str:
    d = cast(p.WatchdogRecoveredData, event.data)
    return (
        f"TRAINWARDEN RECOVERED after {fmt_duration(d.get('stalled_s', 0))}: {said(d.get('detail'), 'working again')}."
    )


def component_silent(event: Event) -> str:
    d = cast(p.ComponentSilentData, event.data)
    error = f" Its last error: {d['last_error']}" if d.get("last_error") else ""
    return (
        f"SILENT: {daemon(d)} has sent no heartbeat for "
        f"{fmt_duration(d.get('silent_s', 0))}; what it does is not being done (see `trainwarden health`).{error}"
    )


def component_recovered(event: Event) -> str:
    d = cast(p.ComponentRecoveredData, event.data)
    return f"BACK: {daemon(d)} sends heartbeats again after {fmt_duration(d.get('silent_s', 0))} of silence."


def daemon(d: p.ComponentSilentData | p.ComponentRecoveredData) -> str:
    """`the worker on gpu1 (pid 42)`, with what is known."""
    host = f" on {d['host']}" if d.get("host") else ""
    pid = f" (pid {d['pid']})" if d.get("pid") is not None else ""
    return f"the {said(d.get('role'), 'daemon')}{host}{pid}"


def no_dispatcher() -> str:
    return "no dispatcher has reported (start `trainwarden dispatcher`)"


def dispatcher_silent(seconds: float) -> str:
    return f"the dispatcher has not reported for {fmt_duration(seconds)}"


def workers_behind(pending: int, seconds: float) -> str:
    return f"{pending} feed entries wait for the workers, the oldest for {fmt_duration(seconds)} (are workers running?)"


def progress_again() -> str:
    return "the dispatcher and the workers are making progress again"


# the line for each of these events (bot/messages.py notification_text)
TEXTS: dict[str, Callable[[Event], str]] = {
    t.WATCHDOG_STALLED: watchdog_stalled, t.WATCHDOG_RECOVERED: watchdog_recovered,
    t.COMPONENT_SILENT: component_silent, t.COMPONENT_RECOVERED: component_recovered,
}  # fmt: skip
