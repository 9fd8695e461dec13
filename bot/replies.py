"""Every reply the bot gives to a person's command, built by a named function.

Each says what was refused and how to fix it, or what was done. The notices posted to the channel
live in bot/messages.py. Nothing here touches I/O.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from trainwarden.core.words import clock
from trainwarden.ops.status_messages import NAMESPACE, slash
from trainwarden.policies.durations import duration_problem, fmt_duration

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


def synopsis(command: str, args: str) -> str:
    """`/tw stop RUN [REASON]`; `/tw help`."""
    return " ".join(x for x in (slash(command), args) if x)


def usage(command: str, args: str, what: str) -> str:
    """A command's usage error, from its declaration (bot/slash/)."""
    return f"Usage: {synopsis(command, args)} ({what})"


def help_text(commands: Sequence[tuple[str, str, str]]) -> str:
    """`/tw help`: every subcommand as (name, args, what), in the registry's order (bot/commands.py), and
    where the thread actions are (slash commands do not work in threads)."""
    lines = [f"`{synopsis(name, args)}`: {what}" for name, args, what in commands]
    threads = (
        "In a run's thread (where slash commands do not work): the buttons on its messages, or the "
        "message shortcut *Run actions* (a message's ⋮ menu) for the run's status, Stop and Snooze."
    )
    return "\n".join([f"*/{NAMESPACE}* commands:", *lines, threads])


def unknown_subcommand(name: str, closest: Sequence[str], help_text: str) -> str:
    hint = f" Did you mean {' or '.join(slash(c) for c in closest)}?" if closest else ""
    return f"Unknown command {slash(name)}.{hint}\n{help_text}"


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


def already_ended(run: str, status: str) -> str:
    """/tw stop, or a Stop button clicked late, on a run that has ended: nothing to stop."""
    return f"{run} has already {status}; nothing was done."


def not_in_a_run_thread() -> str:
    return (f"This message is not in a run's thread, so there is no run to act on. Use it on a message in a "
            f"run's thread, or {slash('status')} for every run.")  # fmt: skip


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


def breaker_released(count: int, user: str) -> str:
    return f"<@{user}> released {count} held STOP(s); the outcomes go to the runs' threads."


def breaker_cancelled(count: int, user: str) -> str:
    return f"<@{user}> cancelled {count} held STOP(s); those runs keep running."


def breaker_already_decided() -> str:
    return "The held STOPs were already released or cancelled; nothing changed."


def internal_error() -> str:
    return "Something went wrong on trainwarden's side; nothing was run. The bot's log has the details."
