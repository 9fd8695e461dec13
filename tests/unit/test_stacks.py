"""Where a stalled run is stuck, from py-spy's text (agent/stacks.py), and how it is said (bot/stall_messages.py)."""

import pytest
from trainwarden.agent import stacks
from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.watch import DUMP, parse_control
from trainwarden.bot.messages import notification_text
from trainwarden.core.dumps import stuck_text
from trainwarden.events import types as t
from trainwarden.events.envelope import make_event
from trainwarden.events.projection import fold
from trainwarden.ops.render import describe, state_lines

SITE = "/venv/lib/python3.11/site-packages"
# as `py-spy dump --nonblocking --full-filenames` prints them (0.4.3)
GLOO = f"""Process 19136: /venv/bin/python /work/train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 19136 (idle): "MainThread"
    all_reduce ({SITE}/torch/distributed/distributed_c10d.py:3252)
    _exception_logger.<locals>.wrapper ({SITE}/torch/distributed/c10d_logger.py:83)
    train_step (/work/train.py:8)
    <module> (/work/train.py:11)
Thread 0x7F00AA (idle): "pin_memory"
    wait (/usr/lib/python3.11/threading.py:324)
    get (/usr/lib/python3.11/queue.py:180)
    _pin_memory_loop ({SITE}/torch/utils/data/_utils/pin_memory.py:52)
"""
LOADER = f"""Thread 200 (active+gil): "MainThread"
    Slow.__getitem__ (/work/train.py:9)
    poll (/usr/lib/python3.11/multiprocessing/connection.py:257)
    get (/usr/lib/python3.11/multiprocessing/queues.py:113)
    _try_get_data ({SITE}/torch/utils/data/dataloader.py:1133)
    _get_data ({SITE}/torch/utils/data/dataloader.py:1294)
    _next_data ({SITE}/torch/utils/data/dataloader.py:1332)
    __next__ ({SITE}/torch/utils/data/dataloader.py:630)
    main (/work/train.py:30)
"""


def test_the_parser_reads_threads_innermost_first_and_skips_the_header():
    main, pinner = stacks.parse_pyspy(GLOO)
    assert (main.tid, main.name, main.idle) == ("19136", "MainThread", True)
    assert [f.function for f in main.frames] == ["all_reduce", "_exception_logger.<locals>.wrapper", "train_step",
                                                 "<module>"]  # fmt: skip
    assert main.frames[2] == stacks.Frame("train_step", "/work/train.py", 8)
    assert pinner.tid == "0x7F00AA" and pinner.name == "pin_memory"
    assert stacks.parse_pyspy("Error: Failed to find python version from target process") == []


def test_a_collective_is_named_past_the_logger_wrapper_and_the_queue_internals_are_skipped():
    main, pinner = stacks.parse_pyspy(GLOO)
    at = stacks.where(main)
    assert at is not None and (at.call, at.category) == ("torch.distributed.all_reduce", stacks.COLLECTIVE)
    assert at.place == "all_reduce, distributed_c10d.py:3252"
    pin = stacks.where(pinner)
    assert pin is not None and pin.frame.function == "_pin_memory_loop"  # not threading's wait, not queue's get


def test_the_data_loader_fetch_is_preferred_over_the_pipe_it_polls():
    (main,) = stacks.parse_pyspy(LOADER)
    assert main.idle is False
    at = stacks.where(main)
    assert at is not None and (at.call, at.category) == ("_try_get_data", stacks.DATALOADER)
    assert at.place == "Slow.__getitem__, train.py:9"  # where its time goes: the Dataset's code


def test_a_lock_is_named_from_the_source_line_of_the_innermost_frame():
    frame = stacks.Frame("train_step", "/work/train.py", 4, code="self.lock.acquire()  # the other rank holds it")
    at = stacks.where(stacks.Thread("1", "MainThread", True, (frame,)))
    assert at is not None and (at.call, at.category) == ("lock.acquire", stacks.LOCK)
    assert stacks.call_on_line("data = f.read(1 << 20)") == "f.read"
    assert stacks.call_on_line("x = 1") is None
    read = stacks.where(stacks.Thread("1", "", None, (stacks.Frame("load", "/work/io.py", 3, "f.readinto(buf)"),)))
    assert read is not None and read.category == stacks.IO


def test_the_culprit_is_the_collective_and_the_absent_rank_is_named():
    (in_it,) = [stacks.where(th) for th in stacks.parse_pyspy(GLOO)[:1]]
    assert in_it is not None
    sleeper = stacks.Thread(
        "2", "MainThread", True, (stacks.Frame("train_step", "/work/train.py", 10, "time.sleep(3600)"),)
    )
    procs = [
        stacks.ProcessState(pid=10, rank=None, cpu_pct=0.0),  # torchrun: no stack read
        stacks.ProcessState(pid=11, rank=0, cpu_pct=0.0, threads=tuple(stacks.parse_pyspy(GLOO))),
        stacks.ProcessState(pid=12, rank=1, cpu_pct=0.0, threads=(sleeper,)),
    ]
    found = stacks.culprit(procs)
    assert found is not None and found[0].pid == 11 and found[1].call == "torch.distributed.all_reduce"
    ((absent, where),) = stacks.absent_ranks(procs, found[1])
    assert absent.rank == 1 and where is not None and where.call == "time.sleep"
    assert stacks.culprit([stacks.ProcessState(pid=1, rank=None, cpu_pct=0.0)]) is None


@pytest.mark.parametrize(
    ("cpu", "gpu", "verdict"),
    [(0.0, None, stacks.HANG), (0.0, 0.0, stacks.HANG), (3.0, 2.0, stacks.HANG), (99.0, None, stacks.SLOW),
     (0.0, 87.0, stacks.SLOW), (None, 0.0, stacks.UNKNOWN)],
)  # fmt: skip
def test_no_cpu_and_no_gpu_work_is_a_hang_and_either_is_a_slow_phase(cpu, gpu, verdict):
    assert stacks.verdict(cpu, gpu) == verdict


def dump_event(**data):
    base = {"anomaly": "eval/exp01:3", "rule": "run-stalled", "method": "py-spy", "processes": 3, "gpus": [],
            "text": "Thread 1 (idle)", "cpu_pct": 0.0, "gpu_pct": 0.0}  # fmt: skip
    return make_event(t.PROCESS_DUMP, run="exp01", host="gpu1", producer="dump/exp01/5-0", seq=1,
                      data={**base, **data}, ts=1000.0)  # fmt: skip


def test_the_line_says_where_it_hangs_with_the_rank_pid_gpu_cpu_and_how_long():
    event = dump_event(verdict="hang", where="torch.distributed.all_reduce", category="collective", pid=123, rank=0,
                       place="all_reduce, distributed_c10d.py:3252", stalled_s=361.0,
                       absent=["rank 1 (pid 124, in `time.sleep`: train_step, train.py:10)"])  # fmt: skip
    text = notification_text(event)
    assert text is not None
    assert text.startswith("STUCK exp01@gpu1 in `torch.distributed.all_reduce` (rank 0, pid 123), 0% GPU, 0% CPU "
                           "for 6m01s: a hang (alive, doing no work); not in that call: rank 1 (pid 124")  # fmt: skip
    assert "(run-stalled; the stacks: `trainwarden check exp01`)" in text


def test_the_line_says_a_busy_data_loader_is_a_slow_phase_not_a_hang():
    event = dump_event(verdict="slow", where="_next_data", category="dataloader", pid=5, cpu_pct=100.0, gpu_pct=None)
    text = notification_text(event)
    assert text is not None and text.startswith(
        "BUSY exp01@gpu1 in the DataLoader (`_next_data`), 100% CPU: a slow phase (data loading), not a hang"
    )


def test_without_py_spy_the_line_says_what_to_install():
    text = notification_text(dump_event(verdict="hang", method="proc", where="kernel futex_do_wait", pid=7))
    assert text is not None and "`kernel futex_do_wait` (pid 7)" in text and "trainwarden[debug]" in text
    assert stuck_text({"where": "lock.acquire", "pid": 7, "verdict": "hang", "place": "step, a.py:4"}) == (
        "stuck in `lock.acquire` (pid 7; step, a.py:4): a hang"
    )


def test_the_dump_control_message_is_parsed_and_checked():
    fields = {b"op": b"dump", b"run": b"exp01", b"anomaly": b"eval/exp01:3", b"rule": b"run-stalled",
              b"reply_as": b"dump/exp01/5-0", b"since": b"1000.5"}  # fmt: skip
    message = parse_control(fields)
    assert message.op == DUMP and message.dump is not None
    assert (message.dump.anomaly, message.dump.reply_as, message.dump.since) == ("eval/exp01:3", "dump/exp01/5-0",
                                                                                1000.5)  # fmt: skip
    with pytest.raises(ControlMessageError, match="'reply_as' starting with 'dump/'"):
        parse_control({**fields, b"reply_as": b"act/exp01/5-0"})
    with pytest.raises(ControlMessageError, match="'since' must be a unix time"):
        parse_control({**fields, b"since": b"yesterday"})


def test_replay_says_where_the_dump_found_the_run():
    event = dump_event(verdict="hang", where="lock.acquire", category="lock", pid=7, text="x" * 50_000)
    line = describe(event)
    assert line == "stuck in `lock.acquire` (pid 7): a hang (py-spy, 3 processes)"
    (stuck,) = [ln for ln in state_lines(fold([event])) if ln.startswith("stuck:")]
    assert stuck.endswith("stuck in `lock.acquire` (pid 7): a hang (its process.dump)") and "xxx" not in stuck


PY = "/usr/lib/python3.11"
# a run with a tqdm bar whose callback deadlocked the main thread on a lock (as py-spy 0.4 dumps it), and the
# helpers a training process keeps that wait by design
HELPERS = f"""Thread 300 (idle): "MainThread"
    Cb.on_step_end (/work/train.py:8)
    <module> (/work/train.py:17)
Thread 301 (idle): "tqdm_monitor"
    Condition.wait ({PY}/threading.py:331)
    Event.wait ({PY}/threading.py:629)
    TMonitor.run ({SITE}/tqdm/_monitor.py:69)
    Thread._bootstrap_inner ({PY}/threading.py:1045)
Thread 302 (idle): "Thread-2 (_pin_memory_loop)"
    get ({PY}/queue.py:180)
    _pin_memory_loop ({SITE}/torch/utils/data/_utils/pin_memory.py:52)
Thread 303 (idle): "Thread-3 (_monitor)"
    get ({PY}/queue.py:171)
    dequeue ({PY}/logging/handlers.py:1531)
    QueueListener._monitor ({PY}/logging/handlers.py:1564)
Thread 304 (idle): "MsgRouterThr"
    Condition.wait ({PY}/threading.py:331)
    MessageRouter._read_message ({SITE}/wandb/sdk/interface/router_sock.py:27)
    MessageRouter.message_loop ({SITE}/wandb/sdk/interface/router.py:70)
Thread 305 (idle): "Thread-5"
    Condition.wait ({PY}/threading.py:331)
    Event.wait ({PY}/threading.py:629)
    Timer.run ({PY}/threading.py:1412)
Thread 306 (idle): "ThreadPoolExecutor-0_0"
    get ({PY}/queue.py:171)
    _worker ({PY}/concurrent/futures/thread.py:81)
"""
CODE = {("/work/train.py", 8): "with self.lock:",
        (f"{SITE}/tqdm/_monitor.py", 69): "self.was_killed.wait(self.sleep_interval)",
        (f"{SITE}/wandb/sdk/interface/router_sock.py", 27): "self._cond.wait(timeout=1)"}  # fmt: skip


def with_code(threads):
    return tuple(stacks.Thread(th.tid, th.name, th.idle, tuple(stacks.Frame(f.function, f.file, f.line,
                 CODE.get((f.file, f.line))) for f in th.frames)) for th in threads)  # fmt: skip


def test_the_main_thread_on_a_lock_is_blamed_and_never_a_helper_that_waits_by_design():
    threads = with_code(stacks.parse_pyspy(HELPERS))
    assert [stacks.idle_helper(th) for th in threads] == [
        None, "tqdm's monitor thread", "torch's pin-memory thread", "a logging QueueListener",
        "W&B's service and internal threads", "a threading.Timer waiting", "an idle concurrent.futures worker",
    ]  # fmt: skip
    found = stacks.culprit([stacks.ProcessState(pid=300, rank=None, cpu_pct=0.0, threads=threads)])
    assert found is not None
    assert (found[1].call, found[1].category, found[1].place) == ("with self.lock", stacks.LOCK,
                                                                 "Cb.on_step_end, train.py:8")  # fmt: skip
    # the helpers alone: nothing to blame (the dump falls back to the kernel's wait)
    assert stacks.culprit([stacks.ProcessState(pid=300, rank=None, cpu_pct=0.0, threads=threads[1:])]) is None


def test_a_helper_at_work_in_user_code_and_the_thread_holding_the_step_are_not_idle():
    busy = stacks.Thread("7", "ThreadPoolExecutor-0_0", True, (
        stacks.Frame("upload", "/work/ckpt.py", 12, "self.lock.acquire()"),
        stacks.Frame("_worker", f"{PY}/concurrent/futures/thread.py", 83),
    ))  # fmt: skip
    assert stacks.idle_helper(busy) is None
    main = stacks.Thread("9", "MainThread", True, (stacks.Frame("main", "/work/run.py", 30, "trainer.join()"),))
    loop = stacks.Thread("10", "trainer", True, (
        stacks.Frame("fetch", "/work/data.py", 4, "sock.recv_into(buf)"),
        stacks.Frame("train_step", "/work/run.py", 12, "batch = fetch()"),
    ))  # fmt: skip
    found = stacks.culprit([stacks.ProcessState(pid=9, rank=None, cpu_pct=0.0, threads=(main, loop, busy))])
    assert found is not None and (found[1].call, found[1].frame.function) == ("sock.recv_into", "fetch")
