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

__all__ = ["FORMATS", "Format", "Metrics", "binary", "holds_numeral", "json_line", "parse_metrics", "parse_number",
           "read_line"]  # fmt: skip

# what a model summary prints (Lightning's table footer, peft's trainable parameters): sizes, not training
MODEL_SUMMARY_RE = re.compile(
    r"^\s*(?:(?:Trainable|Non-trainable|Total|All) params\b|Total estimated model params size|Modules in \w+ mode:"
    r"|Total FLOPs\b|trainable params:.*\ball params\b)"
)


def _model_summary(line: str, stripped: str) -> bool:
    return MODEL_SUMMARY_RE.match(stripped) is not None


# faulthandler's list after a fatal error (CPython 3.10+): `Extension modules: numpy.core._multiarray_umath, ...,
# torch._C._dynamo.eval_frame, ... (total: 52)`, also its tail alone (a long line cut): a count, no metric (it was
# read as `val_total`, `eval_frame` making it an eval)
EXTENSION_MODULES_RE = re.compile(r"^\s*(?:Extension modules: )?[\w.]+(?:, [\w.]+)* \(total: \d+\)\s*$")


def _extension_modules(line: str, stripped: str) -> bool:
    return EXTENSION_MODULES_RE.match(stripped) is not None


@dataclass(frozen=True, slots=True)
class Format:
    """One line format: `hint` is a substring every line of it holds ("" when none), `accepts(line, stripped)` a
    cheap test (a few substring checks), `parse(line)` reads it. The agent reads every line: a line without the
    hint costs one substring test per format (cheaper in CPython than one alternation of all hints: see
    docs/benchmarks.md)."""

    name: str
    hint: str
    accepts: Callable[[str, str], bool]
    parse: Callable[[str], Metrics]
    final: bool = False  # when accepted, its answer stands, even {}
    redrawn: bool = False  # a progress bar: each redraw repeats the last values (agent.bars.fresh)

    @property
    def samples(self) -> tuple[Sample, ...]:
        return SAMPLES.get(self.name, ())


def _rate(line: str) -> bool:
    return "it/s" in line or "s/it" in line


_ANY = lambda line, s: True  # noqa: E731 - the hint says it all

FORMATS: tuple[Format, ...] = (
    Format("python dict", "{'", _ANY, lp.python_dict, final=True),  # also after a bar redraw on the same line
    Format("json", '{"', lambda line, s: s[:2] == '{"', lambda line: json_line(line.lstrip()), final=True),
    Format("fp16 overflow", "", lambda line, s: "loss scale" in line or "overflow on iteration" in line, tl.overflow),
    Format("torchtune bar", "|Loss: ", lambda line, s: _rate(line), lambda line: tl.torchtune_bar(line.lstrip()),
           final=True, redrawn=True),
    Format("ultralytics", "G ", lambda line, s: s[:1].isdigit() and _rate(line), tl.ultralytics, redrawn=True),
    Format("rich bar", "•", lambda line, s: _rate(line), bars.rich_bar, redrawn=True),
    Format("tqdm bar", "/", lambda line, s: _rate(line) or bars.tqdm_shaped(line), bars.progress_bar, final=True,
           redrawn=True),
    Format("iter phrases", ":", lambda line, s: s[:4].lower() in ("iter", "step"),
           lambda line: lp.iter_phrases(line.lstrip())),
    Format("boosting", "]\t", lambda line, s: s[:1] == "[", lp.boosting),
    Format("imagenet meters", "", lambda line, s: s[:7] == "Epoch: " or s[:5] == "Test:" or s[:1] == "*",
           tl.imagenet_meters),
    Format("pipe separated", "|", lambda line, s: " | " in line or s[:1] == "|", lp.pipe_separated),
    Format("caffe", " net output #", _ANY, tl.caffe_output, final=True),
    Format("marian", "Ep. ", lambda line, s: " : Up. " in line, tl.marian, final=True),
    Format("darknet", " avg", lambda line, s: " rate," in line, tl.darknet),
    Format("step: loss", ":", lambda line, s: s[:1].isdigit(), tl.step_loss),
    Format("ultralytics validation", "all ", lambda line, s: s[:4] == "all ", tl.ultralytics_validation, final=True),
    Format("model summary", "params", _model_summary, lambda line: {}, final=True),  # sizes, not training
    Format("model summary modes", " mode:", _model_summary, lambda line: {}, final=True),
    Format("model summary flops", "FLOPs", _model_summary, lambda line: {}, final=True),
    Format("faulthandler modules", "(total: ", _extension_modules, lambda line: {}, final=True),  # a count
)  # fmt: skip
GENERAL = Format("general", "", _ANY, lp.general)
_TABLE = tuple((fmt.hint, fmt.accepts, fmt.parse, fmt.final, fmt) for fmt in FORMATS)  # unpacked: the loop is hot
_FINALS = tuple(entry for entry in _TABLE if entry[3])  # the formats whose answer stands even when empty
_FOUND = re.compile(r"\d|nan|inf", re.IGNORECASE).search  # what every numeral holds (pairs.NUM; `float` reads any
# script's digits, as `\d` matches them)


def holds_numeral(line: str) -> bool:
    """Whether `line` may hold a metric: a digit, or a NaN or Inf word (`nan`, `-inf.`, `Infinity`, `NaN`). A line
    with neither (a sentence, a traceback's header) holds no value: only the formats whose answer stands even when
    empty (`final`) are tried on it, so it is told apart exactly as before, at the cost of one search."""
    return _FOUND(line) is not None


# a terminal's control sequences (colours, `ESC[2K` erase line, `ESC[1A` cursor up): Rich and Keras bars as a
# TTY (tmux, `script`) records them
ANSI_RE = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])")


# what a text log does not hold: U+FFFD (the tailer's stand-in for bytes that are not UTF-8), the C0 controls but
# tab, CR, backspace (Keras bars) and ESC (colours), and DEL; NUL is left out (a log a crash padded with NULs)
NOT_TEXT_RE = re.compile(r"[\x01-\x07\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


def binary(line: str) -> bool:
    """Random bytes in a log (a binary written into it, a disk's garbage) cut into lines at their newlines: more
    than one character in ten not text. Such a line holds no metric: 5 MB of them read as 146 one-letter metrics
    (`s=6`, `p=4`). A real line with one stray byte (a cp1252 dash before `loss=nan`) is still read."""
    if line.isprintable():
        return False
    return len(NOT_TEXT_RE.findall(line)) * 10 > len(line)


def parse_metrics(line: str) -> Metrics:
    """The metrics in one log line, whatever the format; {} when it has none (or cannot be read)."""
    if binary(line):
        return {}
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    try:
        return _read(strip_prefix(line))[0]
    except (ValueError, OverflowError):  # a numeral too long to convert (`iter 999...9:`): not a metrics line
        return {}


def read_line(line: str) -> tuple[Metrics, Format | None]:
    """The metrics in one log line and the format that read them (None when none did)."""
    if binary(line):
        return {}, None
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    try:
        return _read(strip_prefix(line))
    except (ValueError, OverflowError):  # a numeral too long to convert (`iter 999...9:`): not a metrics line
        return {}, None


def _read(line: str) -> tuple[Metrics, Format | None]:
    stripped = line.lstrip()
    if not stripped:
        return {}, None
    if not holds_numeral(line):  # no format finds a value: only a final format's empty answer stands
        for hint, accepts, _parse, _final, fmt in _FINALS:
            if hint in line and accepts(line, stripped):
                return {}, fmt
        return {}, None
    for hint, accepts, parse, final, fmt in _TABLE:
        if hint in line and accepts(line, stripped):
            found = parse(line)
            if found or final:
                return found, fmt
    found = lp.general(line)
    return found, GENERAL if found else None
