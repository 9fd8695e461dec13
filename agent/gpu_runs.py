"""Which GPU samples and XID events belong to which run: a run's GPUs are those its processes use (NVML's
compute processes), else the ones its watch names (`gpus`). An XID on a GPU no run is known to use goes to
every run: too rare and grave to lose."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainwarden.agent import procfs
from trainwarden.agent.gpu import GpuSample, Xid
from trainwarden.agent.watcher import RunWatcher
from trainwarden.events import types as t
from trainwarden.events.payloads import GpuProcessData


def gpus_of(watcher: RunWatcher, samples: Sequence[GpuSample]) -> set[int]:
    pids = set(watcher.health.pids)
    return {s.index for s in samples if pids.intersection(s.pids)} | set(watcher.watch.gpus)


def others(sample: GpuSample, pids: set[int]) -> list[GpuProcessData]:
    """The compute processes on a GPU that are not the run's, named (a job sharing the GPU slows the run). Only
    where NVML lists the run's own pids too: then its pids are this agent's, not another container's."""
    out: list[GpuProcessData] = []
    for pid in sample.pids:
        if pid not in pids:
            stat = procfs.read_stat(pid)
            out.append({"pid": pid, "name": stat.comm if stat is not None else ""})
    return out


def gpu_run_events(live: Sequence[RunWatcher], samples: Sequence[GpuSample],
                   xids: Sequence[Xid]) -> list[tuple[str, str, str, dict[str, Any]]]:  # fmt: skip
    """(event type, run, producer suffix, data) of the `gpu` events for the GPUs each live run uses, and of XIDs."""
    out: list[tuple[str, str, str, dict[str, Any]]] = []
    used = {w.run: gpus_of(w, samples) for w in live}
    claimed = set().union(*used.values()) if used else set()
    for w in live:
        pids = set(w.health.pids)
        for s in samples:
            if s.index in used[w.run]:
                data = {**s.data(), "mapped": "process" if pids.intersection(s.pids) else "config"}
                if data["mapped"] == "process" and (named := others(s, pids)):
                    data["others"] = named
                out.append((t.GPU, w.run, "gpu", data))
        for x in xids:
            if x.index in used[w.run] or x.index not in claimed:
                out.append((t.GPU_XID, w.run, "xid", {**x.data(), "mapped": x.index in used[w.run]}))
    return out
