"""Where a stalled run is stuck, on real processes: py-spy names the blocked call (a lock, a gloo all_reduce where
one rank never comes), /proc says what it can without py-spy, and a stall anomaly brings the dump from the
run's agent through the control stream into the log, the bot's line and the evidence pack."""

import contextlib
import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trainwarden.agent.control import ControlReader
from trainwarden.agent.dumper import Target, find_pyspy, take_dump
from trainwarden.agent.gpu import RecordedGpuSampler
from trainwarden.agent.publisher import Publisher
from trainwarden.agent.runner import Agent, AgentConfig
from trainwarden.agent.watch import DumpOrder, RunWatch
from trainwarden.bot.notifier import Notifier
from trainwarden.bot.sink import ConsoleSink, Message
from trainwarden.bot.slack_sink import SlackSink
from trainwarden.bot.stages import Pipeline
from trainwarden.bot.stall_messages import process_dump
from trainwarden.core.dumps import stuck_text
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.heartbeat import Heartbeat
from trainwarden.events.projection import fold
from trainwarden.events.redis_types import hash_fields
from trainwarden.workers.actions import build_evidence
from trainwarden.workers.checkpoint import decode_checkpoint
from trainwarden.workers.dump_request import request_dump
from trainwarden.workers.process import process_run
from trainwarden.workers.report import check_facts, render_report

from tests.helpers import events_of, wait_for
from tests.slack_api import sink_for

REPO = Path(__file__).resolve().parents[2]
TORCHRUN = REPO / ".venv-frameworks" / "bin" / "torchrun"
PYSPY = find_pyspy()
needs_pyspy = pytest.mark.skipif(
    PYSPY is None, reason="py-spy is not installed (pip install -e '.[test]' installs it: the `debug` extra)"
)

# a training step that waits on a lock another thread holds for good
LOCKED = """
import threading, time
lock = threading.Lock()
lock.acquire()
def train_step():
    print("ready", flush=True)
    lock.acquire()
train_step()
"""
# two ranks over gloo: rank 0 enters the all_reduce, rank 1 never does
GLOO = """
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"ready {rank}", flush=True)
if rank == 0:
    dist.all_reduce(torch.ones(4))
else:
    time.sleep(3600)
"""


@pytest.fixture
def locked(tmp_path):
    """The lock-blocked loop as a file, as training scripts are (py-spy names files; `-c` has no source)."""
    path = tmp_path / "locked.py"
    path.write_text(LOCKED)
    return [sys.executable, str(path)]


# a data-loader-bound loop: every sample costs seconds of CPU in the main process (num_workers=0)
LOADER = """
import time
import torch
from torch.utils.data import DataLoader, Dataset
class Slow(Dataset):
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        end = time.process_time() + 60
        while time.process_time() < end:
            pass
        return torch.zeros(2)
print("ready", flush=True)
for batch in DataLoader(Slow(), batch_size=2):
    pass
"""


# a loop with a tqdm bar (whose monitor thread waits forever by design) and a callback that deadlocks the main
# thread on a lock the loop took itself
TQDM_LOCKED = """
import threading
from tqdm import tqdm
class Callback:
    def __init__(self, lock):
        self.lock = lock
    def on_step_end(self):
        with self.lock:
            pass
lock = threading.Lock()
callback = Callback(lock)
for step in tqdm(range(100), mininterval=0):
    if step == 2:
        lock.acquire()
        print("ready", flush=True)
        callback.on_step_end()
"""


def order(run="exp01", since=None):
    return DumpOrder(run=run, anomaly=f"eval/{run}:1", rule="run-stalled", reply_as=f"dump/{run}/1-0", since=since)


def started(argv, *, ready, env=None, out=None):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=out or subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=env, text=True, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    seen = ""
    while seen.count("ready") < ready:  # torchrun's two ranks share the pipe: "ready 0ready 1\n" comes too
        line = proc.stdout.readline()
        if not line:  # it ended before saying it was ready: nothing of it may outlive the test
            ended(proc)
            raise AssertionError(f"never ready: {seen!r}")
        seen += line
    return proc


def ended(proc):
    """Kill the process and every descendant: torchrun starts each rank in a session of its own, so killing the
    group left both ranks of the gloo case alive after the test."""
    family = tree(proc.pid)
    os.killpg(proc.pid, 9)
    for pid in family:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    proc.wait(timeout=10)
    if proc.stdout is not None:
        proc.stdout.close()
    wait_for(lambda: not [pid for pid in family if running(pid)], timeout=10, what="the run's processes gone")


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed rank stays one until torchrun, killed too, is reaped by init)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def tree(root: int) -> tuple[int, ...]:
    from trainwarden.agent import procfs

    return tuple(procfs.descendants(root, procfs.snapshot()))


@needs_pyspy
def test_py_spy_names_the_lock_acquire_a_training_step_is_blocked_on(locked):
    proc = started(locked, ready=1)
    try:
        dumped = take_dump(order(since=time.time() - 360), Target((proc.pid,)), pyspy=PYSPY, clock=time.time)
    finally:
        ended(proc)
    assert dumped["method"] == "py-spy" and dumped["verdict"] == "hang", dumped
    assert (dumped.get("where"), dumped.get("category"), dumped.get("pid")) == ("lock.acquire", "lock", proc.pid)
    assert dumped.get("place") == "train_step, locked.py:7"
    assert dumped["cpu_pct"] is not None and dumped["cpu_pct"] < 5.0
    assert 355 <= dumped.get("stalled_s", 0) < 400
    assert f"Thread {proc.pid} (idle)" in dumped["text"]


@needs_pyspy
def test_the_dump_blames_the_main_thread_on_its_lock_and_never_tqdms_monitor_thread(tmp_path):
    pytest.importorskip("tqdm")
    script = tmp_path / "tqdm_locked.py"
    script.write_text(TQDM_LOCKED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = started([sys.executable, str(script)], ready=1, env=env)
    try:
        wait_for(lambda: len(os.listdir(f"/proc/{proc.pid}/task")) >= 2, timeout=10, what="tqdm's monitor thread")
        dumped = take_dump(order(since=time.time() - 360), Target((proc.pid,)), pyspy=PYSPY, clock=time.time)
    finally:
        ended(proc)
    line = process_dump(make_event(t.PROCESS_DUMP, run="exp01", host="gpu1", producer="dump/exp01/1-0", seq=1,
                                   data=dumped, ts=time.time()))  # fmt: skip
    print(line)
    assert '"tqdm_monitor"' in dumped["text"] and "TMonitor.run" in dumped["text"], dumped["text"]
    assert (dumped.get("where"), dumped.get("category"), dumped.get("pid")) == ("with self.lock", "lock", proc.pid)
    assert dumped.get("place") == "Callback.on_step_end, tqdm_locked.py:8", dumped
    assert "in `with self.lock`" in line and "TMonitor" not in line and "was_killed" not in line, line


@needs_pyspy
@pytest.mark.skipif(not TORCHRUN.exists(), reason="torch is not installed in .venv-frameworks (./dev.sh frameworks)")
def test_py_spy_names_the_gloo_all_reduce_and_the_rank_that_never_came(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "gloo_hang.py"
    script.write_text(GLOO)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # no PYTHONUNBUFFERED (tests/conftest.py): the ranks flush "ready"
    argv = [str(TORCHRUN), "--nnodes", "1", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
            "--master-port", str(port), str(script)]  # fmt: skip
    with open(tmp_path / "torchrun.err", "w") as err:
        proc = started(argv, ready=2, env=env, out=err)
    try:
        dumped = take_dump(order(), Target(tree(proc.pid)), pyspy=PYSPY, clock=time.time)
        print(stuck_text(dumped), dumped.get("absent"))
    finally:
        ended(proc)
    assert dumped["method"] == "py-spy" and dumped["processes"] == 3, dumped  # torchrun and its two ranks
    assert dumped.get("where") == "torch.distributed.all_reduce" and dumped.get("category") == "collective", dumped
    assert dumped.get("rank") == 0
    (absent,) = dumped.get("absent") or [None]
    assert absent is not None and absent.startswith("rank 1 (pid ") and "`time.sleep`" in absent, absent
    assert dumped["verdict"] == "hang", dumped


@needs_pyspy
@pytest.mark.skipif(not TORCHRUN.exists(), reason="torch is not installed in .venv-frameworks (./dev.sh frameworks)")
def test_a_busy_data_loader_is_a_slow_phase_not_a_hang(tmp_path):
    script = tmp_path / "loader.py"
    script.write_text(LOADER)
    proc = started([str(TORCHRUN.parent / "python"), str(script)], ready=1)
    try:
        time.sleep(0.5)  # into the first batch
        dumped = take_dump(order(), Target((proc.pid,)), pyspy=PYSPY, clock=time.time)
    finally:
        ended(proc)
    print(stuck_text(dumped), dumped["cpu_pct"])
    assert dumped.get("category") == "dataloader" and dumped.get("where") in ("_next_data", "_get_data"), dumped
    assert dumped["verdict"] == "slow" and (dumped["cpu_pct"] or 0) > 50, dumped


def test_without_py_spy_proc_gives_the_kernel_wait_and_every_thread_state(locked):
    proc = started(locked, ready=1)
    try:
        dumped = take_dump(order(), Target((proc.pid,)), pyspy=None, clock=time.time)
    finally:
        ended(proc)
    assert dumped["method"] == "proc" and dumped["verdict"] == "hang", dumped
    assert str(dumped.get("where")).startswith("kernel futex"), dumped  # a lock: the kernel's futex wait
    assert dumped.get("pid") == proc.pid
    assert f"Process {proc.pid} (python" in dumped["text"] and f"thread {proc.pid} (python" in dumped["text"]
    assert "kernel stack:" in dumped["text"]  # read as root, or said to be root-only


class Both:
    """The console and Slack at once, as `up` shows what it posts (Slack's ts is the one threads hang on)."""

    def __init__(self, console: ConsoleSink, slack: SlackSink) -> None:
        self.console, self.slack = console, slack

    def post(self, message: Message) -> str:
        self.console.post(message)
        return self.slack.post(message)


@pytest.mark.redis
def test_a_stall_brings_the_dump_from_the_agent_into_the_log_the_console_and_the_pack(
    store, worker_ctx, tmp_path, locked, slack_api
):  # fmt: skip
    run = "hang01"
    notified = io.StringIO()
    both = Both(ConsoleSink(notified), sink_for(slack_api))
    notifier = Notifier(store=store, sink=both, consumer="n1", channel="C1", host="bot",
                        pipeline=Pipeline(flap_threshold=3, flap_window_s=3600.0))  # fmt: skip
    notifier.reader.ensure_group()
    proc = started(locked, ready=1)
    # NVML as recorded: the run's process holds GPU 0 (idle); GPU 1 is another job's, busy
    total = {"mem_total_mb": 81559.0}
    gpus = {"gpus": [{"index": 0, "gpu_util": 0.0, "mem_used_mb": 1200.0, **total, "pids": [proc.pid]},
                     {"index": 1, "gpu_util": 97.0, "mem_used_mb": 70000.0, **total, "pids": [1]}]}  # fmt: skip
    try:
        log = tmp_path / "train.log"
        log.write_text("")
        agent = Agent(publisher=Publisher(store), host="gpu1", state_path=tmp_path / "state.json",
                      watches=[RunWatch(run=run, log=log, pid=proc.pid)], gpu=RecordedGpuSampler(frames=[gpus]),
                      config=AgentConfig(process_interval_s=0.05, heartbeat_interval_s=3600.0, control_interval_s=0.05,
                                         gpu_interval_s=0.05),
                      control=ControlReader(store.redis, store.keys.agent_control("gpu1")))  # fmt: skip
        Heartbeat(client=store.redis, keys=store.keys, role="agent", host="gpu1", version="0", interval_s=60).beat()
        # an earlier pack of this run (a guarded STOP that was kept running): the WAIT's stacks go in it
        pack = tmp_path / "evidence" / run / "earlier-pack"
        pack.mkdir(parents=True)
        now = time.time()
        built = {"decision": "eval/x:9", "rule": "loss-spike", "path": str(pack), "files": [], "findings": None,
                 "summary": "s", "run_host": "gpu1"}  # fmt: skip
        store.append([make_event(t.EVIDENCE_BUILT, run=run, host="worker-test", producer="act/x", seq=1, data=built,
                                 ts=now - 500)])  # fmt: skip
        # steps every 2 s, the last one 400 s ago; then the agent's own samples of the blocked process
        store.append([make_event(t.METRIC, run=run, host="gpu1", producer=f"gpu1/log/{run}", seq=i,
                                 data={"step": i, "loss": 2.0 - i / 10}, ts=now - 410 + 2 * i)
                      for i in range(1, 6)])  # fmt: skip
        for _ in range(3):
            agent.step()
            agent.flush()
            time.sleep(0.06)
        process_run(run, [])
        (opened,) = [e for e in events_of(store, run, t.ANOMALY_OPENED) if e.data["rule"] == "run-stalled"]

        def dumped():
            agent.step()
            agent.flush()
            return events_of(store, run, t.PROCESS_DUMP)

        started_at = time.monotonic()
        (dump,) = wait_for(dumped, timeout=30, what="the agent's process.dump")
        took = time.monotonic() - started_at
        assert dump.producer == f"dump/{run}/{store_sid(store, run, opened.id)}" and dump.host == "gpu1"
        assert dump.data["anomaly"] == opened.id and dump.data["method"] in ("py-spy", "proc")
        assert dump.data["verdict"] == "hang" and dump.data["pid"] == proc.pid, dump.data
        assert 395 <= dump.data["stalled_s"] < 460, dump.data  # from the anomaly's silence, not from the dump
        assert dump.data["gpus"] == [{"gpu": 0, "util": 0.0, "mem_used_mb": 1200.0, "mem_total_mb": 81559.0}]
        assert dump.data["gpu_pct"] == 0.0 and 0 <= dump.data["cpu_s_since_step"] < 1.0, dump.data
        if PYSPY is not None:
            assert dump.data["where"] == "lock.acquire", dump.data
        print(f"dump taken {took:.2f}s after the request was written")
        # the request again (a job redone after a crash): the agent does not dump twice; no agent: nothing sent
        request_dump(worker_ctx, opened, store_sid(store, run, opened.id), host="gpu1", now=time.time())
        request_dump(worker_ctx, opened, store_sid(store, run, opened.id), host="no-agent-here", now=time.time())
        assert not store.redis.exists(store.keys.agent_control("no-agent-here"))
        for _ in range(3):
            time.sleep(0.1)
            assert len(dumped()) == 1

        process_run(run, [])  # the dump read back: its stacks go into the run's latest pack
        assert (pack / "stacks.txt").exists(), list(pack.iterdir())
        stacks_txt = (pack / "stacks.txt").read_text()
        assert stacks_txt.startswith(f"# {run}@gpu1 at ") and "a hang" in stacks_txt and dump.data["text"] in stacks_txt

        for _ in range(5):
            notifier.step(block_ms=50)
        lines = notified.getvalue().splitlines()
        (stuck,) = [ln for ln in lines if f"STUCK {run}@gpu1" in ln]
        print(stuck)
        assert f"(pid {proc.pid}), 0% GPU, 0% CPU for " in stuck and "a hang" in stuck, lines
        if PYSPY is not None:
            assert "in `lock.acquire`" in stuck
        # the same line in Slack, in the run's thread (the local Slack Web API server)
        (posted,) = [m for m in slack_api.messages if m.text.startswith(f"STUCK {run}@gpu1")]
        (parent,) = slack_api.parents()
        assert posted.thread_ts == parent.ts and "a hang" in posted.text, posted

        state = fold(events_of(store, run))
        report = render_report(check_facts(state, now=time.time(), interval_s=60, stale_s=60, files_inspected=[]))
        assert f"stacks {pack}/stacks.txt" in report and "a hang" in report, report

        cp = decode_checkpoint(hash_fields(store.redis.hgetall(store.keys.cursor(run))))
        stop = make_event(t.DECISION, run=run, host="worker-test", producer=f"eval/{run}", seq=99, ts=time.time(),
                          data={"decision": t.STOP, "rule": "run-stalled", "reason": "stalled", "trigger": opened.id,
                                "policy": "p", "run_host": "gpu1"})  # fmt: skip
        kind, evidence = build_evidence(worker_ctx, cp, stop)
        assert kind == t.EVIDENCE_BUILT, evidence
        assert "stacks.txt" in evidence["files"] and (Path(evidence["path"]) / "stacks.txt").read_text() == stacks_txt
    finally:
        ended(proc)


def store_sid(store, run, event_id):
    return next(sid for sid, e in store.iter_run(run) if getattr(e, "id", None) == event_id)
