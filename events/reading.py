"""Whether trainwarden reads a run's training metrics: the agent's `source.status` of source `reading`, and
its words as a person reads them (the bot's notice, `trainwarden check`, `trainwarden health`).

A run whose log grows but yields no training metric is watched blind: its NaN is never stopped. The agent
(agent/blind.py) says so once with status `unreadable` (how many lines, over how long, one line quoted,
masked and capped), and `readable` once a metric is read after that. One definition of the fixes, so that
Slack, `check` and `health` name the same ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from trainwarden.core.words import shorten

SOURCE = "reading"  # `source` of the source.status events about whether metrics are read
UNREADABLE = "unreadable"
READABLE = "readable"
NOTICE = "metrics unreadable: "  # starts the agent's heartbeat notice naming the runs it reads blind
SAMPLE_CHARS = 120  # a quoted line is cut to this (masked first); it fits in an anomaly's reason
FORMATS_PAGE = "docs/agent.md (the formats the agent reads)"
FIXES = (
    "log them with trainwarden.log(...)",
    "the Hugging Face or Lightning callback (trainwarden.sdk.integrations)",
    "a structured file the agent reads (metrics.csv, TensorBoard tfevents, W&B)",
    f"or print a format of {FORMATS_PAGE}",
)

# a metric-looking word next to a non-finite value: `loss nan`, `L=inf`, `grad_norm: -inf`, `loss is NaN`
_NONFINITE = re.compile(
    r"(?i)\b(loss|[a-z_]*loss|acc\w*|grad\w*|norm|ppl|perplexity|l)\b\W{0,3}(?:is\s+)?[-+]?(nan|inf(?:inity)?)\b"
)


def fixes() -> str:
    """What to do about it, in one sentence part: `log them with trainwarden.log(...), ...`."""
    return ", ".join(FIXES)


def sample(text: str) -> str:
    """A quoted line, cut to SAMPLE_CHARS (mask it before: a secret must never be cut in half and shown)."""
    text = text.strip()
    return shorten(text, SAMPLE_CHARS)


def unreadable_facts(lines: int, seconds: float, quoted: str | None) -> str:
    """The agent's reason: `no training metric read in 62 lines over 61s, e.g. `>> it#5 -- L=2.3 ::``."""
    said = f"no training metric read in {lines} lines over {seconds:.0f}s"
    return f"{said}, e.g. `{quoted}`" if quoted else said


def unreadable_text(facts: str) -> str:
    """One line for a person: what is wrong, why it matters, what to do."""
    return f"trainwarden cannot read this run's metrics ({facts}), so its NaN or divergence goes unseen. Fix: {fixes()}"


def nonfinite_line(lines: Iterable[str]) -> str | None:
    """The latest line that holds a metric-looking word next to nan/inf (`step 5 loss nan`), or None: a
    report with no metric must not say "no metrics yet" beside it."""
    found = None
    for line in lines:
        if _NONFINITE.search(line):
            found = line
    return found


def status_of(data: Mapping[str, Any]) -> str | None:
    """The reading status of a source.status payload (None for the other sources' statuses)."""
    return str(data.get("status")) if data.get("source") == SOURCE else None
