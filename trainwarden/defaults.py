"""Every default in one place, each with its unit."""

from __future__ import annotations

REDIS_URL = "redis://127.0.0.1:6379/0"
NAMESPACE = "tw"
QUEUE_NAME = "trainwarden"
EVIDENCE_DIR = "evidence"  # relative to the working directory
ARCHIVE_DIR = "archive"  # relative to the working directory (`archive_dir:` in settings: to that file)
AGENT_STATE_FILE = "~/.trainwarden/agent-state.json"  # read offsets, registered runs (spool/ beside it)
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
RUNS_PER_JOB = 32  # runs one RQ job may cover (the dispatcher fills jobs this full while workers are busy)
DISPATCH_LINGER_S = 0.1  # seconds the dispatcher gathers runs into a job while the queue is not empty
DEMO_TIMEOUT_S = 60.0  # seconds the demo waits for the stop before failing
FINDINGS_FILE = "findings.md"  # relative to the working directory (`findings_file:` in settings: to that file)
TICK_STARTUP_S = 60.0  # seconds between ticks of a quiet run in its startup phase
TICK_STEADY_S = 900.0  # seconds between ticks of a quiet run after its startup phase
TICK_MAX_SILENCE_S = 86_400.0  # seconds of silence (event time) after which a run is no longer ticked
TICK_CHECK_S = 5.0  # seconds between the dispatcher's looks at the tick schedule

# Slack bot
SLACK_RATE_PER_S = 1.0  # messages per second per channel (Slack allows about one, with short bursts)
SLACK_BURST = 4  # messages a channel may take at once before the rate applies
FLAP_THRESHOLD = 3  # openings of one (run, rule) within FLAP_WINDOW_S before it is reported as flapping
FLAP_WINDOW_S = 3600.0  # seconds
KEEP_RUNNING_SNOOZE_S = 3600.0  # seconds a rule stays snoozed after "Keep running"
DEADMAN_S = 120.0  # seconds without dispatcher heartbeat or with a stuck feed entry before the bot alerts
SLACK_HTTP_HOST = "0.0.0.0"  # HTTP mode: address the endpoint listens on
SLACK_HTTP_PORT = 3000  # HTTP mode: port of the endpoint Slack posts commands and clicks to
SLACK_TIMEOUT_S = 10  # seconds one Web API call may take
SLACK_MAX_ATTEMPTS = 6  # tries of one Web API call on 5xx / connection errors before giving up for now
SLACK_BACKOFF_S = 0.2  # first pause between such tries, doubled each time (max 10 s)
