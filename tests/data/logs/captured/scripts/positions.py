"""Lines whose position, role or nature the reader must get right: python positions.py imagenet|datasets|segfault.

imagenet: a tiny classifier trained and evaluated with the PyTorch ImageNet example's own meters (`ProgressMeter`,
`AverageMeter`, `accuracy`, `Summary`: copied from pytorch/examples imagenet/main.py, BSD-3-Clause) and its loop's
prints (`print_freq` 10, `display(i + 1)`, `display_summary()`); datasets: `Dataset.map` bars (`desc=`), as a
tokenizing step before training prints them; segfault: faulthandler's report of a crash in a process that imported
torch (`Extension modules: ... (total: N)`).
"""

import sys
from enum import Enum

which = sys.argv[1]


class Summary(Enum):
    NONE = 0
    AVERAGE = 1
    SUM = 2
    COUNT = 3


class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=":f", summary_type=Summary.AVERAGE):
        self.name = name
        self.fmt = fmt
        self.summary_type = summary_type
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)

    def summary(self):
        fmtstr = ""
        if self.summary_type is Summary.NONE:
            fmtstr = ""
        elif self.summary_type is Summary.AVERAGE:
            fmtstr = "{name} {avg:.3f}"
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print("\t".join(entries))

    def display_summary(self):
        entries = [" *"]
        entries += [meter.summary() for meter in self.meters]
        print(" ".join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = "{:" + str(num_digits) + "d}"
        return "[" + fmt + "/" + fmt.format(num_batches) + "]"


def accuracy(output, target, topk=(1,)):
    import torch

    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def imagenet():
    import time

    import torch

    torch.manual_seed(0)
    classes, dim, bs = 10, 16, 32
    w = torch.randn(dim, classes)
    train_x = torch.randn(30 * bs, dim)
    val_x = torch.randn(5 * bs, dim)
    train_y, val_y = (train_x @ w).argmax(1), (val_x @ w).argmax(1)
    model = torch.nn.Linear(dim, classes)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        batch_time = AverageMeter("Time", ":6.3f", Summary.NONE)
        data_time = AverageMeter("Data", ":6.3f", Summary.NONE)
        losses = AverageMeter("Loss", ":.4e", Summary.NONE)
        top1 = AverageMeter("Acc@1", ":6.2f", Summary.NONE)
        top5 = AverageMeter("Acc@5", ":6.2f", Summary.NONE)
        progress = ProgressMeter(30, [batch_time, data_time, losses, top1, top5], prefix=f"Epoch: [{epoch}]")
        end = time.time()
        for i in range(30):
            images, target = train_x[i * bs : (i + 1) * bs], train_y[i * bs : (i + 1) * bs]
            data_time.update(time.time() - end)
            output = model(images)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
            top5.update(acc5[0], images.size(0))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            batch_time.update(time.time() - end)
            end = time.time()
            if i % 10 == 0:
                progress.display(i + 1)
        batch_time = AverageMeter("Time", ":6.3f", Summary.NONE)
        losses = AverageMeter("Loss", ":.4e", Summary.NONE)
        top1 = AverageMeter("Acc@1", ":6.2f", Summary.AVERAGE)
        top5 = AverageMeter("Acc@5", ":6.2f", Summary.AVERAGE)
        progress = ProgressMeter(5, [batch_time, losses, top1, top5], prefix="Test: ")
        with torch.no_grad():
            end = time.time()
            for i in range(5):
                images, target = val_x[i * bs : (i + 1) * bs], val_y[i * bs : (i + 1) * bs]
                output = model(images)
                loss = criterion(output, target)
                acc1, acc5 = accuracy(output, target, topk=(1, 5))
                losses.update(loss.item(), images.size(0))
                top1.update(acc1[0], images.size(0))
                top5.update(acc5[0], images.size(0))
                batch_time.update(time.time() - end)
                end = time.time()
                if i % 2 == 0:
                    progress.display(i + 1)
        progress.display_summary()


def datasets_map():
    import time

    import pyarrow as pa
    from datasets import Dataset

    # fingerprints given: datasets 5.2 cannot hash a table or a transform under pyarrow 26 (dill and `MonthDayNano`)
    data = Dataset(pa.table({"text": [f"example {i}" for i in range(10000)]}), fingerprint="raw")

    def tokenize(batch):
        time.sleep(0.003)  # a tokenizer's pace: the bar is redrawn before it ends
        return {"ids": [len(t) for t in batch["text"]]}

    data.map(tokenize, batched=True, batch_size=100, desc="Tokenizing train dataset", new_fingerprint="tokenized")
    data.map(lambda row: {"n": len(row["text"])}, new_fingerprint="mapped")


def segfault():
    import ctypes
    import faulthandler

    import torch  # noqa: F401 - its extension modules are what faulthandler lists

    faulthandler.enable()
    ctypes.string_at(0)


{"imagenet": imagenet, "datasets": datasets_map, "segfault": segfault}[which]()
