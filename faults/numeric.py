"""Training itself failing: a framework's own NaN/Inf check ending the run, and the fp16 loss scaler stuck at its
minimum, and a batch whose NaN/Inf loss the trainer skipped (a warning: training goes on). Tags `nan`, `loss_scale`,
`nan_skipped`."""

from __future__ import annotations

from trainwarden.faults.model import FORMAT, Sample, Signature, Source

NAN, LOSS_SCALE, NAN_SKIPPED = "nan", "loss_scale", "nan_skipped"
NAN_REMEDY = (
    "lower the learning rate, add warmup or gradient clipping, use bf16 rather than fp16, and check the data batch"
)
DS_SCALER = Source("microsoft/DeepSpeed", "deepspeed/runtime/fp16/loss_scaler.py", "Attempted loss scale: ")

SIGNATURES = (
    Signature(
        id="fairseq_min_loss_scale",
        tag=NAN,
        pattern=r"Minimum loss scale reached",
        hints=("Minimum loss scale",),
        severity="critical",
        what="the loss scale hit its minimum: the loss is exploding (fairseq)",
        remedy=NAN_REMEDY,
        source=Source(
            "facebookresearch/fairseq", "fairseq/optim/dynamic_loss_scaler.py", "Minimum loss scale reached ({})."
        ),
        samples=(
            Sample(
                "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. "
                "Try lowering "
                "the learning rate, using gradient clipping or increasing the batch size.",
                None,
                "https://github.com/bert-nmt/bert-nmt/issues/47",
            ),
        ),
    ),
    Signature(
        id="deepspeed_min_loss_scale",
        tag=NAN,
        pattern=r"loss scale already at minimum",
        hints=("loss scale already",),
        severity="critical",
        what="the loss scale is at its minimum and still overflows: DeepSpeed ended the run",
        remedy=NAN_REMEDY,
        source=Source(
            "microsoft/DeepSpeed",
            "deepspeed/runtime/fp16/loss_scaler.py",
            "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
        ),
        samples=(
            Sample(
                "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
                None,
                "https://github.com/yangjianxin1/Firefly/issues/68",
            ),
        ),
    ),
    Signature(
        id="megatron_nan_grad",
        tag=NAN,
        pattern=r"found NaN in",
        hints=("found NaN",),
        severity="critical",
        what="NaN in the gradients (Megatron's check)",
        remedy=NAN_REMEDY,
        source=Source(
            "NVIDIA/Megatron-LM", "megatron/core/distributed/param_and_grad_buffer.py", "found NaN in local grad norm"
        ),
        samples=(
            Sample(
                "AssertionError: Rank 3: found NaN in local grad norm in backwards pass. Device: 3, node: "
                "set-zw04-kubernetes-pc133.mt",
                None,
                "https://github.com/alibaba/Pai-Megatron-Patch/issues/60",
            ),
        ),
    ),
    Signature(
        id="loss_is_nan",
        tag=NAN,
        pattern=r"Loss is nan, stopping training|Loss is inf, stopping training",
        hints=("Loss is nan", "Loss is inf"),
        severity="critical",
        what="the loss is NaN: the trainer stopped (DeiT/timm's check)",
        remedy=NAN_REMEDY,
        source=Source("facebookresearch/deit", "engine.py", "Loss is {}, stopping training"),
        samples=(Sample("Loss is nan, stopping training", None, FORMAT),),
    ),
    Signature(
        id="autograd_nan",
        tag=NAN,
        pattern=r"returned nan values in its \d+th output",
        hints=("returned nan",),
        severity="critical",
        what="autograd's anomaly mode found NaN in a backward function's output",
        remedy=NAN_REMEDY + "; the function named is where NaN first appears",
        source=Source("pytorch/pytorch", "torch/csrc/autograd/engine.cpp", "' returned nan values in its "),
        samples=(
            Sample(
                "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
                None,
                FORMAT,
            ),
        ),
    ),
    Signature(
        id="torch_distribution_invalid",
        tag=NAN,
        pattern=r"Expected parameter \w+ .*but found invalid values",
        hints=("but found invalid values",),
        severity="critical",
        what="a distribution's parameters are NaN/Inf (torch.distributions' check): the model's outputs went NaN",
        remedy=NAN_REMEDY + "; in RL, check the rewards and observations for NaN/Inf",
        source=Source("pytorch/pytorch", "torch/distributions/distribution.py", "but found invalid values:\n{value}"),
        samples=(
            Sample(
                "ValueError: Expected parameter logits (Tensor of shape (32, 2)) of distribution Categorical(logits: "
                "torch.Size([32, 2])) to satisfy the constraint IndependentConstraint(Real(), 1), but found invalid "
                "values:",
                None,
                "stable-baselines3 2.9.2 PPO under torch 2.13.0, a reward turned NaN (tests/conformance sb3 nan)",
            ),
        ),
    ),
    Signature(
        id="floating_point_error",
        tag=NAN,
        pattern=r"FloatingPointError",
        hints=("FloatingPointError",),
        severity="critical",
        what="FloatingPointError: the trainer's own NaN/Inf check ended the run",
        remedy=NAN_REMEDY,
        source=Source("python/cpython", "Objects/exceptions.c", "FloatingPointError"),
        samples=(Sample("FloatingPointError: gradients are Nan/Inf", None, FORMAT),),
        # tensorboardX's check of a value being logged (x2num.check_nan): a warning, training goes on
        not_samples=("[1,0]<stdout>:Warning: NaN or Inf found in input tensor.",),
    ),
    Signature(
        id="deepspeed_scale_at_minimum",
        tag=LOSS_SCALE,
        pattern=r"Attempted loss scale:\s*(\S+), reducing to \1\b",
        hints=("Attempted loss scale",),
        severity="critical",
        what="fp16 overflows at the minimum loss scale: every step is skipped",
        remedy="fp16 overflows at the minimum loss scale, every step is skipped; lower the learning rate or use bf16",
        source=DS_SCALER,
        samples=(
            Sample(
                "[2021-11-27 00:36:54,800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. "
                "Attempted loss scale: 1, reducing to 1",
                None,
                "tests/data/real/deepspeed_t5_loss_scale_stuck_at_1.log line 1",
            ),
        ),
        not_samples=(
            "[2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
            "step. Attempted loss scale: 64, reducing to 32",
        ),
    ),
    Signature(
        id="skipped_nonfinite_loss",
        tag=NAN_SKIPPED,
        pattern=r"received an? (?:nan|inf) loss",
        hints=("received a",),
        severity="warning",
        what="a NaN/Inf loss: the trainer skipped the batch's update (deepspeech.pytorch's check)",
        remedy="one batch gave a NaN/Inf loss and its update was skipped; if it recurs, lower the learning rate, add "
        "gradient clipping and check that batch's data (an empty or too-short transcript for CTC)",
        source=Source(
            "SeanNaren/deepspeech.pytorch", "train.py", "WARNING: received an inf loss, setting loss value to 0"
        ),
        samples=(
            Sample(
                "WARNING: received a nan loss, setting loss value to 0",
                None,
                "tests/data/real/deepspeech_pytorch_one_nan_loss_skipped_update.log (the corpus's development part)",
            ),
            Sample("WARNING: received an inf loss, setting loss value to 0", None, FORMAT),
        ),
    ),
)
