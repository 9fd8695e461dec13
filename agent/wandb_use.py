"""Whether a run uses W&B: only a run that does is expected to have W&B metrics (pure).

A run uses W&B when its watch says so (`wandb: 1`) or names where its W&B lives (`wandb_dir`,
`wandb_run_dir`, `wandb_path`), when a W&B run directory of it was found, or when one of its
processes has a `WANDB_*` variable in its environment (the names only: a value is never read into
an event). `wandb: 0` (`trainwarden launch --no-wandb`, `wandb: false` in the settings) says it
does not, whatever else is seen.

A run that does not use W&B takes its metrics from its log: the arbiter announces `log`, not
`log_fallback` (there is nothing to fall back from), so the W&B rules never fire for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainwarden.agent.watch import RunWatch

ENV_PREFIX = "WANDB_"
NAMED = ("wandb_run_dir", "wandb_dir", "wandb_path")  # watch fields that say where the run's W&B lives
TURNED_OFF = "W&B is turned off for this run (launch --no-wandb, or wandb: false in its watch)"
NO_SIGN = (
    "this run does not use W&B (no WANDB_* variable in its environment, no W&B run directory, no wandb "
    "settings in its watch); its metrics come from the log"
)


@dataclass(frozen=True, slots=True)
class WandbUse:
    uses: bool | None  # None: not known yet (its processes' environment is still to be read)
    why: str


def wandb_variables(env: Mapping[str, str]) -> list[str]:
    """The names of the W&B variables in a process environment (never their values)."""
    return sorted(name for name in env if name.startswith(ENV_PREFIX))


def wandb_use(watch: RunWatch, *, run_dir_found: bool, env_names: Sequence[str], env_read: bool) -> WandbUse:
    if watch.wandb is not None:
        return (
            WandbUse(True, "its launch or watch says it uses W&B (wandb: 1)")
            if watch.wandb
            else WandbUse(False, TURNED_OFF)
        )
    named = next((name for name in NAMED if getattr(watch, name)), None)
    if named is not None:
        return WandbUse(True, f"its watch names its {named}")
    if run_dir_found:
        return WandbUse(True, "a W&B run directory of it was found")
    if env_names:
        shown = ", ".join(env_names[:3]) + (" ..." if len(env_names) > 3 else "")
        return WandbUse(True, f"its processes have {shown} in their environment")
    return WandbUse(False, NO_SIGN) if env_read else WandbUse(None, "")
