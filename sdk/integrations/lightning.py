"""Lightning: `Trainer(..., callbacks=[TrainwardenCallback()])` (`lightning.pytorch` or `pytorch_lightning`).

What the module logs with `self.log(...)` reaches `trainer.callback_metrics`; this callback writes
it to the sidecar file with `trainer.global_step` as the step:

- after a training batch, every `trainer.log_every_n_steps` optimizer steps (Lightning's own
  logging cadence: reading a metric on the GPU waits for it, so not on every batch), the training
  metrics;
- at the end of each validation (not the sanity check), the metrics validation logged.

Validation metrics stay in `callback_metrics` until the next validation, so the names are told
apart: a name present at a training batch's end is training's, one that appears by the end of a
validation is validation's. A `val_loss` is written once per validation, never repeated at every
step. Only the global-zero process writes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from trainwarden.sdk.integrations import bases
from trainwarden.sdk.log import writer

if TYPE_CHECKING:
    _Base = object
else:  # both, where both are installed: each one's Trainer checks isinstance against its own Callback
    _Base = type("_Base", bases(("lightning.pytorch", "Callback"), ("pytorch_lightning", "Callback")), {})


class TrainwardenCallback(_Base):
    """A Lightning `Callback` writing `trainer.callback_metrics` to the sidecar file (`path`, else
    `$TRAINWARDEN_METRICS`)."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.metrics = writer(path)
        self.train_names: set[str] = set()
        self.eval_names: set[str] = set()
        self.last_step: int | None = None

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if not trainer.is_global_zero:
            return
        metrics = trainer.callback_metrics  # Lightning reads its results so at every batch end itself
        self.train_names.update(name for name in metrics if name not in self.eval_names)  # names only: no value read
        step = int(trainer.global_step)
        every = max(1, int(getattr(trainer, "log_every_n_steps", 1) or 1))
        if step == self.last_step or step % every:
            return  # another micro-batch of the same step, or not a logging step
        self.last_step = step
        self.metrics.log({name: metrics[name] for name in metrics if name in self.train_names}, step=step)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.is_global_zero or getattr(trainer, "sanity_checking", False):
            return
        values = {name: value for name, value in trainer.callback_metrics.items() if name not in self.train_names}
        self.eval_names.update(values)
        self.metrics.log(values, step=int(trainer.global_step))
