"""Every user-facing notification line, built by a named function.

The text is what a phone's lock screen shows, so each carries the whole meaning in one line:
what happened, to which run on which host, the value that triggered it, and the rule.
"""

from __future__ import annotations

from events import types as t
from events.envelope import Event
from events.redact import redact_text


def where(event: Event) -> str:
    return f"{event.run}@{event.data.get('run_host') or event.host}"


def anomaly_opened(event: Event) -> str:
    d = event.data
    remedy = f" Try: {d['remedy']}." if d.get("remedy") else ""
    return f"ANOMALY {where(event)}: {d.get('reason')} ({d.get('rule')}, {d.get('severity')}).{remedy}"


def anomaly_resolved(event: Event) -> str:
    return f"RESOLVED {where(event)}: {event.data.get('rule')} is healthy again."


def decision(event: Event) -> str:
    d = event.data
    return f"{d.get('decision')} {where(event)}: {d.get('reason')} ({d.get('rule')})"


def stop_done(event: Event, evidence_path: str | None) -> str:
    pack = f" Evidence: {evidence_path}" if evidence_path else ""
    return f"STOPPED {where(event)}: {event.data.get('detail')}.{pack}"


def stop_failed(event: Event) -> str:
    d = event.data
    return f"STOP FAILED {where(event)}: {d.get('error')}. Stop it by hand: {d.get('hint')}"


def run_failed(event: Event) -> str:
    code = event.data.get("exit_code")
    return f"FAILED {where(event)}: the training process exited with code {code}."


def policy_rejected(event: Event) -> str:
    d = event.data
    problems = d.get("problems") or []
    first = problems[0] if problems else "unknown problem"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"POLICY REJECTED: {d.get('source')} has errors, still using policy {d.get('kept')}: {first}{more}. "
        "Fix it (check with `trainwarden policy check FILE`); workers reload it at their next job."
    )


def notification_text(event: Event, *, evidence_path: str | None = None) -> str | None:
    """The line for an event that needs a person, or None for everything else (healthy news)."""
    if event.type == t.ANOMALY_OPENED:
        text = anomaly_opened(event)
    elif event.type == t.ANOMALY_RESOLVED:
        text = anomaly_resolved(event)
    elif event.type == t.DECISION and event.data.get("decision") in (t.STOP, t.WAIT):
        text = decision(event)
    elif event.type == t.STOP_DONE:
        text = stop_done(event, evidence_path)
    elif event.type == t.STOP_FAILED:
        text = stop_failed(event)
    elif event.type == t.RUN_FAILED:
        text = run_failed(event)
    elif event.type == t.POLICY_REJECTED:
        text = policy_rejected(event)
    else:
        return None
    return redact_text(text)
