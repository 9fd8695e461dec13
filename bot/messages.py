"""Every user-facing line the bot writes, built by a named function.

Notification texts are what a phone's lock screen shows, so each carries the whole meaning in one
line: what happened, to which run on which host, the value that triggered it, and the rule.
Replies to commands say what was refused and how to fix it. Nothing here touches I/O.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from trainwarden.events import payloads as p
from trainwarden.events import types as t
from trainwarden.events.envelope import Event
from trainwarden.events.redact import redact_text
from trainwarden.policies.durations import duration_problem, fmt_duration

SPARK = "▁▂▃▄▅▆▇█"
BAR_WIDTH = 10
NOTICE_MAX = 3_000  # a notice is shown as one section block, which Slack caps at this (bot/limits.py)
MASK_MARGIN = 500  # masked beyond the cut, so that no secret is cut in half and shown in part


# -- formatting helpers ---------------------------------------------------------------------------


def where(event: Event) -> str:
    """`run@host`: `run_host` is in the payload of every worker-made type that names the run's host."""
    return f"{event.run}@{event.data.get('run_host') or event.host}"


def clock(ts: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(ts))


def sparkline(values: Sequence[float]) -> str:
    """Recent values as block characters; a non-finite value shows as '!'."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "!" * len(values)
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    return "".join(SPARK[int((v - low) / span * (len(SPARK) - 1))] if math.isfinite(v) else "!" for v in values)


def progress_bar(done: int, total: int) -> str:
    filled = max(0, min(BAR_WIDTH, round(BAR_WIDTH * done / total))) if total > 0 else 0
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"


def epoch(value: object) -> str:
    return f"epoch {number(value)}"


def step(value: int | None) -> str:
    return f"step {value if value is not None else '?'}"


def number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# -- notifications ---------------------------------------------------------------------------------


def anomaly_opened(event: Event) -> str:
    d = cast(p.AnomalyOpenedData, event.data)
    remedy = f" Try: {d['remedy']}." if d.get("remedy") else ""
    return f"ANOMALY {where(event)}: {d.get('reason')} ({d.get('rule')}, {d.get('severity')}).{remedy}"


def anomaly_resolved(event: Event) -> str:
    return f"RESOLVED {where(event)}: {cast(p.AnomalyResolvedData, event.data).get('rule')} is healthy again."


def decision(event: Event) -> str:
    d = cast(p.DecisionData, event.data)
    return f"{d.get('decision')} {where(event)}: {d.get('reason')} ({d.get('rule')})"


def guarded_stop(event: Event) -> str:
    d = cast(p.DecisionData, event.data)
    return f"Stopping {where(event)} in {fmt_duration(d.get('confirm_s', 0))}: {d.get('reason')} ({d.get('rule')})"


def flapping(event: Event, *, openings: int, window_s: float) -> str:
    d = cast(p.AnomalyOpenedData, event.data)
    return (
        f"FLAPPING {where(event)}: {d.get('rule')} opened {openings} times in {fmt_duration(window_s)}; "
        f"quiet until it settles. Last: {d.get('reason')}"
    )


def stop_done(event: Event, evidence_path: str | None, evidence_problem: str | None = None) -> str:
    pack = f" Evidence: {evidence_path}" if evidence_path else ""
    problem = f" {evidence_problem}" if evidence_problem else ""
    return f"STOPPED {where(event)}: {cast(p.StopResultData, event.data).get('detail')}.{pack}{problem}"


def stop_failed(event: Event, evidence_problem: str | None = None) -> str:
    d = cast(p.StopResultData, event.data)
    problem = f" {evidence_problem}" if evidence_problem else ""
    return f"STOP FAILED {where(event)}: {d.get('error')}. Stop it by hand: {d.get('hint')}{problem}"


def evidence_failed(data: p.EvidenceFailedData) -> str:
    """Said in the STOP message: the stop went on, its evidence (or findings note) did not get written."""
    problems = data.get("problems") or [f"{data.get('path')}: {data.get('error')}"]
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"Evidence could not be written: {problems[0]}{more}; fix the path's permissions or space."


def stop_cancelled(event: Event) -> str:
    d = cast(p.StopCancelledData, event.data)
    return (
        f"KEPT RUNNING {where(event)}: <@{d.get('user')}> pressed Keep running; "
        f"{d.get('rule')} is snoozed until {clock(d.get('until', event.ts))}."
    )


def run_failed(event: Event) -> str:
    code = cast(p.RunEndedData, event.data).get("exit_code")
    return f"FAILED {where(event)}: the training process {exit_status(code)}."


def exit_status(code: object) -> str:
    """How a process ended, from its exit code as the wrapper wrote it (128+N: killed by signal N)."""
    if type(code) is not int:
        return "ended with an unknown exit code (it left none: killed, or its host went down)"
    signo = code - 128 if code > 128 else -code if code < 0 else 0
    if signo not in signal.valid_signals():  # 0, or past the last signal (exit 255): a plain exit code
        return f"exited with code {code}"
    name = f" ({signal.Signals(signo).name})" if signo in {s.value for s in signal.Signals} else ""
    return f"was killed by signal {signo}{name}, exit code {code}"


def policy_rejected(event: Event) -> str:
    d = cast(p.PolicyRejectedData, event.data)
    problems = d.get("problems") or []
    first = problems[0] if problems else "unknown problem"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"POLICY REJECTED: {d.get('source')} has errors, still using policy {d.get('kept')}: {first}{more}. "
        "Fix it (check with `trainwarden policy check FILE`); workers reload it at their next job."
    )


def launched(event: Event) -> str:
    d = cast(p.RunLaunchedData, event.data)
    gpus = ",".join(str(g) for g in d.get("gpus") or []) or "-"
    return (
        f"LAUNCHED {event.run}@{d.get('server') or event.host} by <@{d.get('requested_by')}>: GPUs {gpus}, "
        f"tmux session {d.get('session')}, log {d.get('log_path')}"
    )


def launch_failed(event: Event) -> str:
    d = cast(p.LaunchFailedData, event.data)
    return f"LAUNCH FAILED {event.run}@{d.get('server')} (asked by <@{d.get('user')}>): {d.get('error')}"


def watchdog_stalled(event: Event) -> str:
    detail = cast(p.WatchdogStalledData, event.data).get("detail")
    return f"TRAINWARDEN STALLED: {detail}. Runs are not being watched until it recovers."


def watchdog_recovered(event: Event) -> str:
    d = cast(p.WatchdogRecoveredData, event.data)
    return f"TRAINWARDEN RECOVERED after {fmt_duration(d.get('stalled_s', 0))}: {d.get('detail')}."


def component_silent(event: Event) -> str:
    d = cast(p.ComponentSilentData, event.data)
    error = f" Its last error: {d['last_error']}" if d.get("last_error") else ""
    return (
        f"SILENT: the {d.get('role')} on {d.get('host')} (pid {d.get('pid')}) has sent no heartbeat for "
        f"{fmt_duration(d.get('silent_s', 0))}; what it does is not being done (see `trainwarden health`).{error}"
    )


def component_recovered(event: Event) -> str:
    d = cast(p.ComponentRecoveredData, event.data)
    return (
        f"BACK: the {d.get('role')} on {d.get('host')} (pid {d.get('pid')}) sends heartbeats again "
        f"after {fmt_duration(d.get('silent_s', 0))} of silence."
    )


def no_dispatcher() -> str:
    return "no dispatcher has reported (start `trainwarden dispatcher`)"


def dispatcher_silent(seconds: float) -> str:
    return f"the dispatcher has not reported for {fmt_duration(seconds)}"


def workers_behind(pending: int, seconds: float) -> str:
    return f"{pending} feed entries wait for the workers, the oldest for {fmt_duration(seconds)} (are workers running?)"


def progress_again() -> str:
    return "the dispatcher and the workers are making progress again"


def notification_text(
    event: Event, *, evidence_path: str | None = None, evidence_problem: str | None = None
) -> str | None:
    """The line for an event that needs a person, or None for everything else (healthy news)."""
    decided = cast(p.DecisionData, event.data)  # read only for decisions
    text: str | None = None
    if event.type == t.ANOMALY_OPENED:
        text = anomaly_opened(event)
    elif event.type == t.ANOMALY_RESOLVED:
        text = anomaly_resolved(event)
    elif event.type == t.DECISION and decided.get("decision") == t.STOP and decided.get("confirm_s"):
        text = guarded_stop(event)
    elif event.type == t.DECISION and decided.get("decision") in (t.STOP, t.WAIT):
        text = decision(event)
    elif event.type == t.STOP_DONE:
        text = stop_done(event, evidence_path, evidence_problem)
    elif event.type == t.STOP_FAILED:
        text = stop_failed(event, evidence_problem)
    elif event.type == t.STOP_CANCELLED:
        text = stop_cancelled(event)
    elif event.type == t.RUN_FAILED:
        text = run_failed(event)
    elif event.type == t.POLICY_REJECTED:
        text = policy_rejected(event)
    elif event.type == t.RUN_LAUNCHED and cast(p.RunLaunchedData, event.data).get("requested_by"):
        text = launched(event)
    elif event.type == t.LAUNCH_FAILED:
        text = launch_failed(event)
    elif event.type == t.WATCHDOG_STALLED:
        text = watchdog_stalled(event)
    elif event.type == t.WATCHDOG_RECOVERED:
        text = watchdog_recovered(event)
    elif event.type == t.COMPONENT_SILENT:
        text = component_silent(event)
    elif event.type == t.COMPONENT_RECOVERED:
        text = component_recovered(event)
    return None if text is None else masked_head(text, NOTICE_MAX)


def masked_head(text: str, limit: int) -> str:
    """`text` with secrets masked, cut to `limit` with a marker. Only the head is scanned: masking is
    slow on very long texts (a 60,000-character launch error), and only the head is ever shown."""
    if len(text) <= limit:
        return redact_text(text)
    masked = redact_text(text[: limit + MASK_MARGIN])
    keep = max(0, limit - len(truncated(len(text))))
    return masked[:keep] + truncated(len(text) - keep)


def thread_parent(headline: str, open_rules: Sequence[str]) -> str:
    """The run's parent message after an update: its first line and what is open now."""
    state = f"open: {', '.join(open_rules)}" if open_rules else "all anomalies resolved"
    return f"{headline} [{state}]"


def guard_closed(headline: str, outcome: str) -> str:
    return f"{headline} [{outcome}]"


def guard_outcome_stopped(by: str | None) -> str:
    return f"stopped by <@{by}>" if by else "stopped: nobody answered in time"


def guard_outcome_kept(by: str | None) -> str:
    return f"kept running by <@{by}>"


def metric_trend(name: str, values: Sequence[float]) -> str:
    return f"{name} {sparkline(values)} (last {len(values)}: {number(values[-1])})"


def remedy(text: str) -> str:
    return f"Try: {text}"


def wandb_link(url: str) -> str:
    return f"<{url}|W&B run>"


def evidence_link(path: str) -> str:
    return f"Evidence pack: `{path}`"


def truncated(omitted: int) -> str:
    """Ends a text cut to fit Slack's limits."""
    return f" … [{omitted} more characters cut]"


def blocks_left_out(count: int) -> str:
    return f"… {count} more parts of this message were left out (Slack allows 50)."


# -- buttons ---------------------------------------------------------------------------------------

BUTTON_STOP_NOW = "Stop now"
BUTTON_KEEP_RUNNING = "Keep running"
BUTTON_STOP_RUN = "Stop run"
BUTTON_CANCEL = "Cancel"


def button_snooze(seconds: float) -> str:
    return f"Snooze {fmt_duration(seconds)}"


def confirm_stop_title() -> str:
    return "Stop this run?"


def confirm_stop_body(run: str) -> str:
    return f"The workers will stop {run} (tmux kill-session or its stop_command) and save evidence."


def confirm_stop_yes() -> str:
    return "Stop it"


# -- command replies -------------------------------------------------------------------------------


def denied(command: str) -> str:
    return f"Sorry, you are not allowed to use {command} here. Ask an admin to add your Slack user id to slack.allow."


def refused(reason: str) -> str:
    return f"Refused, nothing was run: {reason}."


def too_long(limit: int, length: int) -> str:
    return f"the text is {length} characters long; the limit is {limit}"


def forbidden_chars(chars: str) -> str:
    return f"it contains the characters {chars}, which run names, experiments and reasons never need"


def looks_like_secret() -> str:
    return "that looks like a secret (a token, a key or a password); not echoed. Revoke it if it was real"


def control_chars() -> str:
    return "it contains control characters"


def usage(command: str) -> str:
    return {
        "status": "Usage: /status [RUN]",
        "launch": "Usage: /launch EXPERIMENT [SERVER]",
        "stop": "Usage: /stop RUN [REASON]",
        "snooze": "Usage: /snooze RUN [RULE] DURATION (like 30m, 1h30m, 2d)",
    }.get(command, f"Unknown command {command}")


def unknown_name(kind: str, name: str, closest: Sequence[str], known: Sequence[str]) -> str:
    if closest:
        hint = f" Did you mean {', '.join(closest)}?"
    elif known:
        more = f" (and {len(known) - 5} more)" if len(known) > 5 else ""
        hint = f" Known {kind}s: {', '.join(sorted(known)[:5])}{more}."
    else:
        hint = f" No {kind}s are known yet."
    return f"Unknown {kind} {name!r}.{hint}"


def bad_duration(text: str) -> str:
    return duration_problem(text)


def snooze_out_of_range(text: str, most_s: float) -> str:
    return f"{text!r} is not a duration to snooze for: give more than 0s and at most {fmt_duration(most_s)}, like 1h30m"


def launching(experiment: str, server: str) -> str:
    return f"Launching {experiment} on {server}; the outcome goes to the run's thread."


def no_experiments() -> str:
    return "No experiments are configured: set servers_file and experiments_dir in the settings file."


def wrong_server(experiment: str, configured: str, asked: str) -> str:
    return f"{experiment} runs on {configured} (its experiment file says so), not {asked}"


def stop_confirm(run: str, reason: str) -> str:
    return f"Stop {run}? Reason: {reason}"


def stop_requested(run: str, user: str) -> str:
    return f"Stop of {run} requested by <@{user}>; the outcome goes to the run's thread."


def stop_dismissed(run: str) -> str:
    return f"Kept {run} running; nothing was done."


def snoozed(run: str, rule: str | None, until: float, user: str) -> str:
    what = f"{rule} on {run}" if rule else f"all anomalies of {run}"
    return f"<@{user}> snoozed {what} until {clock(until)} ({fmt_duration(until - time.time())})."


def kept_running(run: str, rule: str, until: float, user: str) -> str:
    return f"<@{user}> kept {run} running; {rule} is snoozed until {clock(until)}."


def guard_already_closed(run: str) -> str:
    return f"The stop of {run} was already decided; nothing changed."


def no_active_runs() -> str:
    return "No active runs."


def status_line(
    *, run: str, host: str, status: str, progress: str, loss: str, gpu: str, source: str, anomalies: str, age: str
) -> str:
    return f"{run}@{host} {status} {progress} loss {loss} gpu {gpu} src {source} anomalies {anomalies} last {age} ago"


def status_detail_header(run: str, host: str, status: str) -> str:
    return f"*{run}@{host}* is {status}"


def status_decisions(decisions: Sequence[Mapping[str, Any]]) -> str:
    lines = [f"{d.get('decision')} at {clock(d.get('ts', 0))}: {d.get('reason')}" for d in decisions]
    return "Decisions: " + ("; ".join(lines) if lines else "none yet")


def status_report(path: str | None) -> str:
    return f"Last training-check report: `{path}/report.md`" if path else "No training-check report yet."


def internal_error() -> str:
    return "Something went wrong on trainwarden's side; nothing was run. The bot's log has the details."


def plan_status_line(plan: str, experiments: list[tuple[str, str]]) -> str:
    """/status line of a plan under way: `plan sweep1: e1 finished · e2 running · e3 pending`."""
    return f"plan {plan}: " + " · ".join(f"{name} {state}" for name, state in experiments)
