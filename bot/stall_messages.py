"""What the bot says of a stalled run's process dump (`process.dump`, agent/dumper.py): one line in the run's
thread and on the console, saying where it is stuck and whether that is a hang or a slow phase. Pure."""

from __future__ import annotations

from typing import cast

from trainwarden.core.dumps import DATALOADER, HANG, SLOW
from trainwarden.events import payloads as p
from trainwarden.events.envelope import Event
from trainwarden.policies.durations import fmt_duration

NO_STACK = "no Python stack: install py-spy where the agent runs (`pip install 'trainwarden[debug]'`)"


def _pct(value: float | None, what: str) -> str | None:
    return None if value is None else f"{value:.0f}% {what}"


def process_dump(event: Event) -> str:
    """`STUCK exp01@gpu1 in `torch.distributed.all_reduce` (rank 0, pid 123), 0% GPU, 0% CPU for 6m: a hang ...`
    or `BUSY ... in the DataLoader (`_next_data`), 100% CPU: a slow phase (data loading), not a hang`."""
    d = cast(p.ProcessDumpData, event.data)
    run = f"{event.run}@{event.host}"
    who = ", ".join(x for x in (f"rank {d['rank']}" if d.get("rank") is not None else "",
                                f"pid {d['pid']}" if d.get("pid") else "") if x)  # fmt: skip
    at = f"`{d['where']}`" if d.get("where") else "an unknown place"
    at += f" ({who})" if who else ""
    numbers = ", ".join(x for x in (_pct(d.get("gpu_pct"), "GPU"), _pct(d.get("cpu_pct"), "CPU")) if x)
    stalled = d.get("stalled_s")
    numbers += f" for {fmt_duration(stalled)}" if stalled else ""
    verdict, rule = d.get("verdict"), d.get("rule") or "stall"
    if verdict == HANG:
        text = f"STUCK {run} in {at}, {numbers}: a hang (alive, doing no work)"
        if d.get("absent"):
            text += f"; not in that call: {', '.join(d['absent'])}"
    elif verdict == SLOW and d.get("category") == DATALOADER:
        text = f"BUSY {run} in the DataLoader (`{d.get('where')}`), {numbers}: a slow phase (data loading), not a hang"
    elif verdict == SLOW:
        text = f"BUSY {run} in {at}, {numbers}: a slow phase (it works), not a hang"
    else:
        text = f"DUMPED {run}: in {at}; hang or slow phase unknown (its processes could not be measured)"
    if d.get("method") != "py-spy":
        text += f" ({NO_STACK})"
    if d.get("place"):
        text += f". At {d['place']}"
    return f"{text} ({rule}; the stacks: `trainwarden check {event.run}`)."
