"""Errors of the agent (the whole tree is drawn in core/errors.py).

TrainwardenError (trainwarden.core.errors)
└── AgentError                  the agent's sources and control stream
    ├── SourceUnavailable       a metric source cannot be read now; the agent says so and keeps running
    │   ├── GpuUnavailable      NVML missing (no driver, no nvidia-ml-py) or failing
    │   ├── WandbUnavailable    W&B run files or API cannot be read
    │   └── MetricFileError     a structured metric file is corrupt, or its reader package is missing
    ├── WandbFileError          a W&B transaction log that is not what it should be (bad header, checksum)
    ├── SpoolUnwritable         the spool cannot be written (a full or read-only disk): events wait in memory
    ├── ControlMessageError     a control-stream message the agent cannot use (it is skipped, with the reason)
    └── AgentBusy               `agent --burst` while another agent holds the host's agent lease

A source error never stops the agent: it becomes a `source.status` event or a heartbeat field.
`trainwarden policy backtest` raises SourceUnavailable too, for a log file or W&B directory it cannot read.
"""

from __future__ import annotations

from trainwarden.core.errors import TrainwardenError


class AgentError(TrainwardenError):
    """Base class of the agent's errors."""


class SourceUnavailable(AgentError):
    """A metric source (training log, NVML, W&B) cannot be read right now; the agent retries on the next poll."""


class GpuUnavailable(SourceUnavailable):
    """NVML cannot be used on this machine."""


class WandbUnavailable(SourceUnavailable):
    """W&B (run files or API) cannot be read."""


class MetricFileError(SourceUnavailable):
    """A structured metric file (TensorBoard events, ...) is corrupt, or the package that reads it is missing."""


class WandbFileError(AgentError):
    """A W&B run file is corrupt or not a W&B transaction log."""


class SpoolUnwritable(AgentError):
    """The spool cannot be written now (a full or read-only disk): the events stay in memory, log reading
    pauses (the logs keep the lines), and the write is tried again. `kept`: how many of the events given,
    the oldest, did reach the disk before it refused."""

    def __init__(self, message: str, *, kept: int = 0) -> None:
        super().__init__(message)
        self.kept = kept


class ControlMessageError(AgentError):
    """A control-stream message is malformed; it is skipped and logged."""


class AgentBusy(AgentError):
    """Another agent holds the host's agent lease (events/agent_lease.py); a --burst run does not wait for it."""
