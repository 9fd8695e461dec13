"""What `trainwarden mcp` says to an agent: the server's instructions, each tool's outcome and refusal.

Pure text builders, one per message, so that every word an agent reads is found here (as bot/messages.py
holds Slack's). An agent acts on what it reads: each refusal names the fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainwarden.mcp_server.config import ACTIONS

INSTRUCTIONS = (
    "trainwarden watches ML training runs (metrics, logs, W&B, GPUs) and decides CONTINUE / WAIT / STOP for each. "
    "To monitor a run, call `check` with its name about every 30 minutes (the report's `Next check` says when): "
    "it is the training-check report (data source, recent metrics, anomalies, evidence, decision, reason, next "
    "check). `runs` lists the runs, `status` gives one line per active run, `replay` the run's timeline and its "
    "state at a time, `policy_backtest` when a policy would have fired on a recorded run. trainwarden stops a run "
    "itself when its policy says STOP; `stop` and `launch` are for what you decide, and work only where the "
    "operator allowed them (mcp.allow_actions in the settings). Every action is recorded with your identity."
)


def not_allowed(action: str, caller: str, allowed: Sequence[str]) -> str:
    enabled = ", ".join(sorted(allowed)) or "none"
    return (
        f"{action} is not allowed for MCP clients ({caller}): the settings allow {enabled}. Nothing was done; the "
        f"refusal is recorded. A person can allow it in the settings file: mcp: {{allow_actions: [{action}]}} "
        f"(or true for {' and '.join(ACTIONS)}), then restart `trainwarden mcp`."
    )


def unknown_run(run: str) -> str:
    return f"unknown run {run!r}: it has no events; the `runs` tool lists the runs trainwarden knows"


def stop_requested(run: str, caller: str, request: str) -> str:
    return (
        f"stop requested for {run} by {caller} (request {request}); the workers carry it out. Call `check` or "
        f"`replay` on {run} to see the outcome, or call `stop` with wait_s to wait for it."
    )


def stop_done(run: str, detail: str | None) -> str:
    return f"stopped {run}: {detail or 'done'}"


def stop_failed(run: str, error: str | None, hint: str | None) -> str:
    by_hand = f"; stop it by hand: {hint}" if hint else ""
    return f"the stop of {run} failed: {error or 'no error recorded'}{by_hand}"


def stop_no_outcome(run: str, waited_s: float) -> str:
    return (
        f"stop requested for {run}, but no outcome within {waited_s:g}s: are `trainwarden dispatcher` and "
        f"`trainwarden worker` running? Call `check` on {run} later to see it."
    )


def no_experiments() -> str:
    return (
        "no experiments are configured, so there is nothing to launch: `launch` starts an experiment of "
        "experiments_dir on its server (set servers_file in the settings; see docs/remote.md)"
    )


def force_launch(experiment: str) -> str:
    """The call that launches what a plan holds back (said inside a plan's refusal)."""
    return f"launch experiment={experiment} force=true"


def launched(run: str, server: str, gpus: object, session: str, log: str) -> str:
    return (
        f"launched {run} on {server} GPUs {gpus} in tmux session {session}; log: {server}:{log}. Its agent follows "
        f"it: call `check` on {run} in about 30 minutes."
    )


def launched_and_stopped(run: str, stopped: str) -> str:
    return f"{run} started, and was stopped at once: {stopped}; call `check` on {run} for why"


def launched_and_finished(run: str, log: str) -> str:
    return f"{run} ran and finished at once (exit status 0); log: {log}"


def with_notes(text: str, notes: Sequence[str]) -> str:
    """A read's text, then what reading it noticed (archived entries missing here, Redis unreachable)."""
    return "\n".join([text, *(f"note: {note}" for note in notes)])
