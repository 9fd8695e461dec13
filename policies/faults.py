"""What a fault line says, in the few words a message needs: pure functions over one log line.

`describe(tag, line)` turns the line that matched a fault tag (events/logtags.py) into the specifics
a person acts on: how much memory the OOM asked for, which collective timed out after how long on
which rank, which signal killed a worker. None where the line has no such specifics: the caller
quotes the line itself (`quote`).
"""

from __future__ import annotations

import re
import signal

from trainwarden.events import logtags
from trainwarden.policies.durations import fmt_duration

MAX_QUOTE = 500  # characters of the matched line kept in the anomaly's values
SHOWN = 200  # characters of it shown in a reason

_TORCH_OOM = re.compile(r"CUDA out of memory\. Tried to allocate ([\d.]+ ?[KMGT]?i?B)")
# torch >= 2.1 says `GPU 5 has a total capacity of 23.65 GiB of which 208.06 MiB is free`; older ones
# `(GPU 0; 10.76 GiB total capacity; 9.12 GiB already allocated; 18.56 MiB free; ...)`
_TORCH_GPU = re.compile(
    r"GPU (\d+) has a total capacity of ([\d.]+ ?[KMGT]?i?B) of which ([\d.]+ ?[KMGT]?i?B) is free"
    r"|\(GPU (\d+); ([\d.]+ ?[KMGT]?i?B) total capacity;.*?([\d.]+ ?[KMGT]?i?B) free"
)
_TF_OOM = re.compile(r"OOM when allocating tensor with shape ?\[([^\]]*)\]")
_TF_DEVICE = re.compile(r"device:(GPU:\d+)")
_WORK = re.compile(r"WorkNCCL\((?=[^)]*SeqNum=(\d+))(?=[^)]*OpType=(\w+))(?=[^)]*Timeout\(ms\)=(\d+))")
_RANK = re.compile(r"\bRank (\d+)\]")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG[A-Z]+)\)|exitcode\s*:\s*-(\d+)|died with <Signals\.(SIG[A-Z]+): (\d+)>")


def describe(tag: str, line: str) -> str | None:
    """The fault in a few words, from the line that matched `tag`; None when the line says no more than itself."""
    if tag == logtags.OOM:
        return oom(line)
    if tag == logtags.NCCL:
        return nccl_timeout(line)
    if tag == logtags.KILLED:
        return killed(line)
    return None


def oom(line: str) -> str | None:
    """`CUDA out of memory. Tried to allocate 2.00 GiB on GPU 5 (23.65 GiB total, 208.06 MiB free)`,
    `OOM when allocating tensor with shape[295,64,256,256] on GPU:0`."""
    if found := _TORCH_OOM.search(line):
        gpu = _TORCH_GPU.search(line, found.end())
        where = ""
        if gpu is not None:
            index, total, free = (gpu.group(1), gpu.group(2), gpu.group(3)) if gpu.group(1) else gpu.group(4, 5, 6)
            where = f" on GPU {index} ({total} total, {free} free)"
        return f"CUDA out of memory. Tried to allocate {found.group(1)}{where}"
    if found := _TF_OOM.search(line):
        device = _TF_DEVICE.search(line, found.end())
        return f"OOM when allocating tensor with shape[{found.group(1)}]" + (f" on {device.group(1)}" if device else "")
    return None


def nccl_timeout(line: str) -> str | None:
    """`NCCL ALLREDUCE timed out after 30m on rank 3 (SeqNum 5)` from the watchdog's line."""
    work = _WORK.search(line)
    if work is None:
        return None
    seq, op, timeout_ms = work.groups()
    rank = _RANK.search(line)
    on_rank = f" on rank {rank.group(1)}" if rank else ""
    return f"NCCL {op} timed out after {fmt_duration(int(timeout_ms) / 1000)}{on_rank} (SeqNum {seq})"


def killed(line: str) -> str | None:
    """`a training process died of signal 9 (SIGKILL)` from torchrun's or subprocess's report."""
    found = _SIGNAL.search(line)
    if found is None:
        return None
    number = found.group(1) or found.group(3) or found.group(5)
    name = found.group(2) or found.group(4) or _signal_name(int(number))
    return f"a training process died of signal {number} ({name})"


def quote(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
