"""Hugging Face Trainer: `Trainer(..., callbacks=[TrainwardenCallback()])` (`pip install 'trainwarden[hf]'`).

Every time the Trainer logs (`logging_steps`, and after each evaluation), the `logs` dict it hands
its callbacks (`loss`, `grad_norm`, `learning_rate`, `epoch`, `eval_loss`, `eval_<metric>`, ...)
is written as one sidecar line with `state.global_step` as its step: the names and the step the
Trainer itself uses, not what its console line looked like. Only the main process writes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from trainwarden.sdk.integrations import bases
from trainwarden.sdk.log import writer

if TYPE_CHECKING:
    _Base = object
else:
    _Base = type("_Base", bases(("transformers", "TrainerCallback")), {})


class TrainwardenCallback(_Base):
    """A `transformers.TrainerCallback` writing each `on_log` dict to the sidecar file (`path`, else
    `$TRAINWARDEN_METRICS`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.metrics = writer(path)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs and state.is_world_process_zero:
            self.metrics.log(logs, step=state.global_step)
