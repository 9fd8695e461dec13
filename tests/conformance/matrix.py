"""The conformance matrix as data: each scenario's expected verdict (written before it was first run),
each framework's command, and the cases (framework x scenario) with the gaps the product has today.

A case whose verdict the product gets wrong stays here with its expectation and a GAPS entry naming the
line that was not read or the rule that misfired; the test marks it xfail(strict=True), so the fix that
closes the gap fails the case loudly until the entry is removed (tests/conformance/GAPS.md lists them).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

NAN_LINE = r"(?i)\b(nan|inf)\b"


@dataclass(frozen=True)
class Expect:
    """stop: True must STOP (by one of stop_rules), False must not, None either. anomaly: a regex that
    one opened anomaly's `rule: reason` must match, with a severity in severities. clean: no anomaly
    above info at all (a false alarm reaches a person). trigger: the bad line, where latency starts (for a stall:
    the last training step's event)."""

    stop: bool | None
    stop_rules: frozenset[str] = frozenset()
    anomaly: str | None = None
    severities: tuple[str, ...] = ("warning", "critical")
    clean: bool = False
    no_critical: bool = False
    trigger: str | None = None
    wait_s: float | None = None  # a run that never ends (a hang): kept this long at most, until its alert came
    dump: str | None = None  # a regex one `process.dump` (taken when the stall opened) must match, as
    # `verdict: where (category, method)`: e.g. `hang: torch.distributed.all_reduce (collective, py-spy)`
    absent: str | None = None  # a regex no opened anomaly's `rule: reason` may match (e.g. a slowdown is no stall)
    slow_gap_s: float | None = None  # a quiet slow run's longest step gap must be longer (or it tests nothing)
    confirm: bool = False  # the STOP must be a guarded one (`confirm:`: a judgement a person may overrule)
    stop_by_step: int | None = None  # in time: the STOP decided at this step at the latest (the run goes on after)


SCENARIOS: dict[str, Expect] = {
    "healthy": Expect(stop=False, clean=True),
    "nan": Expect(stop=True, stop_rules=frozenset({"loss-nonfinite", "grad-norm-nonfinite"}), trigger=NAN_LINE),
    "diverge": Expect(
        stop=True,
        stop_rules=frozenset({"loss-runaway", "loss-nonfinite", "grad-norm-nonfinite"}),
        trigger=r"(?i)\b(nan|inf)\b|\d{3,}\.\d",
    ),
    "spike": Expect(stop=False, no_critical=True),
    "frozen": Expect(stop=None, anomaly=r"."),
    "eval_stall": Expect(stop=None, anomaly=r"^(val-no-progress|val-plateau|val-rising|val-frozen|overfitting)"),
    "oom_host": Expect(
        stop=None, anomaly=r"^log-oom", severities=("critical",), trigger=r"can't allocate memory|out of memory"
    ),
    "collective_timeout": Expect(
        stop=None, anomaly=r"^log-(nccl|gloo)", severities=("critical",), trigger=r"Timed out waiting"
    ),
    "worker_killed": Expect(
        stop=None, anomaly=r"^log-killed", severities=("critical",), trigger=r"exitcode\s*:\s*-9|SIGKILL"
    ),
    "disk_full": Expect(
        stop=None,
        anomaly=r"(?i)^[^:]*(disk|space|enospc)",
        severities=("critical",),
        trigger=r"iostream error|No space left",
    ),
    # the default policy's run-stalled: no step for 3x the usual gap and at least 2m, the processes idle, in a futex;
    # the stack dump taken when it opened names the blocked call
    "hang": Expect(
        stop=None, anomaly=r"^run-stalled: .*hung, waiting on a lock", wait_s=150, dump=r"^hang: \S*acquire"
    ),
    # (policy stall-fast: floor 10s idle, busy_floor 20s, eval_floor 40s, save_budget 40s, first_step_budget 60s)
    # torchrun gloo, rank 1 blocks at step 10 (an Event never set), rank 0 waits in all_reduce (group timeout 30m):
    # run-stalled (WAIT) saying it hung, after the 10 s floor and long before gloo's timeout; the dump names the
    # collective rank 0 waits in
    "rank_stuck": Expect(stop=None, anomaly=r"^run-stalled: .*hung", wait_s=60, dump=r"^hang: \S*all_reduce"),
    # a 25 s eval and a 25 s checkpoint save, processes idle: longer than the step budget (10 s idle, 20 s busy),
    # within the phase's (40 s): quiet, no STOP, no warning. The plain loop prints `Evaluating...` and `saving
    # checkpoint PATH`; the HF Trainer (log_level info) its `***** Running Evaluation *****` and `Saving model
    # checkpoint to`, a slow eval Dataset and a callback's slow on_save
    "slow_phases": Expect(stop=False, clean=True, slow_gap_s=21),
    # a DataLoader whose Dataset reads each sample in 2.75 s: a step every 11 s, regular, over the 10 s floor: a slow
    # but steady run, quiet (its budget is 3x its own cadence)
    "dataloader": Expect(stop=False, clean=True, slow_gap_s=10.5),
    # the same reads 4x slower after 80 steps (0.3 s -> 1.2 s a step, 30 s): throughput-drop (warning) saying the
    # throughput fell, under the policy's scaled windows (warmup 10s, window 20s, sustained 15s); no run-stalled;
    # latency from the first slow step
    "dataloader_slowdown": Expect(
        stop=False, anomaly=r"^throughput-drop: throughput fell", absent=r"^run-stalled", trigger=r"^step=81 "
    ),
    # judgements (issue 39): a guarded STOP. A wide model memorising few samples with noisy labels: Keras' val_loss and
    # xgboost's eval-logloss climb far past their best (val-rising, val-runaway or eval-early-stop, whichever first);
    # an ultralytics results.csv whose mAP peaks in the first epochs and is never beaten (eval-early-stop)
    "overfit": Expect(stop=True, stop_rules=frozenset({"val-rising", "val-runaway", "eval-early-stop"}), confirm=True),
    "map_peak": Expect(stop=True, stop_rules=frozenset({"eval-early-stop"}), confirm=True),
    # a slow start that then learns (issue 39 item 4): val accuracy at chance and val loss at ln 4 while the learning
    # rate warms up from 1e-6, then climbing: no STOP and no judgement that it is stuck, frozen or done
    "slow_start": Expect(
        stop=False,
        no_critical=True,
        absent=r"^(val-frozen|val-no-progress|val-at-chance|val-accuracy-at-chance|loss-at-chance|eval-early-stop|"
        r"eval-collapse|[\w-]*stuck)",
    ),
    # a NaN the framework's own check raises on before any NaN is printed (stable-baselines3: the policy's logits)
    "nan_crash": Expect(stop=None, anomaly=r"^log-nan", severities=("critical",), trigger=r"found invalid values"),
    # a 10-way classifier on random labels (`Number of classes: 10` printed, `Epoch [e/2]`): its loss stays at
    # ln 10; loss-stuck's confirm-STOP once it held there for 10% of the 2 planned epochs, within the first 40 steps
    # of 60 (the run goes on: a person may keep it)
    "chance": Expect(
        stop=True,
        stop_rules=frozenset({"loss-stuck"}),
        anomaly=r"^loss-stuck: .*= ln 10 .*10-way",
        trigger=r"^Epoch \[1/2\], Step \[1/",
        stop_by_step=40,
    ),
    # lr 0: the weights never move, the eval loss stays at its first value eval after eval (a run bounded by
    # max_steps states no length: 5 evals are the patience); val-loss-stuck's confirm-STOP by step 40 of 60
    "lr0": Expect(
        stop=True,
        stop_rules=frozenset({"val-loss-stuck"}),
        anomaly=r"^val-loss-stuck: val_loss has been",
        stop_by_step=40,
    ),
}

TRAINING = ("healthy", "nan", "diverge", "spike", "frozen", "eval_stall")


@dataclass(frozen=True)
class Framework:
    """How a framework's script runs: its venv, its argv after the interpreter ({s}: the scenario), and
    what the agent watches (`log`: the console; else a metric file or directory the script writes)."""

    venv: str
    argv: tuple[str, ...]
    watch: str = "log"
    env: dict[str, str] = field(default_factory=dict)
    launcher: str = "python"  # or torchrun (2 processes)


FW = ".venv-frameworks"
FRAMEWORKS: dict[str, Framework] = {
    "transformers-5": Framework(FW, ("hf.py", "{s}")),
    "transformers-4": Framework(".venv-hf4", ("hf.py", "{s}")),
    "torchrun-gloo": Framework(FW, ("ddp.py", "{s}"), launcher="torchrun"),
    "torch-faults": Framework(FW, ("faults.py", "{s}")),
    "torch-slow": Framework(FW, ("slow.py", "{s}")),
    "lightning-tqdm": Framework(FW, ("lit.py", "{s}", "tqdm")),
    "lightning-rich": Framework(FW, ("lit.py", "{s}", "rich")),
    "lightning-csv": Framework(FW, ("lit.py", "{s}", "csv"), watch="csv/version_0/metrics.csv"),
    "lightning-tb": Framework(FW, ("lit.py", "{s}", "tb"), watch="tb/version_0"),
    "keras-torch": Framework(FW, ("kerasfit.py", "{s}")),
    "accelerate": Framework(FW, ("loop.py", "{s}", "accelerate")),
    "torch-tensorboard": Framework(FW, ("loop.py", "{s}", "tensorboard"), watch="tb"),
    "wandb-offline": Framework(FW, ("loop.py", "{s}", "wandb"), env={"WANDB_MODE": "offline", "WANDB_SILENT": "true"}),
    "xgboost": Framework(FW, ("gbdt.py", "{s}", "xgboost")),
    "lightgbm": Framework(FW, ("gbdt.py", "{s}", "lightgbm")),
    "sklearn-mlp": Framework(FW, ("gbdt.py", "{s}", "sklearn")),
    "stable-baselines3": Framework(FW, ("sb3.py", "{s}")),
    "fastai-table": Framework(FW, ("fastprogress_table.py", "{s}")),
    "ultralytics-csv": Framework(FW, ("ultra.py", "{s}"), watch="results.csv"),
    "torch-slow-start": Framework(FW, ("slow_start.py", "{s}")),
    **{f"plain-{style}": Framework(FW, ("plain.py", "{s}", style)) for style in (
        "tutorial", "quickstart", "cifar", "mnist", "epoch_slash", "pipes", "step_loss", "kv", "logging", "json")},
}  # fmt: skip


@dataclass(frozen=True)
class Case:
    framework: str
    scenario: str
    gap: str | None = None  # why the product gets it wrong today: the test is xfail(strict=True)
    policy: str | None = None  # tests/conformance/policies/NAME.yaml over the default policy (None: the default)

    @property
    def id(self) -> str:
        return f"{self.framework}-{self.scenario}"


GAPS: dict[str, str] = {}  # case id -> why the product gets it wrong today (tests/conformance/GAPS.md)
STALL_POLICY = "stall-fast"

CASES: list[Case] = [
    *(Case(fw, s) for fw in ("transformers-5", "transformers-4") for s in TRAINING),
    Case("transformers-5", "slow_phases", policy=STALL_POLICY),
    Case("torchrun-gloo", "healthy"),
    Case("torchrun-gloo", "nan"),
    Case("torchrun-gloo", "collective_timeout"),
    Case("torchrun-gloo", "worker_killed"),
    Case("torchrun-gloo", "rank_stuck", policy=STALL_POLICY),
    *(Case("torch-faults", s) for s in ("oom_host", "disk_full", "hang")),
    *(Case("torch-slow", s, policy=STALL_POLICY) for s in ("slow_phases", "dataloader", "dataloader_slowdown")),
    *(Case("lightning-tqdm", s) for s in TRAINING),
    *(Case("lightning-rich", s) for s in ("healthy", "nan")),
    *(Case("lightning-csv", s) for s in ("healthy", "nan", "eval_stall")),
    *(Case("lightning-tb", s) for s in ("healthy", "nan")),
    *(Case("keras-torch", s) for s in ("healthy", "nan", "diverge", "spike", "eval_stall")),
    *(Case(fw, s) for fw in ("accelerate", "torch-tensorboard") for s in ("healthy", "nan")),
    Case("wandb-offline", "nan"),  # watched with --allow-offline-wandb: offline on purpose, the W&B rule would STOP it
    Case("xgboost", "healthy"),
    Case("lightgbm", "healthy"),
    *(Case("sklearn-mlp", s) for s in ("healthy", "diverge")),
    Case("stable-baselines3", "healthy"),
    Case("stable-baselines3", "nan_crash"),
    *(Case("fastai-table", s) for s in ("healthy", "nan", "diverge", "eval_stall")),
    Case("keras-torch", "overfit"),
    Case("xgboost", "overfit"),
    Case("ultralytics-csv", "map_peak"),
    Case("ultralytics-csv", "healthy"),
    Case("torch-slow-start", "slow_start"),
    *(Case(fw, s) for fw in FRAMEWORKS if fw.startswith("plain-") for s in ("healthy", "nan")),
    *(Case("plain-kv", s) for s in ("diverge", "spike", "frozen", "eval_stall")),
    Case("plain-tutorial", "chance"),
    Case("lightning-tqdm", "lr0"),
]
CASES = [Case(c.framework, c.scenario, GAPS.get(c.id), c.policy) for c in CASES]


def matches(pattern: str | None, text: str) -> bool:
    return pattern is None or re.search(pattern, text) is not None


if os.environ.get("CONFORMANCE_ONLY"):  # a regular expression over case ids: run a part of the matrix
    CASES = [c for c in CASES if re.search(os.environ["CONFORMANCE_ONLY"], c.id)]
