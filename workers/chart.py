"""The evidence pack's picture: the triggering metric (and loss) over the last samples, trigger marked.

matplotlib through its Agg canvas directly (no pyplot, so no global state and no display needed);
imported lazily because it takes a moment and only a STOP needs it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

from trainwarden.core.words import shorten

LOSS = "loss"
SAMPLE = ""  # the x axis of samples with no position: their order


def _x(sample: dict[str, Any], index: int, x_of: str) -> float | None:
    x = index if x_of == SAMPLE else sample.get(x_of)
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _series(samples: Sequence[dict[str, Any]], name: str, x_of: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for i, s in enumerate(samples):
        v, x = s.get(name), _x(s, i, x_of)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and x is not None:
            xs.append(x)
            ys.append(float(v))
    return xs, ys


def x_axis(samples: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The x axis: the samples' position (`step`, else `epoch`, else their order), never the wall clock: a
    person reads a run by its steps. Its label says `epoch` when the steps are epochs (Keras)."""
    if any("step" in s for s in samples):
        epochs = all(s.get("epoch") == s["step"] for s in samples if "step" in s)
        return "step", "epoch" if epochs else "step"
    if any("epoch" in s for s in samples):
        return "epoch", "epoch"
    return SAMPLE, "sample"


def preload() -> None:
    """Import matplotlib in the worker's parent process, so the work horses RQ forks inherit it
    instead of each spending ~0.7 s importing it between a STOP decision and the stop."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401


def render_chart(
    samples: Sequence[dict[str, Any]], *, metric: str | None, trigger: dict[str, Any], title: str
) -> bytes | None:
    """PNG bytes, or None when there is nothing to draw. `trigger` holds the offending values (and step)."""
    names = [n for n in dict.fromkeys([metric, LOSS]) if n and any(n in s for s in samples)]
    if not names:
        return None
    x_of, x_label = x_axis(samples)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    axes = [ax, ax.twinx()] if len(names) == 2 else [ax]
    colors = ["tab:blue", "tab:orange"]
    for axis, name, color in zip(axes, names, colors, strict=False):
        xs, ys = _series(samples, name, x_of)
        axis.plot(xs, ys, color=color, marker=".", label=name)
        axis.set_ylabel(name, color=color)
    at = _x(trigger, 0, x_of) if x_of != SAMPLE else None
    if at is None and samples:
        at = _x(samples[-1], len(samples) - 1, x_of)
    if at is not None:
        bad = ", ".join(f"{k}={v}" for k, v in trigger.items() if k not in ("step", "epoch"))
        ax.axvline(at, color="red", linestyle="--", label=shorten(f"trigger: {bad}", 80))
        value = trigger.get(names[0])
        # NaN/Inf: mark at the top
        y = float(value) if isinstance(value, int | float) and math.isfinite(value) else axes[0].get_ylim()[1]
        axes[0].plot([at], [y], marker="X", color="red", markersize=12, clip_on=False)
    ax.set_xlabel(x_label)
    ax.set_title(shorten(title, 100))
    handles = [h for a in axes for h in a.get_legend_handles_labels()[0]]
    labels = [label for a in axes for label in a.get_legend_handles_labels()[1]]
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
