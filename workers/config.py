"""The workers' and dispatcher's defaults, each defined once with its unit; the dispatcher, the
worker context, the tick schedule and the settings file read them from here (a leaf module)."""

from __future__ import annotations

from dataclasses import dataclass

QUEUE_NAME = "trainwarden"  # the RQ queue jobs go to
FAST_QUEUE_SUFFIX = "-fast"  # the fast lane of a queue (workers/lanes.py): its name plus this
LOCK_TIMEOUT_S = 30.0  # seconds a worker may hold a run's lock between progress
EVIDENCE_TIMEOUT_S = 10.0  # seconds an evidence pack may take before the STOP goes on without it (a hung mount)
JOB_TIMEOUT_S = 600  # seconds an RQ job may run
RUNS_PER_JOB = 32  # runs one RQ job may cover (the dispatcher fills jobs this full while workers are busy)
CHECKPOINT_CACHE_RUNS = 4096  # runs whose last committed checkpoint a worker process keeps (workers/batch.py)
LINGER_S = 0.1  # seconds the dispatcher gathers runs into a job while the queue is not empty
FAST_START_S = 1.0  # a fast-lane job not begun this long after a worker took it is dispatched again
IDLE_LINGER_S = 0.05  # the same while the queue is empty (urgent runs never wait: workers/lanes.py)
TICK_CHECK_S = 5.0  # seconds between the dispatcher's looks at the tick schedule
TICK_STARTUP_S = 60.0  # seconds between ticks of a quiet run in its startup phase
TICK_STEADY_S = 900.0  # seconds between ticks of a quiet run after its startup phase
CHECK_INTERVAL_S = 1800.0  # seconds between training checks: a report's `Next check` (the method's 30 minutes)
TICK_MAX_SILENCE_S = 86_400.0  # seconds of silence (event time) after which a run is no longer ticked
BREAKER_MAX_STOPS = 3  # policy STOPs carried out across all runs within the window before the rest are held
BREAKER_WINDOW_S = 600.0  # the stop breaker's sliding window (workers/breaker.py)
BREAKER_MAX_SHARE = 0.1  # or this share of the running runs, when more than max_stops
BREAKER_NEW_RULE_GRACE_S = 600.0  # seconds after a rule is first loaded in which its STOP of a healthy run is held
BREAKER_RUNNING_CACHE_S = 10.0  # seconds the count of running runs (the share's base) is kept in Redis


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """`workers.breaker` in the settings file (workers/breaker.py)."""

    max_stops: int = BREAKER_MAX_STOPS  # 0: no breaker
    window_s: float = BREAKER_WINDOW_S
    max_share: float = BREAKER_MAX_SHARE  # 0: the limit is max_stops alone
    new_rule_grace_s: float = BREAKER_NEW_RULE_GRACE_S  # 0: no grace
