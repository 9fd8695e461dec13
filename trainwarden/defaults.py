"""Every default in one place, each with its unit."""

from __future__ import annotations

REDIS_URL = "redis://127.0.0.1:6379/0"
NAMESPACE = "tw"
QUEUE_NAME = "trainwarden"
EVIDENCE_DIR = "evidence"  # relative to the working directory
AGENT_STATE_FILE = "~/.trainwarden/agent-offsets.json"
AGENT_POLL_INTERVAL_S = 0.05  # seconds between log polls when idle
AGENT_GPU_INTERVAL_S = 10.0  # seconds between GPU samples (NVML)
AGENT_PROCESS_INTERVAL_S = 10.0  # seconds between process health samples (and exit checks)
AGENT_HEARTBEAT_INTERVAL_S = 30.0  # seconds between agent.heartbeat events to each watched run
AGENT_WANDB_STALE_S = 60.0  # seconds W&B may lag the log's metrics before the log takes over
AGENT_WANDB_API_INTERVAL_S = 30.0  # seconds between W&B API reads (only without local run files)
AGENT_WANDB_BASE_URL = "https://wandb.ai"  # for run URLs in source.status events
AGENT_SPOOL_MAX_MB = 256.0  # megabytes the local spool may hold while Redis is unreachable
RECLAIM_IDLE_S = 30.0  # seconds a feed entry may stay unacknowledged before it is re-dispatched
LOCK_TIMEOUT_S = 30.0  # seconds a worker may hold a run's lock between progress
JOB_TIMEOUT_S = 600  # seconds an RQ job may run
DEMO_TIMEOUT_S = 60.0  # seconds the demo waits for the stop before failing
