"""The MCP server's actions, `stop` and `launch`, under the audit and authorization that Slack's commands have.

Every call is recorded before anything else, as Slack's bot/authz.py records a slash command: a
`command.received` event (via `mcp`, the caller `mcp:<identity>`, the arguments with secrets masked) in the
log of the run it names, else trainwarden's system log. An action the settings do not allow
(`mcp.allow_actions`) is then recorded as `command.denied` and refused with nothing else done. An allowed
stop is the same `stop.requested` the CLI appends (by `mcp`, user the caller); a launch goes through the
remote launcher as Slack's /launch does: plans, the W&B guard, the preflight, SSH and tmux.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import cast

from trainwarden import wiring
from trainwarden.core.errors import ActionNotAllowed, TrainwardenError, UsageError
from trainwarden.core.redact import redact_text
from trainwarden.core.words import shorten
from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import RUN_NAME_RE, make_event, time_seq
from trainwarden.events.store import EventStore
from trainwarden.extras import require
from trainwarden.mcp_server import messages
from trainwarden.mcp_server.config import CALLER_PREFIX, IDENTITY_RE, LAUNCH, STOP
from trainwarden.ops.launch_messages import failed_at_launch
from trainwarden.ops.stop import request_stop, stop_asked, wait_outcome
from trainwarden.remote.errors import LaunchError, PlanHeld
from trainwarden.remote.first_seconds import WINDOW_S
from trainwarden.remote.plan_gate import plan_refusal
from trainwarden.settings import Settings

log = logging.getLogger(__name__)

VIA = "mcp"  # CommandData.via, StopRequestedData.by and LaunchFailedData.by of what an MCP client asked
AUDIT_TEXT_MAX = 500  # as Slack's audit keeps of a command's text
REASON_MAX = 200  # as Slack's /stop takes
DEFAULT_STOP_REASON = "stopped by an agent over MCP"
MAX_WAIT_S = 120.0  # a tool call that waits longer than this risks the client's own timeout
UNKNOWN_CLIENT = "unknown"


def caller(identity: str | None, client_name: str | None) -> str:
    """`mcp:<identity>`: the configured identity, else the name the client gave (made safe to record and post),
    else `mcp:unknown`. An identity in the settings is the operator's word; a client's name is only its claim."""
    if identity:
        return CALLER_PREFIX + identity
    name = re.sub(r"[^A-Za-z0-9._@-]+", "-", client_name or "").strip("-._@")[:64]
    return CALLER_PREFIX + (name if name and IDENTITY_RE.match(name) else UNKNOWN_CLIENT)


class Actions:
    """Stop and launch for one server process; `caller` is passed per call (each MCP session has its own)."""

    def __init__(self, *, store: EventStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.allowed = settings.mcp.allow_actions

    def stop(self, who: str, run: str, *, reason: str | None = None, wait_s: float = 0.0) -> str:
        why = shorten(redact_text(reason or DEFAULT_STOP_REASON), REASON_MAX)
        self._admit(who, STOP, run, f"stop {run} {why}")
        asked: p.StopRequestedData = {"by": VIA, "user": who, "reason": why}
        event, sid = request_stop(self.store, self.settings, run, asked)
        if wait_s <= 0:
            return messages.stop_requested(run, who, event.id)
        waited = min(wait_s, MAX_WAIT_S)
        outcome = wait_outcome(self.store, run, event.id, sid, waited)
        if outcome is None:
            return messages.stop_no_outcome(run, waited)
        d = cast(p.StopResultData, outcome.data)
        if outcome.type == t.STOP_DONE:
            return messages.stop_done(run, d.get("detail"))
        return messages.stop_failed(run, d.get("error"), d.get("hint"))

    def launch(self, who: str, experiment: str, *, force: bool = False, check_s: float = WINDOW_S) -> str:
        self._admit(who, LAUNCH, experiment, f"launch {experiment}" + (" --force" if force else ""))
        fleet = wiring.fleet(self.settings)
        if fleet is None:
            raise UsageError(messages.no_experiments())
        require("mcp", "asyncssh")  # the server extra: launches go over SSH
        launcher = wiring.remote_launcher(self.settings, fleet, self.store)
        exp = launcher.experiment(experiment)  # an unknown name says which are known
        if not force and (hold := launcher.plan_hold(exp.name)) is not None:  # the fix in the tool's words
            text = plan_refusal(hold, messages.force_launch(exp.name))
            launcher.refuse_held(hold, text)  # launch.refused, as the CLI's and /launch's refusals
            raise PlanHeld(text, run=exp.name, hold=hold)
        try:
            launched = launcher.launch(exp.name, extra={"requested_by": who}, force=force, by=who)
            early = launcher.first_seconds(launched, within_s=check_s) if check_s > 0 else None
        except TrainwardenError as exc:  # refusals (plan, W&B guard, preflight) were recorded by the launcher too
            failed: p.LaunchFailedData = {"by": VIA, "server": exp.server, "user": who,
                                          "error": redact_text(str(exc))}  # fmt: skip
            self._append(t.LAUNCH_FAILED, exp.name, failed)
            raise
        d = cast(p.RunLaunchedData, launched.data)
        where = f"{d['server']}:{d['log_path']}"
        if early is None:
            return messages.launched(launched.run, d["server"], d["gpus"], d["session"], d["log_path"])
        if early.code == 0:
            return messages.launched_and_finished(launched.run, where)
        if stopped := stop_asked(self.store, launched.run, after=launched.ts):
            return messages.launched_and_stopped(launched.run, stopped)
        raise LaunchError("\n".join(failed_at_launch(launched.run, early, where)))  # names the run itself

    def _admit(self, who: str, action: str, target: str, text: str) -> None:
        """Record the call, then refuse it (recorded as denied) unless the settings allow `action`."""
        self._audit(t.COMMAND_RECEIVED, who, action, target, text)
        if action in self.allowed:
            return
        self._audit(t.COMMAND_DENIED, who, action, target, text)
        log.warning("denied %s of %s to %s: not in mcp.allow_actions", action, target, who)
        raise ActionNotAllowed(messages.not_allowed(action, who, sorted(self.allowed)))

    def _audit(self, event_type: str, who: str, action: str, target: str, text: str) -> None:
        data: p.CommandData = {"command": action, "user": who, "channel": None, "via": VIA,
                               "text": redact_text(text)[:AUDIT_TEXT_MAX]}  # fmt: skip
        self._append(event_type, self._log_of(target), data)

    def _log_of(self, name: str) -> str:
        """The log a call about `name` is recorded in: that run's, when it is one, else the system log."""
        if RUN_NAME_RE.match(name) and self.store.length(name) > 0:
            return name
        return t.SYSTEM_RUN

    def _append(self, event_type: str, run: str, data: Mapping[str, object]) -> None:
        event = make_event(event_type, run=run, host=self.settings.host, producer=f"{VIA}/{self.settings.host}",
                           seq=time_seq(), data=data)  # fmt: skip
        self.store.append_one(event)
