"""Whether trainwarden reads a run's training metrics: the agent's `source.status` of source `reading`, and
its words as a person reads them (the bot's notice, `trainwarden check`, `trainwarden health`).

A run whose log grows but yields no training metric is watched blind: its NaN is never stopped. The agent
(agent/blind.py) says so once with status `unreadable` (how many lines, over how long, one line quoted,
masked and capped), and `readable` once a metric is read after that. One definition of the fixes, so that
Slack, `check` and `health` name the same ones.

A run that printed start-up lines only (compiling, downloading, indexing) is no run read blind: the agent says
it only past the first-step budget, with `startup_facts`, and its words are about start-up, not about how to
log metrics. Each says the setting that moves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from trainwarden.core.durations import fmt_duration
from trainwarden.core.words import shorten

SOURCE = "reading"  # `source` of the source.status events about whether metrics are read
UNREADABLE = "unreadable"
READABLE = "readable"
NOTICE = "metrics unreadable: "  # starts the agent's heartbeat notice naming the runs it reads blind
SAMPLE_CHARS = 120  # a quoted line is cut to this (masked first); it fits in an anomaly's reason
FORMATS_PAGE = "docs/agent.md (the formats the agent reads)"
LABEL = "UNREADABLE"  # the headline word of a run read blind (Slack, `check`)
STARTUP_LABEL = "NO TRAINING OUTPUT YET"  # ... of a run past its first-step budget with start-up lines only
STARTUP = "only start-up lines"  # begins `startup_facts`: how the words tell the two cases apart
BUDGET_SETTINGS = "agent.unreadable_after_s or agent.unreadable_after_lines"  # what moves the unreadable warning
STARTUP_SETTING = "agent.first_step_budget_s"  # what moves the start-up one
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


def startup_facts(lines: int, seconds: float, quoted: str | None) -> str:
    """The agent's reason for a run past its first-step budget with start-up lines only (fits in 200 chars)."""
    said = f"{STARTUP} for {fmt_duration(seconds)} ({lines} lines), no training step yet"
    return f"{said}, latest `{quoted}`" if quoted else said


def is_startup(facts: str) -> bool:
    return facts.startswith(STARTUP)


def label(facts: str) -> str:
    """The headline word for the agent's reason: a run read blind, or one still in its start-up."""
    return STARTUP_LABEL if is_startup(facts) else LABEL


def unreadable_text(facts: str) -> str:
    """One line for a person: what is wrong, why it matters, what to do, and the setting that moves it."""
    if is_startup(facts):
        return (
            f"no training output from this run yet ({facts}). Still compiling, downloading or indexing? Then let it "
            f"run, and raise {STARTUP_SETTING} in the settings file for a start-up this long; if it should be "
            "training by now, look at what its process is doing"
        )
    return (
        f"trainwarden cannot read this run's metrics ({facts}), so its NaN or divergence goes unseen. Fix: {fixes()}"
        f". Said after {BUDGET_SETTINGS} of such lines"
    )


def notice_advice(notice: str) -> str:
    """What `health` adds under the agent's notice (`metrics unreadable: r1: facts; r2: facts`)."""
    facts = [part.partition(": ")[2] for part in notice.removeprefix(NOTICE).split("; ")]
    said = []
    if not all(is_startup(f) for f in facts):
        said.append(f"trainwarden cannot read their metrics: a NaN goes unseen. Fix: {fixes()}")
    if any(is_startup(f) for f in facts):
        said.append(f"start-up lines only: still compiling or downloading? {STARTUP_SETTING} sets when this is said")
    return "; ".join(said)


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
