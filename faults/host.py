"""The host taking a process down: the kernel's OOM killer when the host ran out of memory, the shell's `Killed`, a
segfault, a bus error, an illegal instruction, and data loader workers killed or dead (PyTorch's DataLoader,
batchgenerators' MultiThreadedAugmenter). Tag `killed` (faults/signals.py: the launchers' reports of a signal).
A SIGKILL is said as what it most likely is: the host out of memory."""

from __future__ import annotations

import re

from trainwarden.faults.model import FORMAT, Sample, Signature, Source

KILLED = "killed"
# A host OOM kill is said with the words "out of memory": that is what a person greps for ("out-of-memory killer"
# is not found by it).
SIGKILL_WORDS = ": most likely the host ran out of memory (the kernel's OOM killer)"
SIGKILL_REMEDY = (
    "a SIGKILL is most often the host out of memory: the kernel's OOM killer ends the largest process (check dmesg "
    "for `Out of memory: Killed process`); use fewer DataLoader workers or less host RAM per process"
)
NATIVE_REMEDY = (
    "a native crash: check native extensions (custom CUDA/C++ ops, a library built for another CPU or torch), the "
    "driver, and run once with `python -X faulthandler` to see the Python frame"
)
AUGMENTER_REMEDY = (
    "a batchgenerators (nnU-Net) data-augmentation worker died: its own error is printed further up the log "
    "(`Exception in background worker`); if there is none, it was most likely killed because the host ran "
    "out of memory (the kernel's OOM killer, check dmesg): use fewer workers (nnUNet_n_proc_DA) or a machine with "
    "more RAM"
)
BATCHGENERATORS_MTA = "batchgenerators/dataloading/multi_threaded_augmenter.py"
SHM_REMEDY = (
    "the DataLoader workers ran out of shared memory (/dev/shm): raise it (docker --shm-size=16g, or --ipc=host), "
    "or lower num_workers"
)
GLIBC_SIGNALS = Source("bminor/glibc", "sysdeps/generic/siglist.h", "Segmentation fault")


def _oom_killed(line: str) -> str | None:
    """The kernel's own line says it: `the host ran out of memory: the kernel killed process 4242 (python)`."""
    found = re.search(r"Out of memory: Killed process (\d+) \(([^)]*)\)", line)
    return (
        None
        if found is None
        else f"the host ran out of memory: the kernel killed process {found.group(1)} ({found.group(2)})"
    )


_WORKER = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: ([A-Za-z ]+)")


def _worker(line: str) -> str | None:
    found = _WORKER.search(line)
    return None if found is None else f"DataLoader worker (pid {found.group(1)}) killed by signal: {found.group(2)}"


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
        what="a DataLoader worker exited unexpectedly (killed, most often because the host ran out of memory)",
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
        pattern=r"\bKilled process\b",
        hints=("Killed",),
        severity="critical",
        what="the host ran out of memory: the kernel's OOM killer killed a process",
        remedy=SIGKILL_REMEDY,
        source=Source("torvalds/linux", "mm/oom_kill.c", "Out of memory: Killed process %d (%s)"),
        describe=_oom_killed,
        samples=(
            Sample(
                "[12345.678901] Out of memory: Killed process 4242 (python) total-vm:98765432kB, anon-rss:87654321kB",
                "the host ran out of memory: the kernel killed process 4242 (python)",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="shell_killed",
        tag=KILLED,
        # the shell's report of a child killed by SIGKILL (strsignal: `Killed`): alone on its line (also as people
        # paste it, in markdown: `**Killed**`, `> Killed`), after a progress bar the kill cut short, or in the
        # shell's job status (`./train.sh: line 1:  7364 Killed   python3 train.py`, `[1]+  Killed   python ...`)
        pattern=r"^[\s>*_`]*Killed[\s*_`.]*$|\]Killed\s*$|\bline \d+:\s+\d+ Killed\b|^\[\d+\][+-]?\s+Killed\b",
        hints=("Killed",),
        severity="critical",
        what="killed (SIGKILL)" + SIGKILL_WORDS,
        remedy=SIGKILL_REMEDY,
        source=Source("bminor/glibc", "sysdeps/generic/siglist.h", "Killed"),
        samples=(
            Sample("Killed", None, "https://github.com/xk-huang/yet-another-vectornet/issues/37 (after a tqdm bar)"),
            Sample("**Killed**", None, "https://github.com/CharlesShang/FastMaskRCNN/issues/172 (pasted in markdown)"),
            Sample(
                "./train.sh: line 1:  7364 Killed                  python3 train_Donly.py --name=D0 --warpN=0 "
                "--pertFG=0.2",
                None,
                "https://github.com/chenhsuanlin/spatial-transformer-GAN/issues/35",
            ),
            Sample(
                '[1]+  Killed                  python3 -c "import time; time.sleep(30)"',
                None,
                "bash 5 here: interactive job control's status of a background job killed with kill -9",
            ),
            Sample(
                "2020-11-24 20:22:28.106 /bin/bash: line 27: 318 Killed sh start.sh",
                None,
                "https://github.com/divamgupta/deep-clustering-kingdra/issues/2",
            ),
            Sample(
                " 31%|█████▉             | 331/1063 [01:06<03:59,  3.06it/s]Killed",
                None,
                "https://github.com/InternLandMark/LandMark/issues/65 (the bar's fill shortened)",
            ),
        ),
        not_samples=(
            "Killed 3 stale workers",
            "[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266",
        ),
    ),
)
