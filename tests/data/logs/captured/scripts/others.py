"""xgboost, lightgbm and keras on a synthetic binary task: python others.py xgb|lgb|keras [verbose]."""

import os
import sys

import numpy as np

which = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 4))
y = (X[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(int)
if which == "xgb":
    import xgboost as xgb

    d = xgb.DMatrix(X[:150], label=y[:150])
    e = xgb.DMatrix(X[150:], label=y[150:])
    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"]}
    xgb.train(params, d, 5, evals=[(d, "train"), (e, "eval")])
elif which == "lgb":
    import lightgbm as lgb

    d = lgb.Dataset(X[:150], label=y[:150])
    e = lgb.Dataset(X[150:], label=y[150:], reference=d)
    params = {"objective": "binary", "metric": ["binary_logloss", "auc"], "verbose": -1}
    lgb.train(params, d, 5, valid_sets=[e], callbacks=[lgb.log_evaluation(1)])
elif which == "keras":
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras

    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    m.compile(optimizer="sgd", loss="binary_crossentropy", metrics=["accuracy"])
    m.fit(X[:150], y[:150], validation_data=(X[150:], y[150:]), epochs=3, batch_size=32, verbose=int(sys.argv[2]))
