"""What an NVIDIA XID error code means (from NVIDIA's XID catalogue), and how bad it is.

`critical`: the GPU or the job on it is very likely broken (fell off the bus, uncorrectable ECC,
the GPU stopped processing); `error`: the job on it probably crashed; `warning`: worth a look.
"""

from __future__ import annotations

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


def describe(code: int) -> tuple[str, str]:
    """(severity, meaning) of an XID code; unknown codes are errors with a pointer to the catalogue."""
    return XID_MEANINGS.get(code, ("error", f"XID {code}: see NVIDIA's XID catalogue"))
