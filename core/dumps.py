"""A process dump's words, shared by who takes it (agent/stacks.py) and who says it (the bot, the reports). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# verdicts
HANG = "hang"  # alive, no CPU burnt, no GPU work: waiting for something that does not come
SLOW = "slow"  # burning CPU (or the GPU): a slow phase, not a hang
UNKNOWN = "unknown"  # nothing measured says which
# where a thread waits
COLLECTIVE = "collective"
DATALOADER = "dataloader"
LOCK = "lock"
IO = "io"
OTHER = "other"


def stuck_text(d: Mapping[str, Any]) -> str:
    """Where a dump found the run, in a few words (the evidence report, `trainwarden check`, `replay`):
    `stuck in `torch.distributed.all_reduce` (rank 0, pid 123; all_reduce, distributed_c10d.py:3252): a hang`."""
    who = "; ".join(x for x in (", ".join(y for y in (f"rank {d['rank']}" if d.get("rank") is not None else "",
                                                         f"pid {d['pid']}" if d.get("pid") else "") if y),
                                 d.get("place") or "") if x)  # fmt: skip
    at = f"`{d['where']}`" if d.get("where") else "an unknown place"
    if d.get("verdict") == SLOW:
        at = f"the DataLoader ({at})" if d.get("category") == DATALOADER else at
        said = "busy in " + at + (f" ({who})" if who else "") + ": a slow phase"
        return said + (" (data loading), not a hang" if d.get("category") == DATALOADER else ", not a hang")
    verdict = "a hang" if d.get("verdict") == HANG else "hang or slow phase unknown"
    return f"stuck in {at}" + (f" ({who})" if who else "") + f": {verdict}"
