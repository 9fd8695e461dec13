"""Distributed training failing: the NCCL watchdog and NCCL's own errors and warnings, gloo timeouts, and
torchrun (torch.distributed.elastic) reporting a dead child. Tags `nccl`, `nccl_warn`, `gloo`, `child_failed`.

A collective that times out is what the other ranks see of one rank's fault (stage COLLECTIVE); torchrun's
report and its SIGTERM of the survivors come last (TEARDOWN)."""

from __future__ import annotations

import re

from trainwarden.core.durations import fmt_duration
from trainwarden.faults.model import COLLECTIVE, FORMAT, TEARDOWN, Sample, Signature, Source, on_rank

NCCL, NCCL_WARN, GLOO, CHILD_FAILED = "nccl", "nccl_warn", "gloo", "child_failed"
STALL_REMEDY = (
    "find the rank that stalled (a hang, a crash, a slow data loader or checkpoint save) and check the interconnect "
    "and the NCCL_* environment; restart from the last checkpoint"
)
PG_NCCL = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"

_WORK = re.compile(r"WorkNCCL\((?=[^)]*SeqNum=(\d+))(?=[^)]*OpType=(\w+))(?=[^)]*Timeout\(ms\)=(\d+))")
_RANK = re.compile(r"\bRank (\d+)\]")


def _watchdog(line: str) -> str | None:
    """`NCCL ALLREDUCE timed out after 30m on rank 3 (SeqNum 5)` from the watchdog's line."""
    work = _WORK.search(line)
    if work is None:
        return None
    seq, op, timeout_ms = work.groups()
    rank = _RANK.search(line)
    on = f" on rank {rank.group(1)}" if rank else on_rank(line)
    return f"NCCL {op} timed out after {fmt_duration(int(timeout_ms) / 1000)}{on} (SeqNum {seq})"


_STUCK = re.compile(r"watchdog got stuck for (\d+) ?seconds")
HANG_REMEDY = (
    "a NCCL or CUDA call hung (a rank stuck in a collective, or another thread holding the GIL inside a CUDA call): "
    "find the rank that stalled (py-spy dump --pid on each rank, the flight recorder's dump), check the interconnect "
    "and the NCCL_* environment; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only if a rank is legitimately slow; restart "
    "from the last checkpoint"
)


def _heartbeat(line: str) -> str | None:
    """`hang: NCCL's watchdog got stuck for 10m on rank 2 (a NCCL/CUDA call hung)`, from the monitor's lines."""
    stuck = _STUCK.search(line)
    rank = _RANK.search(line)
    on = f" on rank {rank.group(1)}" if rank else on_rank(line)
    if stuck is not None:
        return f"hang: NCCL's watchdog got stuck for {fmt_duration(int(stuck.group(1)))}{on} (a NCCL/CUDA call hung)"
    return f"hang: NCCL's heartbeat monitor timed out{on} (the watchdog made no progress: a NCCL/CUDA call hung)"


_NCCL_CODE = re.compile(
    r"unhandled system error|unhandled cuda error|internal error|invalid usage|invalid argument"
    r"|remote process exited or there was a network error"
    r"|nccl(?:Internal|System|UnhandledCuda|Remote|InvalidUsage)Error"
)
_CODE_WORDS = {"ncclInternalError": "internal error", "ncclSystemError": "unhandled system error",
               "ncclUnhandledCudaError": "unhandled cuda error", "ncclInvalidUsage": "invalid usage",
               "ncclRemoteError": "remote process exited or there was a network error"}  # fmt: skip


def _nccl_error(line: str) -> str | None:
    found = _NCCL_CODE.search(line)
    if found is None:
        return None
    code = found.group(0)
    return f"NCCL error{on_rank(line)}: {_CODE_WORDS.get(code.removesuffix('Error'), code)}"


_WARN = re.compile(r"NCCL WARN (.{1,160})")


def _nccl_warn(line: str) -> str | None:
    found = _WARN.search(line)
    return None if found is None else f"NCCL WARN: {' '.join(found.group(1).split())}"


_GLOO = re.compile(r"Timed out waiting (\d+)ms for (\w+) operation to complete")


def _gloo(line: str) -> str | None:
    found = _GLOO.search(line)
    if found is None:
        return None
    return (
        f"collective timed out after {fmt_duration(int(found.group(1)) / 1000)}{on_rank(line)} (gloo {found.group(2)})"
    )


_CHILD = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")


def _child(line: str) -> str | None:
    found = _CHILD.search(line)
    if found is None:
        return None
    code, local_rank, pid = found.groups()
    return f"torchrun: local rank {local_rank} (pid {pid}) failed with exit code {code}"


SIGNATURES = (
    Signature(
        id="nccl_watchdog_timeout",
        tag=NCCL,
        pattern=r"Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=",
        hints=("Watchdog caught", "WorkNCCL("),
        severity="critical",
        what="NCCL collective timed out (the watchdog)",
        remedy=STALL_REMEDY,
        source=Source("pytorch/pytorch", PG_NCCL, "Watchdog caught collective operation timeout: "),
        describe=_watchdog,
        stage=COLLECTIVE,
        samples=(
            Sample(
                "[rank1]:[E626 10:03:21.123456 3127 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000)"
                " ran for 600082 milliseconds before timing out.",
                "NCCL ALLREDUCE timed out after 10m on rank 1 (SeqNum 808)",
                "tests/data/real/nccl_basicsr_allreduce_timeout.log (same shape)",
            ),
        ),
    ),
    Signature(
        id="nccl_error",
        tag=NCCL,
        pattern=r"NCCL (?:error|timeout)|nccl(?:Internal|System|UnhandledCuda|Remote|InvalidUsage)Error",
        hints=("NCCL error", "NCCL timeout", "nccl"),
        severity="critical",
        what="NCCL error",
        remedy="run with NCCL_DEBUG=INFO to see which peer and transport failed; a remote error means another rank "
        "died first (read its log), a system error points at the network (IB, sockets) or shared memory",
        source=Source("NVIDIA/nccl", "src/init.cc", "remote process exited or there was a network error"),
        describe=_nccl_error,
        stage=COLLECTIVE,
        samples=(
            Sample(
                "RuntimeError: NCCL error in: ../torch/csrc/distributed, unhandled system error",
                "NCCL error: unhandled system error",
                "tests/unit/test_parse.py (torch's NCCL error line)",
            ),
            Sample(
                "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
                "remote process exited or there was a network error, NCCL version 2.20.5",
                "NCCL error: remote process exited or there was a network error",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="nccl_heartbeat_hang",
        tag=NCCL,
        # the heartbeat monitor of ProcessGroupNCCL (torch >= 2.2): the watchdog thread itself made no progress
        pattern=r"watchdog got stuck for \d+ ?seconds|Heartbeat monitor timed out|detected no heartbeat of its "
        r"watchdog",
        hints=("watchdog got stuck", "Heartbeat monitor timed out", "no heartbeat of its watchdog"),
        severity="critical",
        what="hang: NCCL's watchdog made no progress (a NCCL/CUDA call hung)",
        remedy=HANG_REMEDY,
        source=Source("pytorch/pytorch", PG_NCCL, "ProcessGroupNCCL's watchdog got stuck for "),
        describe=_heartbeat,
        stage=COLLECTIVE,
        samples=(
            Sample(
                "[rank1]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 1] [PG 0 Rank 1] ProcessGroupNCCL's watchdog got "
                "stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically "
                "indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread "
                "holding the GIL inside a CUDA api, or other deadlock-prone behaviors.",
                "hang: NCCL's watchdog got stuck for 10m on rank 1 (a NCCL/CUDA call hung)",
                "https://github.com/Intellindust-AI-Lab/DEIM/issues/105 (the line cut after its first sentences)",
            ),
            Sample(
                "[rank2]:[E419 10:53:25.421620797 ProcessGroupNCCL.cpp:1484] [PG ID 2 PG GUID 9 Rank 2] "
                "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
                "collectives.",
                "hang: NCCL's watchdog got stuck for 8m on rank 2 (a NCCL/CUDA call hung)",
                "https://github.com/verl-project/verl/issues/1158 (the line cut after its first sentence)",
            ),
            Sample(
                "[rank0]:[E1019 01:04:03.356947152 ProcessGroupNCCL.cpp:1413] [PG 3 Rank 0] Heartbeat monitor timed "
                "out! Process will be terminated after dumping debug info. workMetaList_.size()=121",
                "hang: NCCL's heartbeat monitor timed out on rank 0 (the watchdog made no progress: a NCCL/CUDA call "
                "hung)",
                "https://github.com/sgl-project/sglang/issues/1691",
            ),
        ),
    ),
    Signature(
        id="nccl_process_group_error",
        tag=NCCL,
        pattern=r"\[E[\d :.]*ProcessGroupNCCL\.cpp|NCCL communicator was aborted|setting up NCCL communicator",
        hints=("ProcessGroupNCCL", "NCCL communicator"),
        severity="critical",
        what="NCCL process group error",
        remedy=STALL_REMEDY,
        source=Source("pytorch/pytorch", PG_NCCL, "NCCL communicator was aborted on rank "),
        stage=COLLECTIVE,
        samples=(
            Sample(
                "B-nemo-ft3/0 [default1]:[rank1]: torch.distributed.DistBackendError: [1] is setting up NCCL "
                "communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
                "store->get('0') got error: wait timeout after 600000ms, keys: /default_pg/0//cuda//0",
                None,
                "https://github.com/NVIDIA-NeMo/Speech/issues/14399",
            ),
        ),
        not_samples=(
            "[rank0]:[W1204 13:26:44.000000 8796 ProcessGroupNCCL.cpp:1496] Warning: WARNING: process group has NOT "
            "been destroyed before we destruct ProcessGroupNCCL.",
        ),
    ),
    Signature(
        id="nccl_warn",
        tag=NCCL_WARN,
        pattern=r"\bNCCL WARN\b",
        hints=("NCCL WARN",),
        severity="warning",
        what="NCCL WARN",
        remedy="NCCL reported a problem it may not survive (network, IB, shared memory, a CUDA failure); rerun with "
        "NCCL_DEBUG=INFO if the run fails, and check the interconnect",
        source=Source("NVIDIA/nccl", "src/debug.cc", "[%d] %s:%d NCCL WARN %s\\n"),
        describe=_nccl_warn,
        stage=COLLECTIVE,
        samples=(
            Sample(
                "H100-2:19989:20082 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
                "fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode 32564, len 32564, vendor err 81 (Send)",
                "NCCL WARN: NET/IB : Got completion from peer fe80::966d:ae03:8b:df78%ib0<53249> with error 4, opcode "
                "32564, len 32564, vendor err 81 (Send)",
                "https://github.com/NVIDIA/nccl/issues/928",
            ),
        ),
        not_samples=("H100-2:19989:20082 [1] NCCL INFO transport/net.cc:1008 -> 6",),
    ),
    Signature(
        id="gloo_timeout",
        tag=GLOO,
        pattern=r"Timed out waiting \d+ms for \w+ operation to complete",
        hints=("Timed out waiting",),
        severity="critical",
        what="collective timed out (gloo)",
        remedy=STALL_REMEDY.replace(" and the NCCL_* environment", "")
        + "; raise the process group's timeout only if a rank is legitimately slow",
        source=Source("facebookincubator/gloo", "gloo/transport/tcp/unbound_buffer.cc", "Timed out waiting "),
        describe=_gloo,
        stage=COLLECTIVE,
        samples=(
            Sample(
                "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78]"
                " Timed out waiting 3000ms for recv operation to complete",
                "collective timed out after 3s on rank 0 (gloo recv)",
                "torch 2.13.0 here: torchrun, gloo, one rank asleep (tests/conformance/frameworks/ddp.py runs it)",
            ),
        ),
    ),
    Signature(
        id="gloo_connection",
        tag=GLOO,
        pattern=r"gloo/transport/tcp/pair\.cc:\d+\] (?:Connection closed by peer|Connection reset by peer|Read error)",
        hints=("pair.cc",),
        severity="critical",
        what="gloo lost its connection to a peer (another rank died or the network dropped)",
        remedy="read the log of the rank that died first; check the network between the hosts",
        source=Source("facebookincubator/gloo", "gloo/transport/tcp/pair.cc", "Connection closed by peer "),
        stage=COLLECTIVE,
        samples=(
            Sample(
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                "[10.0.0.2]:45678",
                None,
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="elastic_child_failed",
        tag=CHILD_FAILED,
        pattern=r"failed \(exitcode: \d+\) local_rank: \d+|ChildFailedError",
        hints=("exitcode:", "ChildFailedError"),
        severity="critical",
        what="torchrun: a training process failed (ChildFailedError)",
        remedy="read the first traceback of the failing rank above torchrun's report; set TORCHELASTIC_ERROR_FILE "
        "or use @record to have torchrun show it",
        source=Source(
            "pytorch/pytorch",
            "torch/distributed/elastic/multiprocessing/api.py",
            "failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s",
        ),
        describe=_child,
        stage=TEARDOWN,
        samples=(
            Sample(
                "E1204 13:26:44.796000 8796 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)"
                " local_rank: 0 (pid: 8799) of binary: /work/fw-venv/bin/python3",
                "torchrun: local rank 0 (pid 8799) failed with exit code 1",
                "torch 2.13.0 here (tests/conformance/frameworks/ddp.py runs it)",
            ),
            Sample(
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
                None,
                "https://github.com/lmzpai/roboMamba/issues/10",
            ),
        ),
    ),
)
