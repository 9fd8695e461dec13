"""A part of the run that stopped making progress and said so: a component whose heartbeat stopped (sample-factory's
runner). Tag `hang`. The NCCL heartbeat monitor's own hang is an NCCL fault (faults/distributed.py), in words that
say hang too.

A silent component is most often what the run sees of an earlier fault (a rollout worker that crashed or ran out
of memory), so it folds into a cause seen before it (stage COLLECTIVE); the runner stopping training for it
comes last (TEARDOWN)."""

from __future__ import annotations

import re

from trainwarden.core.durations import fmt_duration
from trainwarden.faults.model import COLLECTIVE, TEARDOWN, Sample, Signature, Source

HANG = "hang"
SF_RUNNER = "sample_factory/algo/runners/runner.py"
COMPONENT_REMEDY = (
    "a component of the run (a rollout or inference worker, the learner) stopped sending heartbeats: it crashed or "
    "hangs; read the log minutes before this line for its exception (an out of memory, an environment error), "
    "and if there is none, dump its stack (py-spy dump --pid) to see where it hangs"
)

_COMPONENT = re.compile(r"No heartbeat for components\s*:\s*(.+?)\s*$")
_SILENT = re.compile(r"([\w.-]+) \((\d+) seconds\)")


def _components(line: str) -> str | None:
    """`hang: no heartbeat from InferenceWorker_p0-w0 for 5m37s`, the longest-silent components first."""
    found = _COMPONENT.search(line)
    silent = [] if found is None else _SILENT.findall(found.group(1))
    if not silent:
        return None
    silent.sort(key=lambda item: -int(item[1]))
    shown = ", ".join(f"{name} for {fmt_duration(int(seconds))}" for name, seconds in silent[:3])
    more = f" and {len(silent) - 3} more" if len(silent) > 3 else ""
    return f"hang: no heartbeat from {shown}{more}"


SIGNATURES = (
    Signature(
        id="component_heartbeat",
        tag=HANG,
        pattern=r"No heartbeat for components\s*:",
        hints=("No heartbeat for components",),
        severity="critical",
        what="hang: a component of the run stopped sending heartbeats",
        remedy=COMPONENT_REMEDY,
        source=Source("alex-petrenko/sample-factory", SF_RUNNER, "No heartbeat for components: "),
        describe=_components,
        stage=COLLECTIVE,
        samples=(
            Sample(
                "[2023-09-18 21:35:46,519][196071] No heartbeat for components :InferenceWorker_p0-w0 (337 seconds)",
                "hang: no heartbeat from InferenceWorker_p0-w0 for 5m37s",
                "https://github.com/alex-petrenko/sample-factory/issues/285",
            ),
            Sample(
                "No heartbeat for components: RolloutWorker_w2 (552 seconds)",
                "hang: no heartbeat from RolloutWorker_w2 for 9m12s",
                "https://github.com/alex-petrenko/sample-factory/issues/316 (its title)",
            ),
        ),
        not_samples=("[2025-01-16 21:22:37,246][21824] Heartbeat connected on RolloutWorker_w0",),
    ),
    Signature(
        id="component_heartbeat_stop",
        tag=HANG,
        pattern=r"Stopping training due to lack of heartbeats from",
        hints=("lack of heartbeats",),
        severity="critical",
        what="hang: the runner stopped training, a component sent no heartbeat",
        remedy=COMPONENT_REMEDY,
        source=Source("alex-petrenko/sample-factory", SF_RUNNER, "Stopping training due to lack of heartbeats from "),
        stage=TEARDOWN,
        samples=(
            Sample(
                "[2023-09-18 21:35:46,519][196071] Stopping training due to lack of heartbeats from <class "
                "'sample_factory.algo.sampling.inference_worker.InferenceWorker‘>",
                None,
                "https://github.com/alex-petrenko/sample-factory/issues/285",
            ),
        ),
    ),
)
