"""What an NVIDIA XID error code means (from NVIDIA's XID catalogue), and how bad it is.

The table is defined once with the `NVRM: Xid` log-line signatures (faults/gpu.py), so that an XID
read from NVML (agent/nvml.py) and one read from a kernel line in the log are said alike.
"""

from __future__ import annotations

from trainwarden.faults.gpu import XID_MEANINGS, xid_meaning

__all__ = ["XID_MEANINGS", "describe"]


def describe(code: int) -> tuple[str, str]:
    """(severity, meaning) of an XID code; unknown codes are errors with a pointer to the catalogue."""
    return xid_meaning(code)
