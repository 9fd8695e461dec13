"""xgboost, lightgbm and scikit-learn training verbosely (argv: SCENARIO LIBRARY): xgboost's
`[i]\ttrain-logloss:...\teval-logloss:...`, lightgbm's `[i]\tvalid_0's binary_logloss: ...`,
scikit-learn MLPClassifier's `Iteration i, loss = ...`. diverge: a learning rate far too high. overfit: deep trees
on 64 samples with noisy labels, the eval logloss climbing round after round."""

from __future__ import annotations

import sys
import time
import warnings

from tiny import PACE_S, STEPS, data, overfit_data, plan


def main() -> None:
    scenario, lib = sys.argv[1], sys.argv[2]
    p = plan()
    overfit = scenario == "overfit"
    x, y = (a.numpy() for a in (overfit_data(64) if overfit else data(2048, identical=p.identical)))
    vx, vy = (a.numpy() for a in data(512, seed=1))
    lr = {"healthy": 0.3, "nan": 0.3, "diverge": 60.0, "eval_stall": 1e-4, "frozen": 0.0, "spike": 0.3,
          "overfit": 0.5}[scenario]  # fmt: skip
    trees = {"max_depth": 6, "min_child_weight": 0, "lambda": 0} if overfit else {"max_depth": 3}

    def pace(*_: object) -> bool:
        time.sleep(PACE_S)
        return False

    if lib == "xgboost":
        import xgboost as xgb

        dtrain, dval = xgb.DMatrix(x, label=y), xgb.DMatrix(vx, label=vy)

        class Pace(xgb.callback.TrainingCallback):
            def after_iteration(self, *_: object) -> bool:
                return pace()

        xgb.train({"eta": lr, **trees, "objective": "binary:logistic", "eval_metric": "logloss"}, dtrain,
                  STEPS, evals=[(dtrain, "train"), (dval, "eval")], verbose_eval=True, callbacks=[Pace()])  # fmt: skip
    elif lib == "lightgbm":
        import lightgbm as lgb

        params = {
            "learning_rate": lr,
            "num_leaves": 7,
            "objective": "binary",
            "metric": "binary_logloss",
            "verbose": -1,
        }
        lgb.train(params, lgb.Dataset(x, label=y), STEPS, valid_sets=[lgb.Dataset(vx, label=vy)],
                  callbacks=[lgb.log_evaluation(1), pace])  # fmt: skip
    else:
        from sklearn.neural_network import MLPClassifier

        warnings.simplefilter("ignore")
        MLPClassifier((16,), learning_rate_init=lr or 1e-12, max_iter=STEPS, verbose=True, solver="sgd",
                      n_iter_no_change=STEPS, random_state=0).fit(x, y)  # fmt: skip


if __name__ == "__main__":
    main()
