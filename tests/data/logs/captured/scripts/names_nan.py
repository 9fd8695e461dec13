"""Two real writers of a NaN loss under a name of their own: python names_nan.py kohya|csvlogger OUT_DIR.

kohya: sd-scripts' bar (train_network.py): `tqdm(range(max_train_steps), smoothing=0, desc="steps")`, and each
step `progress_bar.set_postfix(avr_loss=...)`, the mean of the epoch's losses so far (its LossRecorder), on a torch
regression whose loss turns NaN at step 6 (a NaN input batch): the mean stays NaN to the epoch's end.
csvlogger: Keras 3 `CSVLogger("training.log")` (the callback documentation's own file name), a `fit` whose
batches turn NaN in its third epoch.
"""

import os
import sys

import numpy as np

which, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
X = rng.normal(size=(320, 4)).astype("float32")
y = (X @ np.array([1.0, -2.0, 0.5, 0.0], dtype="float32") + 0.1 * rng.normal(size=320)).astype("float32")
if which == "kohya":
    import torch
    from tqdm import tqdm

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    xs, ys = torch.from_numpy(X), torch.from_numpy(y)
    xs[5 * 32 : 6 * 32] = float("nan")  # the 6th batch
    steps = 10
    progress_bar = tqdm(range(steps), smoothing=0, desc="steps")
    losses: list[float] = []
    for step in range(steps):
        xb, yb = xs[step * 32 : (step + 1) * 32], ys[step * 32 : (step + 1) * 32]
        loss = torch.nn.functional.mse_loss(model(xb).squeeze(1), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        progress_bar.update(1)
        losses.append(loss.detach().item())
        progress_bar.set_postfix(avr_loss=sum(losses) / len(losses))
elif which == "csvlogger":
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    keras.utils.set_random_seed(0)
    X[2 * 64 + 10 :] = np.nan  # from the third epoch on (64 rows an epoch)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    m.fit(
        X[:320],
        y[:320],
        epochs=5,
        batch_size=32,
        steps_per_epoch=2,
        shuffle=False,
        verbose=0,
        callbacks=[keras.callbacks.CSVLogger(os.path.join(out, "training.log"))],
    )
