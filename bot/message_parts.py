"""The parts around a notice: a thread's parent line, a guard's outcome, links, the marker of a cut text,
the buttons' labels and the stop confirmation. Pure, like bot/messages.py, which words the notices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainwarden.policies.durations import fmt_duration


def thread_parent(headline: str, open_rules: Sequence[str]) -> str:
    """The run's parent message after an update: its first line and what is open now."""
    state = f"open: {', '.join(open_rules)}" if open_rules else "all anomalies resolved"
    return f"{headline} [{state}]"


def closed(headline: str, outcome: str) -> str:
    """A message whose buttons can no longer act (a decided guard, the parent of a run that stopped or ended):
    its first line and the outcome, in one line."""
    return f"{headline} [{outcome}]"


def guard_outcome_stopped(by: str | None) -> str:
    return f"stopped by <@{by}>" if by else "stopped: nobody answered in time"


def guard_outcome_kept(by: str | None) -> str:
    return f"kept running by <@{by}>"


def run_stopped(by: str | None) -> str:
    """The outcome on a run's parent message once the run was stopped."""
    return f"run stopped by <@{by}>" if by else "run stopped"


RUN_FINISHED = "run finished"  # the outcome on a run's parent message once it ended by itself


def run_failed(code: object) -> str:
    """The outcome on a run's parent message once the run failed (the thread's FAILED says the rest)."""
    return f"run failed, exit code {code}" if type(code) is int else "run failed"


def stop_held() -> str:
    """The outcome on a run's STOP message once the stop breaker held it: the run goes on."""
    return "held by the stop breaker: not stopped; see the STOP BREAKER message"


def breaker_held(runs: Mapping[str, Mapping[str, Any]], *, stops: object, limit: object, window_s: object) -> str:
    """The stop breaker's one message: what is held and why (`runs`: run -> its `stop.held` payload)."""
    window = fmt_duration(window_s) if isinstance(window_s, int | float) else "the window"
    listed = ", ".join(f"{run} ({held.get('rule') or 'a rule'}: {held.get('reason') or 'no reason'})"
                       for run, held in runs.items())  # fmt: skip
    return (f"STOP BREAKER: {len(runs)} policy STOPs held ({stops} carried out in the last {window}; limit {limit}): "
            f"{listed} — nothing is stopped until you choose")  # fmt: skip


def breaker_released(runs: Sequence[str], by: str) -> str:
    """The stop breaker's message after Release all, in one line."""
    return f"STOP BREAKER: released by <@{by}>: stopping {', '.join(runs) or 'no run still held'}"


def breaker_cancelled(runs: Sequence[str], by: str) -> str:
    """The stop breaker's message after Cancel all, in one line."""
    return f"STOP BREAKER: cancelled by <@{by}>: {', '.join(runs) or 'no run still held'} keep running"


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
BUTTON_RELEASE_ALL = "Release all"  # the stop breaker's message: carry out the held stops
BUTTON_CANCEL_ALL = "Cancel all"  # ... or keep the runs running
# the run's status, privately, with its Stop and Snooze (slash commands do not work in threads)
BUTTON_STATUS = "Status"


def button_snooze(seconds: float) -> str:
    return f"Snooze {fmt_duration(seconds)}"


def confirm_stop_title() -> str:
    return "Stop this run?"


def confirm_stop_body(run: str) -> str:
    return (
        f"The workers will stop {run} (its stop_command, Ctrl-C to its tmux session, or signals from its "
        "host's agent) and save evidence."
    )


def confirm_stop_yes() -> str:
    return "Stop it"
