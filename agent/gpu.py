"""GPUs as a source: one small interface, a recorded implementation (tests, benchmarks), events.

The real implementation is `agent.nvml.NvmlSampler` (pynvml, from nvidia-ml-py), exercised by
`scripts/check_nvml.py` on a machine with a GPU; that script can also record a session into the
JSON format `RecordedGpuSampler` replays.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from trainwarden.agent.xid import describe


@dataclass(frozen=True, slots=True)
class GpuSample:
    index: int
    uuid: str = ""
    name: str = ""
    gpu_util: float | None = None  # % of time a kernel ran
    mem_util: float | None = None  # % of time memory was read or written
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None
    gpu_temp: float | None = None  # degrees C
    power_w: float | None = None
    power_limit_w: float | None = None  # the enforced power limit: power_w at it with sw_power_cap is power-capped
    clock_mhz: float | None = None  # SM clock now; under clock_max_mhz while throttled (a slowdown, not a setting)
    clock_max_mhz: float | None = None
    throttle: tuple[str, ...] = ()  # active clock throttle reasons (hw_slowdown, sw_thermal, ...)
    ecc_corrected: int | None = None  # volatile counts; None where ECC is not supported
    ecc_uncorrected: int | None = None
    pids: tuple[int, ...] = ()  # compute processes on it (the agent names those that are not the run's: `others`)

    def data(self) -> dict[str, Any]:
        """The `gpu` event's data: measured fields only (None and pids left out)."""
        out = {k: v for k, v in asdict(self).items() if v is not None and k not in ("pids", "index")}
        out["gpu"] = self.index
        out["throttle"] = list(self.throttle)
        return out


@dataclass(frozen=True, slots=True)
class Xid:
    index: int  # GPU index
    code: int
    uuid: str = ""

    def data(self) -> dict[str, Any]:
        severity, meaning = describe(self.code)
        return {"gpu": self.index, "uuid": self.uuid, "xid": self.code, "meaning": meaning, "severity": severity}


class GpuSampler(Protocol):
    def info(self) -> dict[str, Any]:
        """Driver and NVML versions, GPU count: for the heartbeat."""
        ...

    def sample(self) -> list[GpuSample]: ...

    def xids(self) -> list[Xid]:
        """XID errors that happened since the last call (never blocks)."""
        ...

    def close(self) -> None: ...


@dataclass(slots=True)
class RecordedGpuSampler:
    """Replays frames recorded from a real GPU (or written by hand): each `sample()` returns the
    next frame (the last one repeats); `xids()` returns the XIDs of the frame last sampled, once."""

    frames: list[dict[str, Any]]
    recorded_info: dict[str, Any] = field(default_factory=dict)
    position: int = 0
    _pending: list[Xid] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> RecordedGpuSampler:
        raw = json.loads(Path(path).read_text())
        return cls(frames=list(raw["frames"]), recorded_info=dict(raw.get("info", {})))

    def info(self) -> dict[str, Any]:
        return {**self.recorded_info, "recorded": True}

    def sample(self) -> list[GpuSample]:
        frame = self.frames[min(self.position, len(self.frames) - 1)]
        self.position += 1
        self._pending = [Xid(**x) for x in frame.get("xids", [])] if self.position <= len(self.frames) else []
        return [_sample(g) for g in frame.get("gpus", [])]

    def xids(self) -> list[Xid]:
        out, self._pending = self._pending, []
        return out

    def close(self) -> None:
        return None


def _sample(raw: dict[str, Any]) -> GpuSample:
    values = dict(raw)
    values["throttle"] = tuple(values.get("throttle", ()))
    values["pids"] = tuple(values.get("pids", ()))
    return GpuSample(**values)


def frame_of(samples: list[GpuSample], xids: list[Xid]) -> dict[str, Any]:
    """One recording frame (what `RecordedGpuSampler` replays)."""
    return {"gpus": [{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(s).items()} for s in samples],
            "xids": [asdict(x) for x in xids]}  # fmt: skip
