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
EPOCH_BATCH_RE = re.compile(r"^\s*(?:\[(\d+),\s*(\d+)\]|Train:\s*(\d+)\s*\[)")
# the batch within the epoch, right after the epoch (and its `/E`): `Epoch [3][50/1749]`, `Epoch: [67]  [10/31]`,
# `Epoch 1, 150/21692;` (OpenNMT-py), `epoch 1 batch 40/128`, timm's `Train: 0 [  50/1251`
BATCH_OF_RE = re.compile(
    r"^(?:\s*/\s*\d+)?[\s\]\[,;:|-]*(?:batch\s*:?\s*)?\[?\s*(\d+)\s*/\s*(\d+)(?![\d/.])", re.IGNORECASE
)
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
# the PyTorch ImageNet example (pytorch/examples imagenet/main.py: `ProgressMeter` of `AverageMeter`s, each
# `{name} {val} ({avg})`, tab-joined): `Epoch: [2][11/30]\tTime  0.123 ( 0.200)\tData ...\tLoss 6.8e+00 (6.9e+00)\t
# Acc@1   0.00 (  0.10)\tAcc@5 ...`, `Test: [ 1/5]\tTime ...\tLoss ...\tAcc@1 ...` and the eval's summary
# ` *   Acc@1 75.200 Acc@5 92.100` (before 2022 ` * Acc@1 75.200 Acc@5 92.100`; `Prec@1` before 2018)
METERS_HEAD_RE = re.compile(r"^\s*(?:Epoch: \[(\d+)\]|(Test):\s*)\[\s*(\d+)(?:/(\d+))?\]")  # SwAV: no /n
METER_RE = re.compile(rf"(?<![\w@])([A-Za-z][\w@]*)\s+({NUM})\s+\(\s*({NUM})\s*\)")
METERS_SUMMARY_RE = re.compile(rf"^\s*\*\s+((?:[A-Za-z]\w*@\d+\s+{NUM}\s*)+)$")
METER_PAIR_RE = re.compile(rf"([A-Za-z]\w*@\d+)\s+({NUM})")
# its meters under the vocabulary's names: top-k accuracy is `acc1`/`acc5` (as timm and DeiT print it)
TIMINGS = frozenset({"Time", "Data"})
METER_NAMES = {"Loss": "loss", "Acc@1": "acc1", "Acc@5": "acc5", "Prec@1": "acc1", "Prec@5": "acc5"}
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
    epoch_end = -1
    pair = EPOCH_BATCH_RE.match(head)
    if pair is not None:
        position["epoch"] = int(pair.group(1) or pair.group(3))
        if pair.group(2) is not None:
            position["step"] = int(pair.group(2))  # the batch: counted on across epochs by the run's reader
        epoch_end = pair.end()
    for found in HEAD_RE.finditer(head):
        epoch, step, phase, value = found.groups()
        if epoch and "epoch" not in position:
            position["epoch"] = int(value)
            epoch_end = found.end()
        elif step and "step" not in position and not (validation or phase in ("val", "test")):
            position["step"] = int(value)  # a validation line's `Iter(val) [50/50]` counts batches, not steps
    if epoch_end >= 0 and "step" not in position and not validation and not _counts_steps(metrics):
        batch = batch_step(head[epoch_end:], int(position["epoch"]))
        if batch is not None:
            position["step"] = batch
    return {**position, **out} if position else out


STEP_NAMES = POSITION_NAMES - {"epoch"}


def _counts_steps(metrics: Metrics) -> bool:
    """The line prints its own step counter (fairseq's `num_updates=2800` after `epoch 001:   2800 / 160368`)."""
    return any(name.lower() in STEP_NAMES for name in metrics)


def with_batch(line: str, metrics: Metrics) -> Metrics:
    """Blank-separated pairs (`train: epoch 1 batch 40/128 loss 2.3`) at the batch named after the epoch."""
    if _counts_steps(metrics) or not any(name.lower() == "epoch" for name in metrics):
        return metrics
    found = next((m for m in HEAD_RE.finditer(line) if m.group(1)), None)
    step = None if found is None else batch_step(line[found.end() :], int(found.group(4)))
    return metrics if step is None else {"step": step, **metrics}


def batch_step(after_epoch: str, epoch: int) -> int | None:
    """The position of a line that names the batch within its epoch right after the epoch (`[50/1749]`,
    `, 150/21692;`, ` batch 40/128`): epoch x batches per epoch + batch, as for a progress bar (agent.bars), so
    samples order across epochs; None when no batch follows the epoch. Without it every line of an epoch was one
    point at the epoch's number."""
    found = BATCH_OF_RE.match(after_epoch)
    if found is None:
        return None
    batch, total = int(found.group(1)), int(found.group(2))
    return epoch * total + batch if total else batch


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


def imagenet_meters(line: str) -> Metrics:
    """The PyTorch ImageNet example's lines (METERS_HEAD_RE). A training line is at epoch x batches + batch (its
    `Epoch: [e][b/n]`), each meter's value that batch's; a `Test:` line is the eval: `val_` names, each meter's
    running mean over the eval so far (its last line is the eval's result), and no step of its own (the batch
    of an eval is no training step); the ` * Acc@1 ...` summary is the eval's result."""
    head = METERS_HEAD_RE.match(line)
    if head is None:
        summary = METERS_SUMMARY_RE.match(line)
        if summary is None:
            return {}
        pairs = METER_PAIR_RE.findall(summary.group(1))
        return numbers((f"val_{METER_NAMES.get(name, name)}", value) for name, value in pairs)
    epoch, test, batch, total = head.groups()
    meters = METER_RE.findall(line, head.end())
    if test:  # its timings (`Time`, `Data`) are the eval's, no training signal
        pairs = [(f"val_{METER_NAMES.get(name, name)}", avg) for name, _value, avg in meters if name not in TIMINGS]
        return numbers(pairs)
    found = numbers((METER_NAMES.get(name, name), value) for name, value, _avg in meters)
    if not found:
        return {}
    if total is None:  # `Epoch: [163][50]` (SwAV, MoCo forks): the batch is the step, counted on across epochs
        return {"epoch": int(epoch), "step": int(batch), **found}
    return {"epoch": int(epoch), "step": int(epoch) * int(total) + int(batch), **found}
