"""The host taking a process down: signals (the kernel's OOM killer, a segfault, a bus error, an illegal
instruction, SIGTERM from a launcher), data loader workers killed or dead (PyTorch's DataLoader, batchgenerators'
MultiThreadedAugmenter), and a full disk. Tags `killed`, `disk_full`."""

from __future__ import annotations

import re
import signal

from trainwarden.faults.model import FORMAT, TEARDOWN, Sample, Signature, Source

KILLED, DISK_FULL = "killed", "disk_full"
SIGKILL_REMEDY = (
    "a SIGKILL is most often the kernel's out-of-memory killer (check dmesg for `Out of memory: Killed process`); "
    "use fewer DataLoader workers or less host RAM per process"
)
NATIVE_REMEDY = (
    "a native crash: check native extensions (custom CUDA/C++ ops, a library built for another CPU or torch), the "
    "driver, and run once with `python -X faulthandler` to see the Python frame"
)
AUGMENTER_REMEDY = (
    "a batchgenerators (nnU-Net) data-augmentation worker died: its own error is printed further up the log "
    "(`Exception in background worker`); if there is none, it was most likely killed by the out-of-memory killer "
    "(check dmesg): use fewer workers (nnUNet_n_proc_DA) or a machine with more RAM"
)
BATCHGENERATORS_MTA = "batchgenerators/dataloading/multi_threaded_augmenter.py"
SHM_REMEDY = (
    "the DataLoader workers ran out of shared memory (/dev/shm): raise it (docker --shm-size=16g, or --ipc=host), "
    "or lower num_workers"
)
ELASTIC_ERRORS = "torch/distributed/elastic/multiprocessing/errors/__init__.py"
GLIBC_SIGNALS = Source("bminor/glibc", "sysdeps/generic/siglist.h", "Segmentation fault")
SAVE_CONTEXT = (
    (r"torch\.save|save_checkpoint|save_pretrained|save_model|serialization\.py|checkpoint", " at a checkpoint save"),
)

_SIGNAL = re.compile(r"Signal (\d+) \((SIG[A-Z]+)\)|exitcode\s*:\s*-(\d+)|died with <Signals\.(SIG[A-Z]+): (\d+)>")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def _killed(line: str) -> str | None:
    """`a training process died of signal 9 (SIGKILL)` from torchrun's or multiprocessing's report."""
    found = _SIGNAL.search(line)
    if found is None:
        return None
    number = found.group(1) or found.group(3) or found.group(5)
    name = found.group(2) or found.group(4) or _signal_name(int(number))
    return f"a training process died of signal {number} ({name})"


_WORKER = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: ([A-Za-z ]+)")


def _worker(line: str) -> str | None:
    found = _WORKER.search(line)
    return None if found is None else f"DataLoader worker (pid {found.group(1)}) killed by signal: {found.group(2)}"


_TEARDOWN_SIGNALS = r"(?:15|2|1|6)"
_TEARDOWN_NAMES = r"SIG(?:TERM|INT|HUP|ABRT)"

SIGNATURES = (
    Signature(
        id="dataloader_shm",
        tag=KILLED,
        pattern=r"is killed by signal: Bus error|Unexpected bus error encountered in worker",
        hints=("Bus error", "bus error"),
        severity="critical",
        what="DataLoader worker killed by a bus error: out of shared memory (/dev/shm)",
        remedy=SHM_REMEDY,
        source=Source(
            "pytorch/pytorch",
            "torch/csrc/DataLoader.cpp",
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
            "(shm).",
        ),
        samples=(
            Sample(
                "RuntimeError: DataLoader worker (pid 8911) is killed by signal: Bus error. It is possible that "
                "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
                None,
                "torch 2.13.0 here: a worker sent itself SIGBUS",
            ),
            Sample(
                "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory "
                "(shm).",
                None,
                "torch 2.13.0 here: a worker sent itself SIGBUS",
            ),
        ),
    ),
    Signature(
        id="dataloader_killed",
        tag=KILLED,
        pattern=r"DataLoader worker \(pid \d+\) is killed by signal",
        hints=("DataLoader worker",),
        severity="critical",
        what="a DataLoader worker was killed",
        remedy=SIGKILL_REMEDY,
        source=Source("pytorch/pytorch", "torch/csrc/DataLoader.cpp", ") is killed by signal: "),
        describe=_worker,
        samples=(
            Sample(
                "RuntimeError: DataLoader worker (pid 8904) is killed by signal: Killed.",
                "DataLoader worker (pid 8904) killed by signal: Killed",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="dataloader_exited",
        tag=KILLED,
        pattern=r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly",
        hints=("DataLoader worker",),
        severity="critical",
        what="a DataLoader worker exited unexpectedly (killed, most often by the out-of-memory killer)",
        remedy=SIGKILL_REMEDY + "; rerun with num_workers=0 to see the worker's own error",
        source=Source(
            "pytorch/pytorch",
            "torch/utils/data/dataloader.py",
            "DataLoader worker (pid(s) {pids_str}) exited unexpectedly",
        ),
        samples=(
            Sample(
                "RuntimeError: DataLoader worker (pid(s) 8904) exited unexpectedly",
                None,
                "torch 2.13.0 here: a worker sent itself SIGKILL",
            ),
        ),
    ),
    Signature(
        id="augmenter_abort",
        tag=KILLED,
        # batchgenerators up to 0.24 (what nnU-Net v1 ran with): results_loop's message (0.24), and
        # __get_next_item's "MultiThreadedAugmenter.abort_event was set, something went wrong. Maybe one of your
        # workers crashed." (0.20 to 0.24); 0.25 on says `augmenter_workers_dead`'s words instead
        pattern=r"Abort event was set\. So someone died|MultiThreadedAugmenter\.abort_event was set",
        hints=("Abort event was set", "abort_event was set"),
        severity="critical",
        what="a data loader worker died (batchgenerators' MultiThreadedAugmenter; its own error is further up)",
        remedy=AUGMENTER_REMEDY,
        source=Source(
            "MIC-DKFZ/batchgenerators",
            BATCHGENERATORS_MTA,
            "Abort event was set. So someone died and we should end this madness. ",
        ),
        samples=(
            Sample(
                '    raise RuntimeError("Abort event was set. So someone died and we should end this madness. '
                '\\nIMPORTANT: "',
                None,
                "tests/data/real/nnunet_v1_batchgenerators_worker_died_abort.log line 16, the traceback's last frame "
                "(https://github.com/MIC-DKFZ/nnUNet/issues/938)",
            ),
            Sample(
                "RuntimeError: Abort event was set. So someone died and we should end this madness. ",
                None,
                "https://github.com/MIC-DKFZ/batchgenerators/issues/91",
            ),
            Sample(
                "RuntimeError: MultiThreadedAugmenter.abort_event was set, something went wrong. Maybe one of your "
                "workers crashed. This is not the actual error message! Look further up your stdout to see what "
                "caused the error. Please also check whether your RAM was full",
                None,
                "https://github.com/MIC-DKFZ/nnUNet/issues/363 (its title, cut off after `what caused`; the rest from "
                "the format string in the same file)",
            ),
        ),
    ),
    Signature(
        id="augmenter_workers_dead",
        tag=KILLED,
        pattern=r"One or more background workers are no longer alive",
        hints=("background workers are no longer alive",),
        severity="critical",
        what="a data loader worker died (batchgenerators' MultiThreadedAugmenter; its own error is further up)",
        remedy=AUGMENTER_REMEDY,
        source=Source(
            "MIC-DKFZ/batchgenerators",
            BATCHGENERATORS_MTA,
            "One or more background workers are no longer alive. Exiting. Please check the print statements above "
            "for the actual error message",
        ),
        samples=(
            Sample(
                "RuntimeError: One or more background workers are no longer alive. Exiting. Please check the print "
                "statements above for the actual error message",
                None,
                "https://github.com/MIC-DKFZ/nnUNet/issues/2712 (batchgenerators 0.25 on, as nnU-Net v2 runs it)",
            ),
        ),
    ),
    Signature(
        id="segfault",
        tag=KILLED,
        pattern=r"Segmentation fault|segmentation fault encountered in worker",
        hints=("Segmentation fault", "segmentation fault"),
        severity="critical",
        what="segmentation fault (a native crash)",
        remedy=NATIVE_REMEDY,
        source=GLIBC_SIGNALS,
        samples=(
            Sample(
                "Fatal Python error: Segmentation fault", None, "python 3.11 -X faulthandler here (ctypes.string_at(0))"
            ),
            Sample(
                "bash: line 1:  8919 Segmentation fault      /work/fw-venv/bin/python segv.py",
                None,
                "bash here, a python that read address 0",
            ),
        ),
    ),
    Signature(
        id="bus_error",
        tag=KILLED,
        pattern=r"\bBus error(?: \(core dumped\)|\s*$)|Fatal Python error: Bus error|\d+ Bus error\s",
        hints=("Bus error",),
        severity="critical",
        what="bus error (SIGBUS: often /dev/shm full, or a memory-mapped file truncated under the process)",
        remedy=SHM_REMEDY + "; if files are memory-mapped, check that nothing truncates them",
        source=Source("bminor/glibc", "sysdeps/generic/siglist.h", "Bus error"),
        samples=(Sample("bash: line 1:  8920 Bus error               python train.py", None, "bash here (kill -BUS)"),),
    ),
    Signature(
        id="illegal_instruction",
        tag=KILLED,
        pattern=r"\bIllegal instruction(?: \(core dumped\)|\s*$)|Fatal Python error: Illegal instruction"
        r"|\d+ Illegal instruction\s",
        hints=("Illegal instruction",),
        severity="critical",
        what="illegal instruction (SIGILL: a binary built for a newer CPU, such as AVX-512 wheels on an older host)",
        remedy="install builds for this CPU (a wheel without AVX-512/AVX2 requirements) or run on the CPU it was built "
        "for",
        source=Source("bminor/glibc", "sysdeps/generic/siglist.h", "Illegal instruction"),
        samples=(
            Sample("bash: line 1:  8921 Illegal instruction     python train.py", None, "bash here (kill -ILL)"),
            Sample("Illegal instruction (core dumped)", None, FORMAT),
        ),
        not_samples=("NVRM: Xid (PCI:000f:01:00): 13, Graphics SM Warp Exception: Illegal Instruction Parameter",),
    ),
    Signature(
        id="oom_killer",
        tag=KILLED,
        pattern=r"^\s*Killed\s*$|\bKilled process\b",
        hints=("Killed",),
        severity="critical",
        what="killed (SIGKILL), most often by the kernel's out-of-memory killer",
        remedy=SIGKILL_REMEDY,
        source=Source("torvalds/linux", "mm/oom_kill.c", "Out of memory: Killed process %d (%s)"),
        samples=(
            Sample("Killed", None, "bash, a job killed by SIGKILL"),
            Sample(
                "[12345.678901] Out of memory: Killed process 4242 (python) total-vm:98765432kB, anon-rss:87654321kB",
                None,
                FORMAT,
            ),
        ),
        not_samples=("Killed 3 stale workers",),
    ),
    Signature(
        id="signal_teardown",
        tag=KILLED,
        pattern=rf"Signal {_TEARDOWN_SIGNALS} \({_TEARDOWN_NAMES}\) received by PID"
        rf"|exitcode\s*:\s*-{_TEARDOWN_SIGNALS}\b"
        rf"|died with <Signals\.{_TEARDOWN_NAMES}",
        hints=("Signal ", "exitcode", "died with"),
        severity="critical",
        what="a training process was terminated (SIGTERM/SIGINT/SIGABRT)",
        remedy="something ended the job: torchrun after another rank failed (read the first fault above), the "
        "scheduler (time limit, preemption) or a person; SIGABRT follows a NCCL watchdog timeout or a C++ abort",
        source=Source("pytorch/pytorch", ELASTIC_ERRORS, " received by PID "),
        describe=_killed,
        stage=TEARDOWN,
        samples=(
            Sample(
                "  traceback : Signal 15 (SIGTERM) received by PID 8800",
                "a training process died of signal 15 (SIGTERM)",
                "torch 2.13.0 here (tests/conformance/frameworks/ddp.py runs it)",
            ),
            Sample(
                "  exitcode  : -15 (pid: 8800)  (SIGTERM)",
                "a training process died of signal 15 (SIGTERM)",
                "torch 2.13.0 here (tests/conformance/frameworks/ddp.py runs it)",
            ),
        ),
    ),
    Signature(
        id="signal_report",
        tag=KILLED,
        pattern=r"exitcode\s*:\s*-\d+|Signal \d+ \(SIG[A-Z]+\) received|died with <Signals\.SIG",
        hints=("Signal ", "exitcode", "died with"),
        severity="critical",
        what="a training process died of a signal",
        remedy=SIGKILL_REMEDY + "; a SIGSEGV points at a native extension or the driver",
        source=Source("pytorch/pytorch", ELASTIC_ERRORS, " received by PID "),
        describe=_killed,
        samples=(
            Sample(
                "  traceback : Signal 9 (SIGKILL) received by PID 14750",
                "a training process died of signal 9 (SIGKILL)",
                "https://github.com/lzhxmu/CPPO/issues/6",
            ),
            Sample(
                "  exitcode  : -11 (pid: 5277)",
                "a training process died of signal 11 (SIGSEGV)",
                "https://github.com/pytorch/pytorch/pull/175254",
            ),
            Sample(
                "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
                "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
                "a training process died of signal 9 (SIGKILL)",
                "https://github.com/lmzpai/roboMamba/issues/10",
            ),
        ),
        not_samples=(
            "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 899505 closing signal SIGTERM",
        ),
    ),
    Signature(
        id="disk_full",
        tag=DISK_FULL,
        pattern=r"No space left on device|\bENOSPC\b",
        hints=("No space left", "ENOSPC"),
        severity="critical",
        what="disk full (No space left on device)",
        remedy="free space on the disk the run writes to (old checkpoints, caches), keep fewer checkpoints "
        "(save_total_limit), or point the output directory at a larger disk; then resume from the last checkpoint "
        "that was written whole",
        source=Source("torvalds/linux", "include/uapi/asm-generic/errno-base.h", "No space left on device"),
        context=SAVE_CONTEXT,
        samples=(
            Sample(
                "OSError: [Errno 28] No space left on device",
                None,
                "torch 2.13.0 here: torch.save to an open /dev/full",
            ),
        ),
    ),
    Signature(
        id="disk_quota",
        tag=DISK_FULL,
        pattern=r"Disk quota exceeded|\bEDQUOT\b",
        hints=("quota exceeded", "EDQUOT"),
        severity="critical",
        what="disk quota exceeded",
        remedy="free space within the quota (old checkpoints, caches) or ask for a larger quota; keep fewer "
        "checkpoints (save_total_limit); then resume from the last checkpoint that was written whole",
        source=Source("bminor/glibc", "sysdeps/gnu/errlist.h", "Disk quota exceeded"),
        context=SAVE_CONTEXT,
        samples=(Sample("OSError: [Errno 122] Disk quota exceeded", None, FORMAT),),
    ),
    Signature(
        id="torch_save_failed",
        tag=DISK_FULL,
        # a small state dict is buffered whole: the failed write surfaces at the zip's end, from the C++ stream
        pattern=r"PytorchStreamWriter failed writing file|inline_container\.cc:\d+\] \. unexpected pos"
        r"|RuntimeError: basic_ios::clear: iostream error",
        hints=("PytorchStreamWriter", "unexpected pos", "basic_ios::clear"),
        severity="critical",
        what="torch.save could not write the checkpoint (the disk is most likely full or over its quota)",
        remedy="check the free space and quota of the checkpoint directory (df -h, quota -s); free space or save "
        "elsewhere, then resume from the last checkpoint that was written whole",
        source=Source(
            "pytorch/pytorch", "caffe2/serialize/inline_container.cc", "PytorchStreamWriter failed writing file "
        ),
        samples=(
            Sample(
                "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
                None,
                "torch 2.13.0 here: torch.save(obj, '/dev/full')",
            ),
            Sample(
                "RuntimeError: basic_ios::clear: iostream error",
                None,
                "torch 2.13.0 here: torch.save(model.state_dict(), '/dev/full') of a small model "
                "(tests/conformance/frameworks/faults.py disk_full)",
            ),
            Sample(
                "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file "
                "data/2: file write failed",
                None,
                FORMAT,
            ),
        ),
    ),
)
