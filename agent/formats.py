"""Pure: the metrics in one log line, read through one table of formats (`FORMATS`) and then the general
pair reader. Each format is a cheap test on the line, a parser, and real sample lines with what they hold;
the samples are run as tests (tests/unit/test_formats_table.py), so a new format is one entry and its samples.
docs/agent.md lists every format with its provenance; the prefixes stripped first are in agent.prefixes.

Formats are tried in order: the first whose test accepts the line and whose parser finds pairs wins; a
`final` format's answer stands even when empty (a Hugging Face dict without numbers is no other format).
A line no format reads goes to the general reader (agent.line_parsers.general): `key=value`, `key: value`
or `name value` pairs (`step 10 loss 2.31`, `train loss 2.3 | val loss 2.5` through the `|` format), quoted
numbers, percent signs and units, with the position and phase the text before them names (`Epoch [3][50/1749]`,
`Test:`: agent.trainer_lines.with_head).

Values `nan`, `inf` and `-inf` in any case are kept: they are what must not be missed. A numeral too large
for a float (`1e400`) is not an Inf but an overflow: that value is left out (the rest of the line is kept),
and so is an integer too long to convert. A line no parser can read (JSON nested thousands deep) has no
metrics; no line makes a parser raise. A model summary (`Trainable params: 5`) has no metrics.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from trainwarden.agent import bars
from trainwarden.agent import line_parsers as lp
from trainwarden.agent import trainer_lines as tl
from trainwarden.agent.format_samples import SAMPLES, Sample
from trainwarden.agent.line_parsers import json_line
from trainwarden.agent.pairs import Metrics, parse_number
from trainwarden.agent.prefixes import strip_prefix

__all__ = ["FORMATS", "Format", "Metrics", "json_line", "parse_metrics", "parse_number", "read_line"]

# what a model summary prints (Lightning's table footer, peft's trainable parameters): sizes, not training
MODEL_SUMMARY_RE = re.compile(
    r"^\s*(?:(?:Trainable|Non-trainable|Total|All) params\b|Total estimated model params size|Modules in \w+ mode:"
    r"|Total FLOPs\b|trainable params:.*\ball params\b)"
)
_BOX = frozenset("┏┃┡│└┌├╭╰━┗┣")  # Rich's table borders: a model summary's rows and header


def _model_summary(line: str) -> bool:
    return line[:1] in _BOX or (("params" in line or "mode:" in line or "FLOPs" in line) and
                                MODEL_SUMMARY_RE.match(line) is not None)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Format:
    """One line format: `accepts(line, stripped)` is a cheap test (a few substring checks), `parse(line)` reads it."""

    name: str
    accepts: Callable[[str, str], bool]
    parse: Callable[[str], Metrics]
    final: bool = False  # when accepted, its answer stands, even {}
    redrawn: bool = False  # a progress bar: each redraw repeats the last values (agent.bars.fresh)

    @property
    def samples(self) -> tuple[Sample, ...]:
        return SAMPLES.get(self.name, ())


def _rate(line: str) -> bool:
    return "it/s" in line or "s/it" in line


FORMATS: tuple[Format, ...] = (
    Format("model summary", lambda line, s: _model_summary(s), lambda line: {}, final=True),
    Format("python dict", lambda line, s: "{'" in line, lp.python_dict, final=True),  # also after a bar redraw
    Format("json", lambda line, s: s[:2] == '{"', lambda line: json_line(line.lstrip()), final=True),
    Format("fp16 overflow", lambda line, s: "loss scale" in line or "overflow on iteration" in line, tl.overflow),
    Format("torchtune bar", lambda line, s: "|Loss: " in line and _rate(line),
           lambda line: tl.torchtune_bar(line.lstrip()), final=True, redrawn=True),
    Format("ultralytics", lambda line, s: s[:1].isdigit() and "G " in line and _rate(line), tl.ultralytics,
           redrawn=True),
    Format("rich bar", lambda line, s: "•" in line and _rate(line), bars.rich_bar, redrawn=True),
    Format("tqdm bar", lambda line, s: _rate(line), bars.progress_bar, final=True, redrawn=True),
    Format("iter phrases", lambda line, s: s[:4].lower() in ("iter", "step") and ":" in line,
           lambda line: lp.iter_phrases(line.lstrip())),
    Format("boosting", lambda line, s: s[:1] == "[" and "]\t" in line, lp.boosting),
    Format("pipe separated", lambda line, s: " | " in line or s[:1] == "|", lp.pipe_separated),
    Format("caffe", lambda line, s: " net output #" in line, tl.caffe_output, final=True),
    Format("step: loss", lambda line, s: s[:1].isdigit() and ":" in line, tl.step_loss),
    Format("ultralytics validation", lambda line, s: s[:4] == "all ", tl.ultralytics_validation, final=True),
)  # fmt: skip
GENERAL = Format("general", lambda line, s: True, lp.general)


def parse_metrics(line: str) -> Metrics:
    """The metrics in one log line, whatever the format; {} when it has none (or cannot be read)."""
    return read_line(line)[0]


def read_line(line: str) -> tuple[Metrics, Format | None]:
    """The metrics in one log line and the format that read them (None when none did)."""
    try:
        return _read(strip_prefix(line))
    except (ValueError, OverflowError):  # a numeral too long to convert (`iter 999...9:`): not a metrics line
        return {}, None


def _read(line: str) -> tuple[Metrics, Format | None]:
    stripped = line.lstrip()
    if not stripped:
        return {}, None
    for fmt in FORMATS:
        if fmt.accepts(line, stripped):
            found = fmt.parse(line)
            if found or fmt.final:
                return found, fmt
    found = lp.general(line)
    return found, GENERAL if found else None
