"""The evidence pack's picture: the triggering metric (and loss) over the last samples, trigger marked.

matplotlib through its Agg canvas directly (no pyplot, so no global state and no display needed);
imported lazily because it takes a moment and only a STOP needs it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

LOSS = "loss"


def _series(samples: Sequence[dict[str, Any]], name: str, x_of: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for s in samples:
        v, x = s.get(name), s.get(x_of)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and x is not None:
            xs.append(float(x))
            ys.append(float(v))
    return xs, ys


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
    x_of = "step" if any("step" in s for s in samples) else "ts"
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
    at = trigger.get("step") if x_of == "step" else None
    if at is None and samples:
        at = samples[-1].get(x_of)
    if at is not None:
        bad = ", ".join(f"{k}={v}" for k, v in trigger.items() if k != "step")
        ax.axvline(float(at), color="red", linestyle="--", label=f"trigger: {bad}"[:80])
        value = trigger.get(names[0])
        # NaN/Inf: mark at the top
        y = float(value) if isinstance(value, int | float) and math.isfinite(value) else axes[0].get_ylim()[1]
        axes[0].plot([float(at)], [y], marker="X", color="red", markersize=12, clip_on=False)
    ax.set_xlabel(x_of)
    ax.set_title(title[:100])
    handles = [h for a in axes for h in a.get_legend_handles_labels()[0]]
    labels = [label for a in axes for label in a.get_legend_handles_labels()[1]]
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
