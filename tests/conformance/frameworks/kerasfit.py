"""Keras 3 on the torch backend, `model.fit(verbose=1)` with validation (argv: SCENARIO). One epoch is
EVAL_EVERY steps, so the `Epoch N/M` header and its fit line come every EVAL_EVERY steps. overfit: a wide
model on 48 samples with noisy labels for 40 epochs, its val_loss climbing far past its best."""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras
import numpy as np
from tiny import BAD_AT, EVAL_EVERY, PACE_S, STEPS, data, overfit_data, plan


class Pace(keras.callbacks.Callback):
    """The compute of a real model, and the scenario's poisoned step (NaN weights, or a spike batch)."""

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        time.sleep(PACE_S)


def overfit() -> None:
    keras.utils.set_random_seed(0)
    x, y = (a.numpy() for a in overfit_data())
    vx, vy = (a.numpy() for a in data(512, seed=1))
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(128, activation="relu"),
                              keras.layers.Dense(128, activation="relu"), keras.layers.Dense(2)])  # fmt: skip
    model.compile(optimizer=keras.optimizers.Adam(plan().lr),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])  # fmt: skip
    model.fit(x, y, batch_size=16, epochs=40, validation_data=(vx, vy), callbacks=[Pace()], verbose=1)


def main() -> None:
    if sys.argv[1] == "overfit":
        return overfit()
    p = plan()
    keras.utils.set_random_seed(0)
    x, y = (a.numpy() for a in data(STEPS * 32, identical=p.identical))
    vx, vy = (a.numpy() for a in data(256, seed=1))
    if p.nan_at:  # a poisoned batch: NaN inputs at the bad step make the loss and then the weights NaN
        x[(BAD_AT - 1) * 32 : BAD_AT * 32] = np.nan
    if p.spike_at:  # a batch of outliers: one high loss, clipped gradients, the run recovers
        x[(BAD_AT - 1) * 32 : BAD_AT * 32] *= 60
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(p.lr, clipnorm=1.0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])  # fmt: skip
    model.fit(x, y, batch_size=32, epochs=STEPS // EVAL_EVERY, steps_per_epoch=EVAL_EVERY, shuffle=False,
              validation_data=(vx, vy), callbacks=[Pace()], verbose=1)  # fmt: skip


if __name__ == "__main__":
    main()
