"""What every torch-based framework script shares: the scenario plan, a tiny model, synthetic data.

Each script trains for real (tiny MLP, 2 classes, 8 features, CPU) and prints as its framework prints by
default; the scenario decides the lr, the data and one poisoned step. PACE_S of sleep per training step
stands for the compute of a real model, so that a STOP can arrive while the run still trains.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import torch
from torch import nn

STEPS = int(os.environ.get("CONFORMANCE_STEPS", "60"))
BAD_AT = 20  # the step poisoned by nan / spike
PACE_S = float(os.environ.get("CONFORMANCE_PACE_S", "0.1"))
EVAL_EVERY = 4


@dataclass(frozen=True)
class Plan:
    lr: float
    nan_at: int | None = None
    spike_at: int | None = None
    identical: bool = False  # every sample the same (with lr 0: a frozen loss)
    classes: int = 2  # the classifier's outputs
    random_labels: bool = False  # labels drawn at random: nothing to learn, the loss stays at ln(classes)


PLANS = {
    "healthy": Plan(lr=0.3),
    "nan": Plan(lr=0.3, nan_at=BAD_AT),
    "diverge": Plan(lr=40.0),
    "spike": Plan(lr=0.3, spike_at=BAD_AT),
    "frozen": Plan(lr=0.0, identical=True),
    "eval_stall": Plan(lr=3e-4),
    "overfit": Plan(lr=1e-2),  # few samples with noisy labels, a wide model, many epochs: `overfit_data`
    "chance": Plan(lr=0.3, classes=10, random_labels=True),  # a 10-way classifier at chance (ln 10)
    "lr0": Plan(lr=0.0),  # nothing moves: the eval loss stays at its first value
}


def overfit_data(n: int = 48, noise: float = 0.35) -> tuple[torch.Tensor, torch.Tensor]:
    """A training set a wide model memorises: few samples, `noise` of their labels flipped. Its held-out loss
    climbs far past its best while the training loss falls (the held-out set: `data(512, seed=1)`)."""
    x, y = data(n)
    flip = torch.rand(n, generator=torch.Generator().manual_seed(7)) < noise  # not the features' seed
    return x, torch.where(flip, 1 - y, y)


def plan() -> Plan:
    return PLANS[sys.argv[1]]


def data(
    n: int = 2048, *, identical: bool = False, seed: int = 0, p: Plan | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    if p is not None and p.random_labels:
        y = torch.randint(0, p.classes, (n,), generator=g)
    if identical:
        x, y = x[:1].repeat(n, 1), y[:1].repeat(n)
    return x, y


class Dataset(torch.utils.data.Dataset):
    """(x, labels) items, as the Hugging Face Trainer feeds them to a model's forward."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Tiny(nn.Module):
    """An MLP whose loss the scenario poisons at one step: NaN (the weights go NaN after it, as in a real
    blow-up), or a spike (the printed loss x25 for one batch, the gradient unchanged: a hard batch)."""

    def __init__(self, p: Plan) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, p.classes))
        self.p = p
        self.calls = 0

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.training:
            self.calls += 1
            time.sleep(PACE_S)
            if self.calls == self.p.nan_at:
                loss = loss * float("nan")
            if self.calls == self.p.spike_at:
                loss = loss + 24 * loss.detach()
        return loss
