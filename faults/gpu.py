"""The GPU itself failing: CUDA runtime errors a kernel raises (illegal address, device-side assert, launch
failure), uncorrectable ECC errors, and the driver's `NVRM: Xid` kernel lines. Tags `illegal_memory`,
`cuda_error`, `ecc`, `xid`."""

from __future__ import annotations

import re

from trainwarden.faults.model import CAUSE, FORMAT, TEARDOWN, Sample, Signature, Source

ILLEGAL_MEMORY, CUDA_ERROR, ECC, XID = "illegal_memory", "cuda_error", "ecc", "xid"
KERNEL_REMEDY = (
    "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; check custom CUDA ops, index ranges and the driver/CUDA "
    "versions"
)
HARDWARE_REMEDY = (
    "the GPU is faulty: take the node out of the pool (drain it), check `nvidia-smi -q -d ECC,ROW_REMAPPER` and dmesg, "
    "reset the GPU or reboot, and restart the run from its last checkpoint on healthy hardware"
)
# CUDA runtime error strings are cudaGetErrorString's; PyTorch prefixes them (c10/cuda/CUDAException.cpp)
# the driver prints these to the kernel log; NVIDIA documents the line and each code (no public source has it)
XID_DOC = Source("docs.nvidia.com", "deploy/xid-errors/index.html", "NVRM: Xid")
TORCH_CUDA = Source("pytorch/pytorch", "c10/cuda/CUDAException.cpp", "CUDA error: ")

# NVIDIA's XID catalogue: code -> (severity, meaning). `critical`: the GPU or the job on it is very likely
# broken (fell off the bus, uncorrectable ECC, the GPU stopped processing); `error`: the job on it probably
# crashed; `warning`: worth a look. Read by the NVML path (agent/xid.py) and the `NVRM: Xid` lines here.
XID_MEANINGS: dict[int, tuple[str, str]] = {
    8: ("error", "GPU stopped processing (timeout)"),
    13: ("error", "Graphics engine exception (often an out-of-range memory access in a kernel)"),
    31: ("error", "GPU memory page fault (illegal memory access by a kernel)"),
    32: ("error", "Invalid or corrupted push buffer stream"),
    38: ("error", "Driver firmware error"),
    43: ("error", "GPU stopped processing: a kernel hit a fault and the context was reset"),
    45: ("warning", "Preemptive cleanup: a process was killed or ended while the GPU had work"),
    48: ("critical", "Double-bit ECC error (uncorrectable memory error)"),
    61: ("error", "Internal micro-controller breakpoint/warning"),
    62: ("critical", "Internal micro-controller halt"),
    63: ("warning", "ECC page retirement or row remapping recorded"),
    64: ("critical", "ECC page retirement or row remapping failure"),
    68: ("error", "NVDEC0 exception (video decoder)"),
    69: ("error", "Graphics engine class error"),
    74: ("critical", "NVLink error"),
    79: ("critical", "GPU has fallen off the bus"),
    92: ("warning", "High single-bit ECC error rate"),
    94: ("error", "Contained ECC error (the affected application must restart)"),
    95: ("critical", "Uncontained ECC error (all applications on the GPU are affected; reset the GPU)"),
    109: ("error", "Context switch timeout"),
    119: ("critical", "GSP RPC timeout"),
    120: ("critical", "GSP error"),
    121: ("error", "C2C (chip-to-chip) link error"),
    140: ("critical", "Unrecovered ECC error"),
    154: ("critical", "GPU recovery action changed: the GPU needs a reset or a reboot"),
}


def xid_meaning(code: int) -> tuple[str, str]:
    """(severity, meaning) of an XID code; unknown codes are errors with a pointer to the catalogue."""
    return XID_MEANINGS.get(code, ("error", f"XID {code}: see NVIDIA's XID catalogue"))


_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+)")


def _xid(line: str) -> str | None:
    found = _XID.search(line)
    if found is None:
        return None
    severity, meaning = xid_meaning(int(found.group(2)))
    return f"GPU Xid {found.group(2)} on PCI {found.group(1)}: {meaning} ({severity})"


def _assert(line: str) -> str | None:
    found = re.search(r"Assertion `([^`]{1,120})` failed", line)
    return None if found is None else f"a CUDA kernel's assert failed: `{found.group(1)}`"


_SOFT_XIDS = "|".join(str(code) for code, (severity, _) in XID_MEANINGS.items() if severity == "warning")

SIGNATURES = (
    Signature(
        id="ecc_uncorrectable",
        tag=ECC,
        pattern=r"uncorrectable ECC error encountered|ECC_UNCORRECTABLE",
        hints=("uncorrectable ECC", "ECC_UNCORRECTABLE"),
        severity="critical",
        what="uncorrectable ECC error on the GPU (a hardware memory fault)",
        remedy=HARDWARE_REMEDY,
        source=TORCH_CUDA,
        samples=(
            Sample(
                "RuntimeError: CUDA error: uncorrectable ECC error encountered",
                None,
                "https://github.com/huggingface/accelerate/issues/1192",
            ),
            Sample(
                "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
                "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
                None,
                "https://github.com/NVIDIA/semantic-segmentation/issues/33",
            ),
        ),
    ),
    Signature(
        id="nvrm_xid_teardown",
        tag=XID,
        pattern=rf"NVRM: Xid \([^)]*\): (?:{_SOFT_XIDS})\b",
        hints=("NVRM: Xid",),
        severity="warning",
        what="GPU Xid (warning)",
        remedy="an Xid of this kind follows a process that was killed while the GPU had work; read the fault before it",
        source=XID_DOC,
        describe=_xid,
        stage=TEARDOWN,
        samples=(
            Sample(
                "[ 9135.410131] NVRM: Xid (PCI:0000:3b:00): 45, pid=23421, name=python, Ch 00000010",
                "GPU Xid 45 on PCI 0000:3b:00: Preemptive cleanup: a process was killed or ended while the GPU had "
                "work (warning)",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="nvrm_xid",
        tag=XID,
        pattern=r"NVRM: Xid \(",
        hints=("NVRM: Xid",),
        severity="critical",
        what="GPU Xid error",
        remedy=HARDWARE_REMEDY + " (Xid 13, 31, 43: a kernel's own fault, see " + "CUDA_LAUNCH_BLOCKING=1)",
        source=XID_DOC,
        describe=_xid,
        stage=CAUSE,
        samples=(
            Sample(
                "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
                "GPU Xid 79 on PCI 0000:44:00: GPU has fallen off the bus (critical)",
                "https://github.com/NVIDIA/NVSentinel/issues/155",
            ),
            Sample(
                "[Tue Mar  5 10:11:12 2024] NVRM: Xid (PCI:0000:b3:00): 48, pid=1234, name=python, DBE (double bit "
                "error) ECC error.",
                "GPU Xid 48 on PCI 0000:b3:00: Double-bit ECC error (uncorrectable memory error) (critical)",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="gpu_fallen_off_bus",
        tag=XID,
        pattern=r"fallen off the bus",
        hints=("fallen off the bus",),
        severity="critical",
        what="the GPU has fallen off the bus (Xid 79)",
        remedy=HARDWARE_REMEDY + "; check its power, cooling and seating",
        source=XID_DOC,
        samples=(
            Sample(
                "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0 NVRM: (PCI ID: 10de:26b5) installed in this system "
                "has NVRM: fallen off the bus and is not responding to commands.",
                None,
                "https://github.com/NVIDIA/NVSentinel/issues/155 (a multi-line kernel message, joined)",
            ),
        ),
    ),
    Signature(
        id="illegal_address",
        tag=ILLEGAL_MEMORY,
        pattern=r"an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA error: misaligned address",
        hints=("illegal memory", "IllegalAddress", "misaligned address"),
        severity="critical",
        what="CUDA illegal memory access (a kernel read or wrote outside its memory)",
        remedy=KERNEL_REMEDY,
        source=TORCH_CUDA,
        samples=(
            Sample(
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                None,
                "https://github.com/bubbliiiing/yolo3-pytorch/issues/83",
            ),
            Sample(
                "RuntimeError: merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access "
                "was encountered",
                None,
                "https://github.com/skhu101/GauHuman/issues/21",
            ),
        ),
    ),
    Signature(
        id="device_assert",
        tag=CUDA_ERROR,
        pattern=r"device-side assert triggered|cudaErrorAssert|Assertion `[^`]*` failed\.",
        hints=("device-side assert", "cudaErrorAssert", "Assertion `"),
        severity="critical",
        what="a CUDA kernel's assert failed (device-side assert: most often an index out of range, such as a label "
        ">= num_classes or a token id >= the embedding size)",
        remedy="check the labels against num_classes and the token ids against the vocabulary; rerun on CPU or with "
        "CUDA_LAUNCH_BLOCKING=1 to see the failing op",
        source=TORCH_CUDA,
        describe=_assert,
        samples=(
            Sample("RuntimeError: CUDA error: device-side assert triggered", None, FORMAT),
            Sample(
                "/pytorch/aten/src/ATen/native/cuda/Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: "
                "block: [0,0,0],"
                " thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
                "a CUDA kernel's assert failed: `t >= 0 && t < n_classes`",
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="launch_failure",
        tag=CUDA_ERROR,
        pattern=r"unspecified launch failure|cudaErrorLaunchFailure",
        hints=("launch failure", "LaunchFailure"),
        severity="critical",
        what="a CUDA kernel crashed (unspecified launch failure)",
        remedy=KERNEL_REMEDY + "; if it recurs on one GPU only, suspect the hardware (see its Xid in dmesg)",
        source=TORCH_CUDA,
        samples=(Sample("RuntimeError: CUDA error: unspecified launch failure", None, FORMAT),),
    ),
)
