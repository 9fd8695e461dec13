"""The agent's W&B and GPU sources, end to end into a real Redis."""

import dataclasses
import json
import math
import os
import signal
import subprocess
from pathlib import Path

import pytest
from trainwarden.agent.errors import WandbUnavailable
from trainwarden.agent.gpu import RecordedGpuSampler
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.agent.watch import RunWatch
from trainwarden.agent.watcher import WatchOptions
from trainwarden.events import types as t

from tests.helpers import events_of
from tests.wandb_runs import write_offline_run

pytestmark = pytest.mark.redis

RECORDING = Path(__file__).resolve().parent.parent / "data" / "gpu" / "two_gpus.json"
FAST = AgentConfig(process_interval_s=0.0, gpu_interval_s=0.0, heartbeat_interval_s=3600.0)


def statuses(store, run="exp01"):
    return [(e.data["status"], e.data["reason"]) for e in events_of(store, run, t.SOURCE_STATUS)
            if e.data.get("source") == "metrics"]  # fmt: skip


def test_metrics_come_from_the_wandb_run_files_when_there_are_some(store, tmp_path):
    rows = [{"train/loss": 2.0 - i / 10, "train/global_step": i * 10} for i in range(8)]
    rows[5]["train/loss"] = "nan"
    run_dir = write_offline_run(tmp_path, rows)
    log = tmp_path / "train.log"  # the run also printed its metrics: those are not sent twice
    log.write_text("".join(f"step={i * 10} loss={2.0 - i / 10}\n" for i in range(8)) + "Killed\n")
    watch = RunWatch(run="exp01", log=log, wandb_dir=tmp_path)
    Agent(publisher=Publisher(store), host="gpu1", watches=[watch], config=FAST).run(burst=True)
    ((status, reason),) = statuses(store)
    assert status == "wandb_ok" and str(run_dir) in reason
    metrics = events_of(store, "exp01", t.METRIC)
    assert [e.data["step"] for e in metrics] == [i * 10 for i in range(8)]
    assert math.isnan(metrics[5].data["loss"])
    assert all(e.producer == f"gpu1/wandb/exp01/{run_dir.name}" for e in metrics)
    assert [e.data["tag"] for e in events_of(store, "exp01", t.LOG_LINE)] == ["killed"]


class FlakyApi:
    """A local HistoryApi: answers with rows, or fails like an unreachable W&B."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.down = False
        self.calls = 0

    def history(self, path: str, *, min_step: int) -> list[dict]:
        self.calls += 1
        if self.down:
            raise WandbUnavailable("W&B API: ConnectionError: api.wandb.ai unreachable")
        return [r for r in self.rows if r["_step"] >= min_step]


def test_api_fallback_and_unreachable_transitions(store, tmp_path):
    api = FlakyApi()
    api.rows = [{"_step": i, "_timestamp": 1.0 + i, "loss": 3.0 - i} for i in range(3)]
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=9.0\n")
    watch = RunWatch(run="exp01", log=log, wandb_path="lab/proj/abc123")
    config = dataclasses.replace(FAST, watch=WatchOptions(wandb_api_interval_s=0.0, startup_grace_s=0.0))
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[watch], config=config, wandb_api=api)
    agent.run(burst=True)
    api.down = True
    agent.run(burst=True)
    log.unlink()
    agent.run(burst=True)
    got = statuses(store)
    assert [s for s, _ in got] == ["wandb_ok", "log_fallback", "unreachable"]
    assert "unreachable" in got[1][1] and got[2][1].endswith("and the log cannot be read")
    (first,) = [e for e in events_of(store, "exp01", t.SOURCE_STATUS) if e.data["status"] == "wandb_ok"]
    assert first.data["url"] == "https://wandb.ai/lab/proj/runs/abc123"
    # the log's line was held while W&B answered; no W&B row covered it, so it goes out at the switch
    assert [e.data["loss"] for e in events_of(store, "exp01", t.METRIC)] == [3.0, 2.0, 1.0, 9.0]


def test_recorded_gpus_hot_gpu_and_xid_events(store, tmp_path):
    sampler = RecordedGpuSampler.load(RECORDING)
    for frame in sampler.frames:
        frame["gpus"][0]["pids"] = [os.getpid()]  # this test's process "trains" on GPU 0
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=1.0\n")
    mine = RunWatch(run="exp01", log=log, pid=os.getpid())
    other = RunWatch(run="exp02", log=log, gpus=(0,))  # told its GPUs: NVML cannot see its processes
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[mine, other], config=FAST, gpu=sampler)
    agent.step()
    agent.step()
    agent.flush()
    gpu = events_of(store, "exp01", t.GPU)
    assert [(e.data["gpu"], e.data["gpu_temp"], e.data["mapped"]) for e in gpu] == [(0, 71.0, "process"),
                                                                                     (0, 88.0, "process")]  # fmt: skip
    assert gpu[1].data["throttle"] == ["sw_thermal", "hw_thermal"]
    assert [e.data["mapped"] for e in events_of(store, "exp02", t.GPU)] == ["config", "config"]
    xids = [(e.data["xid"], e.data["mapped"], e.data["severity"]) for e in events_of(store, "exp01", t.GPU_XID)]
    # 79 on its own GPU; 48 on GPU 1, which no run is known to use, goes to every run
    assert xids == [(79, True, "critical"), (48, False, "critical")]
    assert events_of(store, "exp01", t.GPU_XID)[0].data["meaning"] == "GPU has fallen off the bus"
    health = events_of(store, "exp01", t.HEALTH)
    assert health and health[-1].data["alive"] is True and health[-1].data["rss_mb"] > 0


def test_gpu_events_name_another_process_on_the_runs_gpu_and_the_clocks(store, tmp_path):
    """The throughput rule's causes: another job's process on the run's GPU (pid and name), its clocks and power
    limit; a GPU mapped by config only names none (its pids may be another container's)."""
    sampler = RecordedGpuSampler.load(RECORDING)
    # a real process that is not the run's (not under this test's process: its shell parent has exited), "on" GPU 0
    other = int(subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True,
                               text=True, check=True).stdout)  # fmt: skip
    try:
        for frame in sampler.frames:
            frame["gpus"][0]["pids"] = [os.getpid(), other]
        log = tmp_path / "train.log"
        log.write_text("step=1 loss=1.0\n")
        mine = RunWatch(run="exp01", log=log, pid=os.getpid())
        told = RunWatch(run="exp02", log=log, gpus=(0,))
        agent = Agent(publisher=Publisher(store), host="gpu1", watches=[mine, told], config=FAST, gpu=sampler)
        agent.step()
        agent.step()
        agent.flush()
    finally:
        os.kill(other, signal.SIGKILL)
    gpu = events_of(store, "exp01", t.GPU)
    assert [e.data["others"] for e in gpu] == [[{"pid": other, "name": "sleep"}]] * 2
    assert [(e.data["clock_mhz"], e.data["clock_max_mhz"], e.data["power_limit_w"]) for e in gpu] == [
        (1980.0, 1980.0, 700.0), (1095.0, 1980.0, 700.0)]  # fmt: skip
    assert all("others" not in e.data for e in events_of(store, "exp02", t.GPU))


def test_without_nvml_the_agent_says_so_and_goes_on(store, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("step=1 loss=1.0\n")
    agent = Agent(publisher=Publisher(store), host="gpu1", watches=[RunWatch(run="exp01", log=log)],
                  gpu_problem="NVML unavailable: NVML Shared Library Not Found")  # fmt: skip
    agent.run(burst=True)
    (nvml,) = [e for e in events_of(store, "exp01", t.SOURCE_STATUS) if e.data["source"] == "nvml"]
    assert nvml.data["status"] == "unavailable" and "NVML unavailable" in nvml.data["reason"]
    assert len(events_of(store, "exp01", t.METRIC)) == 1
    (beat,) = events_of(store, "exp01", t.AGENT_HEARTBEAT)
    assert beat.data["gpu"] == {"status": "unavailable", "reason": nvml.data["reason"]}
    assert json.dumps(beat.data)  # plain JSON, for people and tools
