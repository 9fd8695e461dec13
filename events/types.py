"""Event type names. Types are plain strings so that unknown (newer) types survive a round trip."""

from __future__ import annotations

RUN_LAUNCHED = "run.launched"
RUN_STARTED = "run.started"
RUN_FINISHED = "run.finished"
RUN_FAILED = "run.failed"
METRIC = "metric"
GPU = "gpu"
GPU_XID = "gpu.xid"  # one NVIDIA XID error: code, meaning, severity
HEALTH = "health"
LOG_LINE = "log.line"
AGENT_HEARTBEAT = "agent.heartbeat"
SOURCE_STATUS = "source.status"
DECISION = "decision"
ANOMALY_OPENED = "anomaly.opened"
ANOMALY_RESOLVED = "anomaly.resolved"
EVIDENCE_BUILT = "evidence.built"
STOP_REQUESTED = "stop.requested"
STOP_DONE = "stop.done"
STOP_FAILED = "stop.failed"
COMMAND_RECEIVED = "command.received"
COMMAND_DENIED = "command.denied"
CHECKPOINT_SAVED = "checkpoint.saved"
CHECKPOINT_DELETED = "checkpoint.deleted"
NOTIFICATION_SENT = "notification.sent"

KNOWN_TYPES = frozenset(
    {
        RUN_LAUNCHED,
        RUN_STARTED,
        RUN_FINISHED,
        RUN_FAILED,
        METRIC,
        GPU,
        GPU_XID,
        HEALTH,
        LOG_LINE,
        AGENT_HEARTBEAT,
        SOURCE_STATUS,
        DECISION,
        ANOMALY_OPENED,
        ANOMALY_RESOLVED,
        EVIDENCE_BUILT,
        STOP_REQUESTED,
        STOP_DONE,
        STOP_FAILED,
        COMMAND_RECEIVED,
        COMMAND_DENIED,
        CHECKPOINT_SAVED,
        CHECKPOINT_DELETED,
        NOTIFICATION_SENT,
    }
)

# Types written by the workers as the result of processing a run. A feed entry holding only
# these needs no further processing by the workers (the notifier still reads them).
WORKER_OUTPUT_TYPES = frozenset(
    {ANOMALY_OPENED, ANOMALY_RESOLVED, EVIDENCE_BUILT, STOP_DONE, STOP_FAILED, NOTIFICATION_SENT}
)

# Decision values, strongest first: STOP beats WAIT beats CONTINUE.
STOP = "STOP"
WAIT = "WAIT"
CONTINUE = "CONTINUE"
DECISION_RANK = {CONTINUE: 0, WAIT: 1, STOP: 2}
