"""Pure parsers for the console lines of named trainers whose shape the generic parsers (agent.formats) cannot
read alone: fixed messages (fp16 loss-scale overflows), unlabelled columns (Ultralytics, WaveGlow), and the
position a line names before its metrics (`Epoch [3][50/1749]`, `Iteration 100,`, `=> STEP 748`).

Each returns raw `name -> number` pairs, {} when the line is not its shape; names are as printed (or as the
trainer names the column in its header) and `trainwarden.core.metrics` maps them to canonical names.
"""

from __future__ import annotations

import re

from trainwarden.agent.pairs import NUM, Metrics, numbers, parse_number, prefixed

# fp16 dynamic loss scaling: the messages that say a step was skipped and what the scale became.
# DeepSpeed: `[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768`,
#   `Overflow detected. Skipping step. Attempted loss scale: 65536, reducing to 32768.0`,
#   `Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1`,
#   `Grad overflow on iteration: 4`, `Reducing dynamic loss scale from 65536.0 to 32768.0`;
# fairseq: `NOTE: overflow detected, setting loss scale to: 64.0`;
# apex amp: `Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0`.
OVERFLOW_RE = re.compile(
    rf"Attempted loss scale: ({NUM})(?:, reducing to ({NUM}))?"
    rf"|overflow detected, setting loss scale to: ({NUM})"
    rf"|Skipping step, loss scaler \d+ reducing loss scale to ({NUM})"
    rf"|Reducing dynamic loss scale from {NUM} to ({NUM})"
    r"|Grad overflow on iteration:? (\d+)",
    re.IGNORECASE,
)

# What a line names before its metrics: `Epoch [3][50/1749]`, `Epoch(train)  [1][ 500/2931]`, `Iter [200/21600]`,
# `Epoch: [67]  [10/31]`, `global step 1:`, `Iteration 1853400,`, `=> STEP  748`, `epoch 9 of 55, step 40 of 2006,`.
HEAD_RE = re.compile(
    r"\b(?:(epoch)|(global[ _]step|step|iter(?:ation)?))(?:\((\w+)\))?\s*:?\s*\[?\s*(\d+)(?!\.?\d)", re.IGNORECASE
)
# `[2,  2400] loss: 1.209`: the PyTorch tutorials' [epoch, batch]; `Train: 0 [  50/1251 (  4%)]`: timm's epoch
EPOCH_BATCH_RE = re.compile(r"^\s*(?:\[(\d+),\s*\d+\]|Train:\s*(\d+)\s*\[)")
# the line reports held-out data: `Epoch(val) [1][2]`, DeiT/timm `Test:`, caffe `Test net output #0:`,
# Megatron `validation loss at iteration 100`, fairseq `valid on 'valid' subset`
VALIDATION_HEAD_RE = re.compile(r"\((?:val|test)\)|^\s*Test\b|\bTest net\b|\bvalid(?:ation)?\b|\beval", re.IGNORECASE)
POSITION_NAMES = frozenset({"epoch", "step", "iter", "iteration", "num_updates", "global_step"})

# Ultralytics (YOLOv5/YOLOv8) training line: `70/1000  6.73G  1.081  0.4706  1.084  10  640: 100%|...`
# (epoch/epochs, GPU memory, the loss columns, instances, image size); the loss names are in the header line
# above it, and differ between trainers and tasks.
ULTRALYTICS_TRAIN_RE = re.compile(rf"^\s*(\d+)/\d+\s+({NUM})G\s+((?:{NUM}\s+)+?)\d+\s+\d+:")
# its validation line: `all  722  1444  0.989  0.99  0.993  0.681` (images, instances, then P R mAP50 mAP50-95
# for boxes, and again for masks when segmenting)
ULTRALYTICS_VAL_RE = re.compile(rf"^\s*all\s+\d+\s+\d+((?:\s+{NUM}){{4}}|(?:\s+{NUM}){{8}})\s*$")
ULTRALYTICS_VAL_NAMES = ("precision", "recall", "mAP50", "mAP50-95")
# torchtune's bar description: `1|1|Loss: 2.7997918128967285:   1%|...` (epoch|step|Loss: value)
TORCHTUNE_BAR_RE = re.compile(rf"^\s*(\d+)\|(\d+)\|Loss: ({NUM})")
# WaveGlow (NVIDIA/waveglow train.py): `123873:\t-5.480178833`, iteration and loss
STEP_LOSS_RE = re.compile(rf"^\s*(\d+):\s+({NUM})\s*$", re.IGNORECASE)
# Marian (marian-nmt, src/training/scheduler.h): ` : `-separated fields after the epoch and the update, training
# `Ep. 3 : Up. 5350 : Sen. 299,352 : Cost 0.68636936 * 881,133 @ 23,996 after ... : Time 32.34s : 27242.83 words/s
# : gNorm 0.8900 : L.r. 2.5000e-06`, validation `[valid] Ep. 1 : Up. 80000 : cross-entropy : 67.9483 : new best`
MARIAN_RE = re.compile(r"\bEp\. (\d+) : Up\. (\d+) : (.*)$")
MARIAN_FIELD_RE = re.compile(rf"^(Cost|gNorm|L\.r\.) ({NUM})|^({NUM}) words/s")
MARIAN_FIELDS = {"Cost": "loss", "gNorm": "grad_norm", "L.r.": "lr"}
MARIAN_VALID = {"cross-entropy": "val_loss", "ce-mean": "val_loss", "ce-mean-words": "val_loss", "ce-sum": "val_loss",
                "perplexity": "val_ppl"}  # fmt: skip
# Darknet (AlexeyAB/darknet and pjreddie's): the iteration's summary `11524: 47.876884, 48.406509 avg loss, 0.005220
# rate, 21.247497 seconds, 1475072 images` (`avg` alone in pjreddie's): this batch's loss, its running mean, the lr
DARKNET_RE = re.compile(rf"(?<![\w.])(\d+): ({NUM}), ({NUM}) avg(?: loss)?, ({NUM}) rate,", re.IGNORECASE)
# caffe: `Test net output #1: loss = 2.85665 (* 1 = 2.85665 loss)`
CAFFE_OUTPUT_RE = re.compile(rf"\b(Test|Train) net output #\d+: ([\w/.-]+) = ({NUM})")


def overflow(line: str) -> Metrics:
    """A skipped fp16 step: `loss_scale` (the scale now in use) and `overflow: 1`; `Grad overflow on
    iteration N` gives the step, and `Reducing dynamic loss scale` the new scale (both come with a line
    that says the step was skipped, so only that one counts as the overflow)."""
    found = OVERFLOW_RE.search(line)
    if found is None:
        return {}
    attempted, reduced, fairseq, apex, dynamic, iteration = found.groups()
    if iteration is not None:
        return {"iteration": int(iteration)}
    try:
        if dynamic is not None:
            return {"loss_scale": parse_number(dynamic)}
        scale = parse_number(reduced or attempted or fairseq or apex)
    except ValueError:
        return {}
    return {"loss_scale": scale, "overflow": 1}


def with_head(line: str, start: int, metrics: Metrics) -> Metrics:
    """`metrics` read from `line[start:]` with the position and the phase the text before them names."""
    head = line[:start]
    if not head or not metrics:
        return metrics
    validation = VALIDATION_HEAD_RE.search(head) is not None
    out = prefixed(metrics, "val_", POSITION_NAMES) if validation else metrics
    position: Metrics = {}
    pair = EPOCH_BATCH_RE.match(head)
    if pair is not None:
        position["epoch"] = int(pair.group(1) or pair.group(2))
    for found in HEAD_RE.finditer(head):
        epoch, step, phase, value = found.groups()
        if epoch and "epoch" not in position:
            position["epoch"] = int(value)
        elif step and "step" not in position and not (validation or phase in ("val", "test")):
            position["step"] = int(value)  # a validation line's `Iter(val) [50/50]` counts batches, not steps
    return {**position, **out} if position else out


def caffe_output(line: str) -> Metrics:
    """`Train net output #0: accuracy = 0.78125`; a `Test net` output is a validation metric."""
    found = CAFFE_OUTPUT_RE.search(line)
    if found is None:
        return {}
    phase, name, value = found.groups()
    metrics = numbers([(name, value)])
    return prefixed(metrics, "val_", POSITION_NAMES) if phase == "Test" else metrics


def ultralytics(line: str) -> Metrics:
    """The training line: `epoch`, `gpu_mem_gb`, the first loss column (`box_loss` in every detection,
    segmentation and pose trainer) and `loss`, the sum of the loss columns (what the trainer minimises; a
    NaN in any column makes it NaN). A single loss column (classification) is `loss`."""
    found = ULTRALYTICS_TRAIN_RE.match(line)
    if found is None:
        return {}
    try:
        losses = [parse_number(v) for v in found.group(3).split()]
        out: Metrics = {"epoch": int(found.group(1)), "gpu_mem_gb": parse_number(found.group(2))}
        total = sum(map(float, losses))
    except (ValueError, OverflowError):  # a numeral no float holds: not a training line
        return {}
    if len(losses) > 1:
        out["box_loss"] = losses[0]
    out["loss"] = total
    return out


def ultralytics_validation(line: str) -> Metrics:
    """`all  722  1444  0.989  0.99  0.993  0.681`, under the names of Ultralytics' own results file
    (`metrics/mAP50(B)`; `(M)` for masks)."""
    found = ULTRALYTICS_VAL_RE.match(line)
    if found is None:
        return {}
    values = found.group(1).split()
    kinds = ("B", "M")[: len(values) // 4]
    names = [f"metrics/{name}({kind})" for kind in kinds for name in ULTRALYTICS_VAL_NAMES]
    return numbers(zip(names, values, strict=True))


def torchtune_bar(line: str) -> Metrics:
    found = TORCHTUNE_BAR_RE.match(line)
    if found is None:
        return {}
    return {"epoch": int(found.group(1)), "step": int(found.group(2)), **numbers([("loss", found.group(3))])}


def step_loss(line: str) -> Metrics:
    found = STEP_LOSS_RE.match(line)
    if found is None:
        return {}
    return {"iteration": int(found.group(1)), **numbers([("loss", found.group(2))])}


def marian(line: str) -> Metrics:
    """Marian's training and validation lines (MARIAN_RE): `Cost` is the training loss; a validation line names
    one metric (`cross-entropy` and `ce-mean-words` are the eval loss, `perplexity` the eval perplexity, any other
    `val_<name>`), whatever it says after the value (`new best`, `stalled 10 times (last best: 1.56)`)."""
    found = MARIAN_RE.search(line)
    if found is None:
        return {}
    out: Metrics = {"epoch": int(found.group(1)), "step": int(found.group(2))}
    fields = found.group(3).split(" : ")
    if "[valid]" in line[: found.start()]:
        if len(fields) >= 2:
            name = fields[0].strip()
            out.update(numbers([(MARIAN_VALID.get(name, f"val_{name}"), fields[1].strip())]))
        return out if len(out) > 2 else {}
    for field in fields:
        pair = MARIAN_FIELD_RE.match(field.strip())
        if pair is not None:
            name, value, words = pair.groups()
            out.update(numbers([(MARIAN_FIELDS[name], value)] if name else [("words_per_s", words)]))
    return out if len(out) > 2 else {}


def darknet(line: str) -> Metrics:
    found = DARKNET_RE.search(line)
    if found is None:
        return {}
    step, loss, avg, lr = found.groups()
    return {"step": int(step), **numbers([("loss", loss), ("avg_loss", avg), ("lr", lr)])}
