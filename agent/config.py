"""The agent's defaults, each defined once with its unit; `AgentConfig`, `WatchOptions`, the spool
and the settings file all read them from here (a leaf module: importing it loads nothing else)."""

from __future__ import annotations

STATE_FILE = "agent-state.json"  # in the data directory: read offsets, registered runs (spool/ beside it)
POLL_INTERVAL_S = 0.05  # seconds between log polls when idle
GPU_INTERVAL_S = 10.0  # seconds between GPU samples (NVML)
PROCESS_INTERVAL_S = 10.0  # seconds between process health samples (and exit checks)
HEARTBEAT_INTERVAL_S = 30.0  # seconds between agent.heartbeat events to each watched run
WANDB_STALE_S = 60.0  # seconds W&B may lag the log's metrics before the log takes over
WANDB_API_INTERVAL_S = 30.0  # seconds between W&B API reads (only without local run files)
WANDB_BASE_URL = "https://wandb.ai"  # for run URLs in source.status events
SPOOL_MAX_MB = 256.0  # megabytes the local spool may hold while Redis is unreachable
UNREADABLE_AFTER_S = 60.0  # seconds a log may grow without a training metric before the run is said unreadable
UNREADABLE_AFTER_LINES = 50  # ... or this many lines (progress-bar redraws not counted), whichever comes first
# a log of start-up lines only (compiling, downloading, indexing: no metric-looking line) is said only after this,
# with start-up advice; the same budget as the stall kind's `first_step_budget` default (tests/unit/test_blind.py)
FIRST_STEP_BUDGET_S = 1200.0
LEASE_S = 15.0  # seconds a host's agent lease runs unrenewed: a standby agent takes over at most this after a hang
# seconds a renamed log (rotation) stays open after it stopped growing, its writer gone: a run writing through
# `>> train.log`, `tee` or a FileHandler keeps writing into the renamed file (Filebeat's close_inactive,
# fluent-bit's rotate_wait)
ROTATE_WAIT_S = 30.0
