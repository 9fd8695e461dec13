"""The real GPU sampler: NVML through pynvml (package nvidia-ml-py, the `agent` extra).

Every NVML error is converted at this edge: a missing library or driver raises GpuUnavailable
(the agent then says "NVML unavailable" in a `source.status` event and keeps running); a field a
GPU does not support (ECC on consumer cards, power on some boards) is left out of the sample.
Checked on a GPU machine by `scripts/check_nvml.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from trainwarden.agent.errors import GpuUnavailable
from trainwarden.agent.gpu import GpuSample, Xid

T = TypeVar("T")

# NVML clock throttle reason bits -> names in `gpu` events
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


def throttle_names(mask: int) -> tuple[str, ...]:
    """Pure: the names of the bits set in an NVML throttle-reason mask (idle is not a problem)."""
    return tuple(name for bit, name in THROTTLE_REASONS.items() if mask & bit and name != "gpu_idle")


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:
        raise GpuUnavailable(
            f"NVML unavailable: nvidia-ml-py is not installed (pip install 'trainwarden[gpu]'): {exc}"
        ) from exc
    return pynvml


class NvmlSampler:
    def __init__(self) -> None:
        nv = self.nv = _pynvml()
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise GpuUnavailable(f"NVML unavailable: {exc} (is the NVIDIA driver installed and loaded?)") from exc
        try:
            self.handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
            self.uuids = [_text(nv.nvmlDeviceGetUUID(h)) for h in self.handles]
            self.names = [_text(nv.nvmlDeviceGetName(h)) for h in self.handles]
            self.events = nv.nvmlEventSetCreate()
        except nv.NVMLError as exc:
            nv.nvmlShutdown()
            raise GpuUnavailable(f"NVML unavailable: {exc}") from exc
        self.xid_watched: list[int] = []
        for i, h in enumerate(self.handles):
            try:
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self.events)
                self.xid_watched.append(i)
            except nv.NVMLError:
                continue  # this GPU cannot report XID events (older boards, some vGPUs)

    def info(self) -> dict[str, Any]:
        nv = self.nv
        return {
            "driver": _text(self._try(nv.nvmlSystemGetDriverVersion)),
            "nvml": _text(self._try(nv.nvmlSystemGetNVMLVersion)),
            "gpus": len(self.handles),
            "xid_events": self.xid_watched,
        }

    def sample(self) -> list[GpuSample]:
        return [self._one(i, h) for i, h in enumerate(self.handles)]

    def _one(self, i: int, h: Any) -> GpuSample:
        nv = self.nv
        util = self._try(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        mem = self._try(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        temp = self._try(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        power = self._try(lambda: nv.nvmlDeviceGetPowerUsage(h))
        reasons = self._try(lambda: _throttle_mask(nv, h))
        limit = self._try(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        clock = self._try(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        top = self._try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
        ecc_c = self._try(
            lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC)
        )
        ecc_u = self._try(
            lambda: nv.nvmlDeviceGetTotalEccErrors(h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
        )
        procs = self._try(lambda: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []
        return GpuSample(
            index=i,
            uuid=self.uuids[i],
            name=self.names[i],
            gpu_util=float(util.gpu) if util is not None else None,
            mem_util=float(util.memory) if util is not None else None,
            mem_used_mb=round(mem.used / 2**20, 1) if mem is not None else None,
            mem_total_mb=round(mem.total / 2**20, 1) if mem is not None else None,
            gpu_temp=float(temp) if temp is not None else None,
            power_w=round(power / 1000, 1) if power is not None else None,
            power_limit_w=round(limit / 1000, 1) if limit is not None else None,
            clock_mhz=float(clock) if clock is not None else None,
            clock_max_mhz=float(top) if top else None,
            throttle=throttle_names(reasons) if reasons is not None else (),
            ecc_corrected=ecc_c,
            ecc_uncorrected=ecc_u,
            pids=tuple(p.pid for p in procs),
        )  # fmt: skip

    def xids(self) -> list[Xid]:
        nv = self.nv
        out: list[Xid] = []
        while True:
            try:
                event = nv.nvmlEventSetWait_v2(self.events, 0)
            except nv.NVMLError_Timeout:
                return out
            except nv.NVMLError:
                return out
            if event.eventType == nv.nvmlEventTypeXidCriticalError:
                index = self._index_of(event.device)
                out.append(Xid(index=index, code=int(event.eventData), uuid=self.uuids[index] if index >= 0 else ""))

    def _index_of(self, handle: Any) -> int:
        try:
            return int(self.nv.nvmlDeviceGetIndex(handle))
        except self.nv.NVMLError:
            return -1

    def close(self) -> None:
        try:
            self.nv.nvmlEventSetFree(self.events)
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            return

    def _try(self, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except self.nv.NVMLError:
            return None


def _throttle_mask(nv: Any, handle: Any) -> int:
    """The clock throttle reasons (NVML 12.x names them clock event reasons, the old call deprecated)."""
    current = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return int(current(handle) if current is not None else nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")
