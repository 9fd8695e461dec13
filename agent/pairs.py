"""Pure: `name -> number` pairs inside a piece of a log line (`key=value`, `key: value`, `many words value`),
the pieces every format parser in agent.formats and agent.trainer_lines is built from."""

from __future__ import annotations

import re
from collections.abc import Iterable

from trainwarden.core.jsonload import float_literal
from trainwarden.core.metrics import EVAL_PREFIXES, TRAIN_PREFIXES, canonical, fold, is_known

Metrics = dict[str, float | int]

# `nan.0`, `inf.0`, `-inf.`: Lightning's TQDM bar pads every float of its postfix to five characters, words too
NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?:nan|inf(?:inity)?)(?:\.0*)?)"
KEY = r"[A-Za-z_][\w./-]*"
# `key=value`, and `key: value` (a timestamp's `12:30:45` is not a key: keys start with a letter).
# A value ends at a space, a comma, ']' or the end: `4,000` (a count with a thousands separator)
# and `12:30` are not metrics.
KV_RE = re.compile(rf"(?<![\w/.-])({KEY})\s*=\s*({NUM})(?![\w.]|,\d)", re.IGNORECASE)
COLON_RE = re.compile(rf"(?<![\w/.-])({KEY}):\s*({NUM})(%?)(?![\w.:-]|,\d)", re.IGNORECASE)
# one piece of a separated line that is a name of one or more words and a number, with an optional unit:
# `lm loss: 2.504220E+00`, `elapsed time per iteration (ms): 4247.9`, `Train loss 3.361`, `Peak mem 8.104 GB`
PHRASE_RE = re.compile(
    r"^\s*([A-Za-z_][\w./()%-]*(?: [A-Za-z_(][\w./()%-]*){0,6}?)"  # the name: up to seven words
    rf"(?:\s*[:=]\s*|\s+)({NUM})\s*(%|ms|s|GB|MB|GiB|MiB)?\s*$",
    re.IGNORECASE,
)
# `name value` with only blanks between (`step 10 loss 2.31`, `train loss 2.3`, `acc 45.3%`): a name of up to three
# words, none of them a word of a sentence (`at step 100` is `step 100`), the number perhaps quoted
_WORD = r"(?!(?:at|to|of|in|on|for|from|by|with|and|or|is|are|was|the|a|an|after|every|than|per)\b)[A-Za-z_][\w./-]*"
SPACED_RE = re.compile(
    rf"(?<![\w./'-])((?:{_WORD}[ \t]+){{0,2}}?{_WORD})[ \t]+'?({NUM})'?(%|ms|s)?(?![\w.:/-]|,\d)", re.IGNORECASE
)


# a word every name `is_known` accepts holds (a loss, an accuracy, a perplexity, a norm, a held-out metric, tokens,
# an error or Lua Torch's `Err` loss),
# looked for in the lower-cased line (substring tests cost less than any regex alternation)
def _measured_word(low: str) -> bool:
    return ("loss" in low or "acc" in low or "ppl" in low or "perplex" in low or "norm" in low or "val" in low
            or "test" in low or "tok" in low or "throughput" in low or "overflow" in low or "err" in low)  # fmt: skip


# words of a sentence, not names of metrics: `setting loss scale to: 64.0`, `using: 0 TPU cores`
PROSE = frozenset({"to", "of", "at", "by", "for", "from", "in", "on", "with", "and", "or", "is", "are", "was", "be",
                   "using", "than", "as", "per", "into", "after", "before", "when"})  # fmt: skip

UNIT_SUFFIX = {"ms": "_ms", "s": "_s", "gb": "_gb", "gib": "_gb", "mb": "_mb", "mib": "_mb"}


def parse_number(text: str) -> float | int:
    """`12` -> 12, `3e-4` -> 0.0003; also `nan`, `-nan`, `inf`, `Infinity` in any case.

    Raises ValueError for a numeral that overflows a float (`1e400`) or an integer too long to convert."""
    return int(text) if text.lstrip("+-").isdigit() else float_literal(_unpadded(text))


def _unpadded(text: str) -> str:
    """`nan.0` -> `nan`, `-inf.` -> `-inf` (a padded word); any other numeral as it is."""
    return text.rstrip("0").rstrip(".") if text[-1:] in ".0" and ("n" in text or "N" in text) else text


def numbers(pairs: Iterable[tuple[str, str]]) -> Metrics:
    """`parse_number` of each value (inlined: the agent parses every value of every line)."""
    out: Metrics = {}
    for key, value in pairs:
        try:
            if value.lstrip("+-").isdigit():
                out[key] = int(value)
                continue
            number = float(_unpadded(value))
        except ValueError:
            continue  # an integer too long to convert: this value only is left out
        if number - number != 0.0 and "n" not in value and "N" not in value:
            continue  # Inf from an overflowing numeral (`1e400`), not a printed `inf`: left out
        out[key] = number
    return out


def _kept(metrics: Metrics) -> Metrics:
    """Less what is printed beside metrics but never one: Lightning's run version, a time left (`eta: 2 days`)."""
    if "v_num" in metrics:  # two lookups cost less than filtering every pair
        del metrics["v_num"]
    if "eta" in metrics:
        del metrics["eta"]
    return metrics


def key_value(text: str) -> Metrics:
    return _kept(numbers(KV_RE.findall(text)))


def colon(text: str) -> Metrics:
    """`key: value` pairs; a name printed twice is told apart by the word before each (`qualified`)."""
    found = COLON_RE.findall(text)
    if len({key for key, _value, _pct in found}) < len(found):
        return _kept(numbers(qualified(text, COLON_RE)))
    return _kept(numbers((key, value) for key, value, _pct in found))


# the one word right before a name (`D ` in `[D loss: 0.58]`), a qualifier when the name is printed twice
QUALIFIER_RE = re.compile(r"(?<![\w./-])([A-Za-z][\w-]*) $")


def qualified(text: str, pairs: re.Pattern[str]) -> list[tuple[str, str]]:
    """The pairs of a line that prints one name twice, each repeated name with the word before it: PyTorch-GAN's
    `[D loss: 0.58] [G loss: 0.71]` is `D loss` and `G loss` (two losses; read as one `loss`, the D loss was
    dropped and a NaN in it alone missed). A repeat with no such word, a word of a sentence, or a phase word
    (`train loss: 2.3, val loss: 2.5`: a role, `_phase`) keeps its name, and the last value wins as before."""
    found = list(pairs.finditer(text))
    counts: dict[str, int] = {}
    for match in found:
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    out: list[tuple[str, str]] = []
    for match in found:
        key = match.group(1)
        word = QUALIFIER_RE.search(text, 0, match.start()) if counts[key] > 1 else None
        if word is not None and word.group(1).lower() not in PROSE and not _phase(word.group(1)):
            key = f"{word.group(1)} {key}"
        out.append((key, match.group(2)))
    return out


def _phase(word: str) -> bool:
    """A word that names the data (`train`, `val`, `test`): which data a value was measured on is its role, read
    by the position and role readers (agent.trainer_lines), not a name of its own."""
    return (fold(word) + "_").startswith((*TRAIN_PREFIXES, *EVAL_PREFIXES, "test"))


def spaced(text: str) -> Metrics:
    """`name value` pairs separated by blanks only, when one of them is a measurement the vocabulary knows
    (`events.metrics.is_known`): blanks alone are weak evidence, and prose has numbers too (`shard 5`)."""
    if not _measured_word(text.lower()):
        return {}  # no name in it can be a known measurement: the usual prose line costs one search
    out: Metrics = {}
    for name, value, unit in SPACED_RE.findall(text):
        try:
            out[f"{name}{UNIT_SUFFIX[unit.lower()]}" if unit and unit != "%" else name] = parse_number(value)
        except ValueError:
            continue
    if not out or not any(is_known(canonical(name)) for name in out):
        return {}
    return _kept(out)


def phrase(piece: str) -> tuple[str, float | int] | None:
    """The one `name value` pair a piece holds (`Learning Rate 1.000e-05`, `lm loss: 2.5E+00`), or None.

    A unit after the number goes into the name (`Val took 57.861s` -> `Val took_s`), since `s` and `ms`
    differ by a thousand."""
    found = PHRASE_RE.match(piece)
    if found is None:
        return None
    name, unit = found.group(1).strip(), found.group(3)
    try:
        value = parse_number(found.group(2))
    except ValueError:
        return None
    return (f"{name}{UNIT_SUFFIX[unit.lower()]}" if unit and unit != "%" else name), value


def phrases(pieces: Iterable[str]) -> Metrics:
    return dict(pair for piece in pieces if (pair := phrase(piece)) is not None)


def prefixed(metrics: Metrics, prefix: str, keep: frozenset[str]) -> Metrics:
    """Validation metrics under names that say so: `loss` -> `val_loss`; the names in `keep` (positions) and
    names that already say it (`valid_loss`, `eval_acc`, `test_loss`, Megatron's `lm loss value`) stay as they are."""
    out: Metrics = {}
    for name, value in metrics.items():
        low = name.lower()
        said = low in keep or low.startswith(("val", "eval", "test")) or canonical(name).startswith("val_")
        out[name if said else f"{prefix}{name}"] = value
    return out
