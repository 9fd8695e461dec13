"""Every default in one place, each with its unit."""

from __future__ import annotations

REDIS_URL = "redis://127.0.0.1:6379/0"
NAMESPACE = "tw"
QUEUE_NAME = "trainwarden"
EVIDENCE_DIR = "evidence"  # relative to the working directory
AGENT_STATE_FILE = "~/.trainwarden/agent-offsets.json"
AGENT_POLL_INTERVAL_S = 0.05  # seconds between log polls when idle
RECLAIM_IDLE_S = 30.0  # seconds a feed entry may stay unacknowledged before it is re-dispatched
LOCK_TIMEOUT_S = 30.0  # seconds a worker may hold a run's lock between progress
JOB_TIMEOUT_S = 600  # seconds an RQ job may run
DEMO_TIMEOUT_S = 60.0  # seconds the demo waits for the stop before failing
FINDINGS_FILE = "findings.md"  # relative to the settings file (or the working directory without one)
TICK_STARTUP_S = 60.0  # seconds between ticks of a quiet run in its startup phase
TICK_STEADY_S = 900.0  # seconds between ticks of a quiet run after its startup phase
TICK_MAX_SILENCE_S = 86_400.0  # seconds of silence (event time) after which a run is no longer ticked
TICK_CHECK_S = 5.0  # seconds between the dispatcher's looks at the tick schedule
