"""People, Slack and the watchdog: commands, snoozes, notifications, silent daemons.
Each payload class, then its type's one declaration (events/registry.py).

No `from __future__ import annotations`: Python 3.11 reads `NotRequired` from evaluated annotations only.
"""

from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from trainwarden.core.words import said
from trainwarden.events.registry import SYSTEM, declare

if TYPE_CHECKING:
    from trainwarden.events.envelope import Event


class CommandData(TypedDict):
    """`command.received` and `command.denied`."""

    command: str  # as typed (/tw stop, or an old name: /stop), a button's action; stop or launch over MCP
    user: str  # the Slack user, or mcp:<identity> for an agent over MCP
    channel: str | None  # Slack channel id (None when Slack's request names none, and over MCP)
    via: str  # slash, the button's action id, or mcp
    text: str  # the command's text, secrets masked


declare(
    "command.received",
    CommandData,
    meaning="a Slack command or button press, or an MCP action (stop, launch), for the audit trail",
    emitted_by="bot (bot/authz.py); `trainwarden mcp` (trainwarden/mcp_server/actions.py)",
    log=f"the target run's log, else {SYSTEM}",
    worker_output=True,
)

declare(
    "command.denied",
    CommandData,
    meaning="a Slack command refused by the allow-lists, or an MCP action mcp.allow_actions does not allow",
    emitted_by="bot (bot/authz.py); `trainwarden mcp` (trainwarden/mcp_server/actions.py)",
    log=f"the target run's log, else {SYSTEM}",
    worker_output=True,
)


class SnoozeSetData(TypedDict, total=False):
    by: str  # slack
    rule: str | None  # None: every rule
    until: float
    user: str  # the Slack user
    seconds: float  # /snooze's duration
    decision: str  # the guarded STOP (Keep running)


declare(
    "snooze.set",
    SnoozeSetData,
    meaning="notifications of a rule (or all) are muted until `until`",
    emitted_by="bot (bot/slash/snooze.py, the snooze button in bot/handlers.py)",
    worker_output=True,
)


class StopCancelledData(TypedDict):
    by: str  # slack
    user: str  # the Slack user
    rule: str  # the rule whose STOP was kept running
    until: float
    decision: str  # id of the guarded STOP decision kept running


declare(
    "stop.cancelled",
    StopCancelledData,
    meaning="a person chose Keep running on a guarded STOP: the rule may not stop the run until `until`",
    emitted_by="bot (bot/handlers.py)",
)


class LaunchFailedData(TypedDict):
    by: str  # slack | mcp
    server: str
    user: str  # the Slack user, or mcp:<identity> for an agent over MCP
    error: str  # why the launch failed


declare(
    "launch.failed",
    LaunchFailedData,
    meaning="a /launch from Slack, or a launch by an agent over MCP, was refused or failed",
    emitted_by="bot (bot/slash/launch.py); `trainwarden mcp` (trainwarden/mcp_server/actions.py)",
    worker_output=True,
)


class NotificationData(TypedDict):
    """`notification.intent` (with `at`) and `notification.sent` (with `ts`, `reconciled`)."""

    key: str  # the notice's key (the event it is about): one message per key
    channel: str  # Slack channel id
    thread_ts: str | None  # the thread it is posted in, None for a new thread
    text: str  # the message text
    at: NotRequired[float]  # when the post was attempted
    ts: NotRequired[str | None]  # the posted message's Slack ts
    reconciled: NotRequired[bool]  # found already posted after a crash


declare(
    "notification.intent",
    NotificationData,
    meaning="a Slack message is about to be posted (exactly-once delivery: the intent comes first)",
    emitted_by="bot (bot/delivery.py)",
    worker_output=True,
)

declare(
    "notification.sent",
    NotificationData,
    meaning="a Slack message was posted (or found already posted)",
    emitted_by="bot (bot/delivery.py)",
    worker_output=True,
)


class NotificationFailedData(TypedDict):
    """`notification.failed`: Slack refused the message; after a refused `plain` attempt it is given up."""

    key: str  # the notice's key (the event it is about)
    channel: str  # Slack channel id
    thread_ts: str | None  # the thread it was posted in
    text: str  # the message text
    error: str  # Slack's error code (invalid_blocks, msg_too_long, ...)
    attempt: str  # full (text and blocks) | plain (the text alone, cut to fit)


declare(
    "notification.failed",
    NotificationFailedData,
    meaning="Slack refused a message (`error`); it is sent once more as plain text (`attempt` says which was refused)",
    emitted_by="bot (bot/delivery.py)",
    worker_output=True,
)


class WatchdogStalledData(TypedDict):
    detail: str  # what is stuck
    since: float  # when it was first seen stuck


declare(
    "watchdog.stalled",
    WatchdogStalledData,
    meaning="the bot's dead-man's switch: trainwarden stopped making progress",
    emitted_by="bot (bot/deadman.py)",
    log=SYSTEM,
    worker_output=True,
)


class WatchdogRecoveredData(TypedDict):
    detail: str
    stalled_s: float  # how long it was stuck


declare(
    "watchdog.recovered",
    WatchdogRecoveredData,
    meaning="progress again after a stall",
    emitted_by="bot (bot/deadman.py)",
    log=SYSTEM,
    worker_output=True,
)


class ComponentSilentData(TypedDict):
    component: str  # role@host
    role: str  # agent | dispatcher | worker | notifier
    host: str
    pid: int  # of the process that beat last
    last_beat: float  # time of its last heartbeat
    silent_s: float  # how long it had been quiet when noticed
    last_error: str | None  # the last error it reported


def _silent(event: "Event") -> str:
    silent = cast(ComponentSilentData, event.data)
    error = f"; last error: {silent['last_error']}" if silent.get("last_error") else ""
    who = f"{said(silent.get('component'), 'a daemon')}{_pid(silent.get('pid'))}"
    return f"{who} silent for {silent.get('silent_s', 0):.0f}s{error}"


def _pid(pid: object) -> str:
    return f" (pid {pid})" if pid is not None else ""


declare(
    "component.silent",
    ComponentSilentData,
    meaning="a daemon (agent, dispatcher, worker, notifier) sent no heartbeat for 3 of its intervals",
    emitted_by="dispatcher, worker or notifier, whichever notices first (events/silence.py)",
    log=SYSTEM,
    worker_output=True,
    describe=_silent,
)


class ComponentRecoveredData(TypedDict):
    component: str
    role: str
    host: str
    pid: int  # of the process beating now (a restart changes it)
    silent_s: float  # from its last beat before the silence to its first one after


def _recovered(event: "Event") -> str:
    back = cast(ComponentRecoveredData, event.data)
    who = f"{said(back.get('component'), 'a daemon')}{_pid(back.get('pid'))}"
    return f"{who} beats again after {back.get('silent_s', 0):.0f}s"


declare(
    "component.recovered",
    ComponentRecoveredData,
    meaning="a silent daemon sends heartbeats again",
    emitted_by="dispatcher, worker or notifier, whichever notices first (events/silence.py)",
    log=SYSTEM,
    worker_output=True,
    describe=_recovered,
)
