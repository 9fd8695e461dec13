"""Event type names. Types are plain strings so that unknown (newer) types survive a round trip.

What each type means and what its `data` holds: events/catalogue.py (and docs/events.md, made from it).
"""

from __future__ import annotations

RUN_LAUNCHED = "run.launched"
RUN_WATCHED = "run.watched"  # an agent began watching a run it did not launch (or re-adopted it): how to stop it
RUN_STARTED = "run.started"
RUN_FINISHED = "run.finished"
RUN_FAILED = "run.failed"
METRIC = "metric"
GPU = "gpu"
GPU_XID = "gpu.xid"  # one NVIDIA XID error: code, meaning, severity
HEALTH = "health"
PROCESS_DUMP = "process.dump"  # where a stalled run's processes are stuck: stacks, CPU, GPU (agent/dumper.py)
LOG_LINE = "log.line"
PHASE = "phase"  # the log says an eval or a checkpoint save began (or a save ended): agent/phases.py
AGENT_HEARTBEAT = "agent.heartbeat"
SOURCE_STATUS = "source.status"
DECISION = "decision"
DECISION_SHADOW = "decision.shadow"  # what a rule in shadow mode would have decided (nothing acts on it)
ANOMALY_OPENED = "anomaly.opened"
ANOMALY_RESOLVED = "anomaly.resolved"
ANOMALY_CHARTED = "anomaly.charted"  # a critical anomaly's chart is kept for Slack (events/packfiles.py)
EVIDENCE_BUILT = "evidence.built"
EVIDENCE_FAILED = "evidence.failed"  # the pack or the findings note could not be written (the stop goes on)
STOP_REQUESTED = "stop.requested"
STOP_DONE = "stop.done"
STOP_FAILED = "stop.failed"
COMMAND_RECEIVED = "command.received"
COMMAND_DENIED = "command.denied"
CHECKPOINT_SAVED = "checkpoint.saved"
CHECKPOINT_DELETED = "checkpoint.deleted"
NOTIFICATION_SENT = "notification.sent"
PREFLIGHT = "preflight"
LAUNCH_REFUSED = "launch.refused"
PLAN_STARTED = "plan.started"
PLAN_STEP = "plan.step"
PLAN_FINISHED = "plan.finished"
RESUME_SKIPPED = "resume.skipped"
# The Slack bot's: see docs/decisions/0010-slack-bot.md.
NOTIFICATION_INTENT = "notification.intent"
NOTIFICATION_FAILED = "notification.failed"  # Slack refused a message (then sent once as plain text)
SNOOZE_SET = "snooze.set"
STOP_CANCELLED = "stop.cancelled"
LAUNCH_FAILED = "launch.failed"
WATCHDOG_STALLED = "watchdog.stalled"
WATCHDOG_RECOVERED = "watchdog.recovered"
COMPONENT_SILENT = "component.silent"  # in SYSTEM_RUN: a daemon's heartbeat went quiet (events/silence.py)
COMPONENT_RECOVERED = "component.recovered"  # in SYSTEM_RUN: it beats again
TICK = "tick"  # a scheduled evaluation of a quiet run (workers/schedule.py)
POLICY_LOADED = "policy.loaded"  # in the reserved SYSTEM_RUN: a policy's text and content hash
POLICY_REJECTED = "policy.rejected"  # in SYSTEM_RUN: a changed policy file that failed validation
POLICY_APPLIED = "policy.applied"  # in a run's log: from which entry on a policy evaluated it

# Every type above: the event-type constants are the upper-case strings defined so far (SYSTEM_RUN
# and the decision values below are not types). Each is described in events/catalogue.py.
KNOWN_TYPES: frozenset[str] = frozenset(
    value for name, value in list(globals().items()) if name.isupper() and isinstance(value, str)
)

# Events that concern the whole installation, not one run (policy.loaded, the bot's dead-man's
# switch, run-less commands), live in this reserved run's log; the launcher refuses it as a run name.
SYSTEM_RUN = "trainwarden.system"

# Types written by the workers as the result of processing a run, and the bot's bookkeeping. A
# feed entry holding only these needs no further processing by the workers (the notifier still
# reads them).
WORKER_OUTPUT_TYPES = frozenset(
    {
        ANOMALY_OPENED,
        ANOMALY_RESOLVED,
        ANOMALY_CHARTED,
        DECISION_SHADOW,
        EVIDENCE_BUILT,
        EVIDENCE_FAILED,
        STOP_DONE,
        STOP_FAILED,
        NOTIFICATION_SENT,
        PREFLIGHT,
        RESUME_SKIPPED,
        NOTIFICATION_INTENT,
        NOTIFICATION_FAILED,
        COMMAND_RECEIVED,
        COMMAND_DENIED,
        SNOOZE_SET,
        LAUNCH_FAILED,
        WATCHDOG_STALLED,
        WATCHDOG_RECOVERED,
        COMPONENT_SILENT,
        COMPONENT_RECOVERED,
        POLICY_LOADED,
        POLICY_REJECTED,
        POLICY_APPLIED,
    }
)

# Decision values, strongest first: STOP beats WAIT beats CONTINUE.
STOP = "STOP"
WAIT = "WAIT"
CONTINUE = "CONTINUE"
DECISION_RANK = {CONTINUE: 0, WAIT: 1, STOP: 2}
