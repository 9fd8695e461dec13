"""Asking the run's agent where a stalled run is stuck (a `dump` control message when a stall anomaly opens),
and filing its answer (`stacks.txt` in the run's evidence pack).

Only the agent on the run's host can reach its processes. The request names `reply_as`
(`dump/<run>/<stream id of the anomaly>`): the agent records one `process.dump` under that id, so a
request sent again (a job redone after a crash) records nothing twice. The worker does not wait for it:
the dump comes back through the run's log, where the bot and the evidence pack find it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from trainwarden.core.dumps import stuck_text
from trainwarden.core.redact import redact_text
from trainwarden.events.control import send_control
from trainwarden.events.envelope import Event
from trainwarden.events.packfiles import STACKS
from trainwarden.events.payloads import AnomalyOpenedData, ProcessDumpData
from trainwarden.policies.model import Policy
from trainwarden.remote import agent_stop

if TYPE_CHECKING:  # the evaluator imports this module: no worker context (rq, asyncssh) at import
    from trainwarden.workers.context import WorkerContext

log = logging.getLogger(__name__)


STALL_KIND = "stall"


def dump_producer(run: str, sid: str) -> str:
    return f"dump/{run}/{sid}"


def asks_dump(policy: Policy, opened: AnomalyOpenedData) -> bool:
    """Pure: whether this anomaly's rule is a stall (its kind `stall`), enforced or in shadow mode alike."""
    rule = next((r for r in policy.rules if r.id == opened.get("rule")), None)
    return rule is not None and rule.kind.kind == STALL_KIND


def last_step_at(anomaly: Event) -> float | None:
    """When the run's last step came: the anomaly's time less the silence its rule measured."""
    silent = cast(AnomalyOpenedData, anomaly.data).get("values", {}).get("silent_s")
    return anomaly.ts - float(silent) if isinstance(silent, int | float) and not isinstance(silent, bool) else None


def request_dump(ctx: WorkerContext, anomaly: Event, sid: str, *, host: str, now: float) -> None:
    """Send the dump request to `host`'s agent; only logged when no agent is there to take it."""
    problem = agent_stop.agent_absent(ctx.store, host, now=now)
    if problem is not None:
        log.warning("no stack dump of %s: %s", anomaly.run, problem)
        return
    since = last_step_at(anomaly)
    message = {"op": "dump", "run": anomaly.run, "anomaly": anomaly.id, "reply_as": dump_producer(anomaly.run, sid),
               "rule": str(cast(AnomalyOpenedData, anomaly.data).get("rule") or ""),
               "since": repr(since) if since is not None else ""}  # fmt: skip
    send_control(ctx.store.redis, ctx.store.keys, host, message, what="send the dump request to the run's agent",
                 run=anomaly.run)  # fmt: skip


def stacks_text(dump: Event) -> str:
    """`stacks.txt`: the summary, then the dump as the agent took it (secrets masked by the agent, and again)."""
    d = cast(ProcessDumpData, dump.data)
    gpus = ", ".join(f"GPU {g['gpu']}: {g.get('util')}% busy, {g.get('mem_used_mb')} of {g.get('mem_total_mb')} MB"
                     for g in d.get("gpus") or []) or "no GPU data (NVML absent or no GPU)"  # fmt: skip
    head = [
        f"# {dump.run}@{dump.host} at {datetime.fromtimestamp(dump.ts, UTC):%Y-%m-%dT%H:%M:%SZ} ({d.get('rule')}, "
        f"{d.get('method')}): {stuck_text(d)}",
        f"# CPU now {d.get('cpu_pct')}% (100 = one core); CPU since the last step "
        f"{d.get('cpu_s_since_step', 'unknown')} s; stalled {d.get('stalled_s', 'unknown')} s",
        f"# {gpus}",
        *(f"# not in that call: {a}" for a in d.get("absent") or []),
        *(f"# {e}" for e in d.get("errors") or []),
        "",
    ]
    return redact_text("\n".join(head) + str(d.get("text") or "") + "\n")


def add_stacks(pack: Path, dump: Event) -> None:
    """Write `stacks.txt` into a pack already written (a WAIT's stall after a STOP's pack); nothing when it is gone."""
    if not pack.is_dir():
        log.info("no pack at %s for the stacks of %s (moved or deleted)", pack, dump.run)
        return
    try:
        (pack / STACKS).write_text(stacks_text(dump))
    except OSError as exc:  # best effort: the stacks stay in the run's log (process.dump)
        log.warning("cannot write %s into %s: %s", STACKS, pack, exc)
