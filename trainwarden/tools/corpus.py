"""A corpus of labelled past runs: its MANIFEST.yaml, read and checked with the one YAML reader.

    runs:
    - file: run-17.log            # a training log, or a W&B run directory, relative to the manifest
      label: STOP                 # STOP (doomed) | NOSTOP (healthy) | ANOMALY:<word> (a fault to name)
      stop_by: {line: 812}        # STOP only: the latest useful stop point, {line: N}, {step: N} or {epoch: N}
      useful_stop: loss nan from line 812 on
      gpus: 8                     # optional, for GPU-hours saved (default: --gpus)
      hours: 31.5                 # optional: the run's length; else metric lines --interval apart
      metric_lines: false         # optional: the file holds no metric line (a fault excerpt): none may be read
      part: test                  # optional: dev (default; rules may be tuned on it) | test (held out: never tuned on)

Every problem is reported as `file:line:column: message`, all of them at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from trainwarden.core.yamlfile import Context, Reader, Schema, compose, document_schema, read_text

STOP, NOSTOP, ANOMALY = "STOP", "NOSTOP", "ANOMALY"
LABEL = re.compile(r"^(STOP|NOSTOP|ANOMALY:[a-z0-9_-]+)$")
DEV, TEST = "dev", "test"  # a development part rules may be tuned on, and a held-out test part scored beside it
PART = re.compile(r"^(dev|test)$")
# Free text kept for people (provenance, how a label was decided); read, never judged.
NOTES = ("useful_stop", "why", "source", "license_note", "trimmed", "edited", "doubt")


@dataclass(frozen=True, slots=True)
class StopBy:
    """The latest point at which a STOP is still useful, in the unit the run's output counts in."""

    unit: str  # line | step | epoch
    value: float

    def __str__(self) -> str:
        return f"{self.unit} {self.value:g}"


@dataclass(frozen=True, slots=True)
class CorpusRun:
    file: str  # as written in the manifest
    path: Path
    label: str  # STOP | NOSTOP | ANOMALY:<word>
    stop_by: StopBy | None = None
    gpus: float | None = None
    hours: float | None = None
    interval: float | None = None
    where: str = ""  # manifest:line of the entry
    metric_lines: bool = True  # False: the file holds none (a bare fault excerpt), so zero read is right
    part: str = DEV  # dev | test: the held-out part, labelled before any policy saw it, never tuned on
    framework: str = ""  # the trainer that wrote it (free text: how the corpus's coverage is counted)

    @property
    def kind(self) -> str:
        return self.label.partition(":")[0]

    @property
    def fault(self) -> str | None:
        return self.label.partition(":")[2] or None


def read_manifest(path: Path) -> list[CorpusRun]:
    """The manifest's runs; raises YamlFileError listing every problem (file:line:column)."""
    source = str(path)
    ctx = Context(source=source)
    top = Reader(compose(read_text(path), source), ctx, "the manifest")
    runs = _read(top, path.parent)
    ctx.check()
    return runs


def _read(top: Reader, root: Path) -> list[CorpusRun]:
    runs: list[CorpusRun] = []
    seen: dict[str, str] = {}
    for entry in top.items("runs", "a run", required=True):
        file = entry.string("file", required=True, description="a log file or a W&B run directory, relative")
        label = entry.string("label", required=True, pattern=LABEL, label="label",
                             hint="must be STOP, NOSTOP or ANOMALY:<word> (e.g. ANOMALY:oom)")  # fmt: skip
        sub = entry.section("stop_by", "stop_by")
        line, step = sub.integer("line", minimum=1), sub.integer("step", minimum=0)
        given: dict[str, float | None] = {"line": line, "step": step, "epoch": sub.number("epoch", minimum=0)}
        gpus = entry.number("gpus", positive=True)
        hours = entry.number("hours", positive=True)
        interval = entry.number("interval", positive=True)
        metric_lines = entry.boolean("metric_lines", default=True)
        part = entry.string("part", default=DEV, pattern=PART, label="part",
                            hint="must be dev (rules may be tuned on it) or test (held out)") or DEV  # fmt: skip
        framework = entry.string("framework", description="the trainer that wrote the file") or ""
        for note in NOTES:
            entry.string(note)
        sub.finish()
        entry.finish()
        stop_by = _stop_by(entry, sub, given, label)
        if file is None or label is None:
            continue
        path = root / file
        if file in seen:
            entry.fail("file", f"{file} is listed twice (first at {seen[file]})")
        elif not path.exists() and not entry.ctx.probe:
            entry.fail("file", f"no such file or directory: {path}")
        elif stop_by is not None and stop_by.unit == "line" and path.is_dir():
            sub.fail("line", "a W&B run directory has no lines: give stop_by as {step: N} or {epoch: N}")
        seen.setdefault(file, entry.ctx.where(entry.node))
        runs.append(CorpusRun(file, path, label, stop_by, gpus, hours, interval, entry.ctx.where(entry.node),
                              metric_lines, part, framework))  # fmt: skip
    top.finish()
    return runs


def _stop_by(entry: Reader, sub: Reader, given: dict[str, float | None], label: str | None) -> StopBy | None:
    if entry.ctx.probe or label is None:
        return None
    set_ = {unit: value for unit, value in given.items() if value is not None}
    if label != STOP:
        if sub.present:
            entry.fail("stop_by", f"stop_by is for STOP runs only (this one is {label})")
        return None
    if len(set(sub.fields) & set(given)) != 1:
        where = "stop_by" if sub.present else "label"
        entry.fail(where, "a STOP run needs stop_by with one of line, step or epoch, e.g. stop_by: {line: 42}")
        return None
    if not set_:
        return None  # its value is wrong, and said so
    ((unit, value),) = set_.items()
    return StopBy(unit, value)


def manifest_schema() -> Schema:
    top = Reader(None, Context(source="schema", probe=True), "the manifest")
    _read(top, Path("."))
    return document_schema(
        "trainwarden corpus manifest", top, "MANIFEST.yaml: labelled past runs to score a policy on."
    )
