"""Pure: the phase a log line says the run entered (an eval, a checkpoint save) or left (a save finished).

The stall rule (policies/kinds/stall.py) judges a run's silence by the phase it is in: an eval or a save may
take many times a step's gap and is no hang. The frameworks print these lines themselves; the strings are theirs
(site-packages of transformers 5, lightning 2, keras 3, accelerate 1):

- transformers `Trainer.evaluation_loop`: `logger.info(f"\\n***** Running {description} *****")` with
  description `Evaluation`; `Trainer._save_checkpoint` -> `logger.info(f"Saving model checkpoint to {output_dir}")`
  (both at INFO: shown with `log_level="info"`; the default WARNING hides them, and its eval bar has no
  description, so an HF eval is then known by its `eval_*` values only);
- lightning `TQDMProgressBar`: the bar's description `Validation` and then `Validation DataLoader 0`
  (`progress_bar.validation_description`, `tqdm_progress.on_validation_batch_start`); the Rich bar's too;
  `ModelCheckpoint._update_best_and_save`: `Epoch {epoch:d}, global step {step:d}: {monitor!r} reached ...,
  saving model to {filepath!r} as top {k}`, printed before the save;
- keras `ModelCheckpoint`: `Epoch {n}: {monitor} improved from ... saving model to {filepath}`,
  `Epoch {n}: saving model to {filepath}` before, `Epoch {n}: finished saving model to {filepath}` after;
- accelerate `Accelerator.save_state`: `Saving current state to {output_dir}` first and, last of
  `save_accelerator_state`, `Random states saved in {output_states_file}`;
- nnU-Net (v1 `network_trainer.save_checkpoint`): `saving checkpoint...`, then `done, saving took 2.62 seconds`;
- plain loops: `Evaluating...`, `eval ...`, `validating`, a tqdm bar described `eval`/`valid`/`test`,
  `saving checkpoint ...`, `checkpoint saved PATH`, `saved checkpoint to PATH`.

A Lightning `Sanity Checking` bar is no eval phase: it runs before the first step, under the first step's budget.
"""

from __future__ import annotations

import re

from trainwarden.agent.prefixes import strip_prefix

EVAL = "eval"
SAVE = "save"
TRAIN = "train"

# a save finished: checked first (`finished saving model to` also says `saving model`)
SAVE_END_RE = re.compile(
    r"\bfinished saving\b|\bcheckpoint(?:s)? (?:was |were |is )?saved\b|\bsaved (?:the )?(?:model )?checkpoint"
    r"|\bRandom states saved in\b|\bsave_state (?:done|finished|complete)|\bsaving took\b|\bdone,? saving\b",
    re.IGNORECASE,
)
SAVE_START_RE = re.compile(
    r"\bsaving (?:the )?(?:model )?(?:checkpoint|ckpt)|\bsaving model(?: weights)? to\b|\bSaving current state to\b"
    r"|\bsave_state\(",
    re.IGNORECASE,
)
# a line that begins an eval: HF's banner, a plain loop's word at the line's start, a bar described as one
EVAL_START_RE = re.compile(
    r"\*{5} Running Evaluation \*{5}"
    r"|^\s*(?:\[?(?:eval(?:uat(?:e|ing|ion))?|validat(?:e|ing|ion)|running (?:eval\w*|validation))\b)(?![=:]\s*\d)",
    re.IGNORECASE,
)
# an eval line that says the eval is over (`Evaluation done`, `eval finished in 41s`): its end, not its start
EVAL_END_RE = re.compile(r"\b(?:done|finished|complete[ds]?|ended|took)\b", re.IGNORECASE)
# a progress bar's description (before its `:` and percentage, or the Rich bar's line) naming held-out data
BAR_DESC_RE = re.compile(r"^\s*([A-Za-z][\w ./-]{0,60}?)(?::\s*(?:\d+%)?\s*\||\s+[━╸╺╾╼]|\s+\d+%\|)", re.IGNORECASE)
EVAL_WORD_RE = re.compile(r"\b(?:eval\w*|valid\w*|val|test\w*)\b", re.IGNORECASE)
SANITY_RE = re.compile(r"\bsanity", re.IGNORECASE)  # Lightning's `Sanity Checking`, `Validation sanity check`


def phase_of(text: str) -> tuple[str, bool] | None:
    """(phase, started) a line says: ("eval", True), ("save", True), (phase, False: it is done); None for
    any other line. A line's own metrics are read before this (agent.logsource): a `val_loss` line is an eval's
    result, no phase line."""
    line = strip_prefix(text)
    if SAVE_END_RE.search(line):
        return SAVE, False
    if SAVE_START_RE.search(line):
        return SAVE, True
    if SANITY_RE.search(line):
        return None
    if EVAL_START_RE.search(line):
        return (EVAL, False) if EVAL_END_RE.search(line) else (EVAL, True)
    bar = BAR_DESC_RE.match(line)
    return (EVAL, True) if bar is not None and EVAL_WORD_RE.search(bar.group(1)) else None


class PhaseTracker:
    """One run's phase as its log says it: a phase line counts only when it changes the phase (an eval bar is
    redrawn many times a second: one event), and a training step at a new position ends an eval or a save."""

    def __init__(self) -> None:
        self.phase = TRAIN
        self._since_step: object = None  # the step position when the phase began

    def line(self, text: str) -> tuple[str, bool] | None:
        found = phase_of(text)
        if found is None:
            return None
        phase, started = found
        if started == (self.phase == phase):
            return None  # already in it, or the end of a phase the run is not in
        self.phase = phase if started else TRAIN
        return found

    def step(self, position: object) -> None:
        """A metric line at `position`: a new one ends the phase (a redraw of the last bar does not)."""
        if self.phase == TRAIN:
            self._since_step = position
        elif position != self._since_step:
            self.phase, self._since_step = TRAIN, position
