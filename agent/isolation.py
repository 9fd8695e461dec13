"""Failures of one line, one source or one run, kept to themselves: counted, the last one kept, logged once.

The agent watches every run on its host: a line no parser can read, a log it may not open or a W&B
file it cannot decode must cost that line or that source, never the agent (and with it every other
run's watching). Each kind of failure (where, exception type) is logged once, not once per poll; the
counts and the last failure's text go into the agent's heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

log = logging.getLogger(__name__)

MAX_TEXT = 300  # characters of a failure's text kept for the heartbeat
_MAX_LOGGED = 1000  # kinds remembered as already logged (then every failure is logged again)


class SourceErrors:
    def __init__(self) -> None:
        self.count = 0  # failures of a line or a source, since the agent started
        self.refused = 0  # values left out of metric events (`step: -1`, a numeral that overflows)
        self.last: str | None = None
        self._logged: set[tuple[str, str]] = set()

    def failed(self, where: str, exc: BaseException, *, detail: str = "") -> None:
        """`where` (`exp01 log`, `exp01 wandb`, ...) failed with `exc`; the agent goes on without it this time."""
        self.count += 1
        self.last = f"{where}{f' ({detail})' if detail else ''}: {type(exc).__name__}: {exc}"[:MAX_TEXT]
        if self._first(where, type(exc).__name__):
            log.error("%s failed (it is skipped; the agent goes on; logged once): %s", where, self.last,
                      exc_info=exc)  # fmt: skip

    def refused_values(self, where: str, problems: Sequence[str]) -> None:
        self.refused += len(problems)
        if problems and self._first(where, "refused"):
            log.warning("%s: values left out of a metric event (logged once): %s", where, "; ".join(problems))

    def heartbeat(self) -> dict[str, int | str | None]:
        return {"source_errors": self.count, "last_source_error": self.last, "values_refused": self.refused}

    def _first(self, where: str, kind: str) -> bool:
        key = (where, kind)
        if key in self._logged:
            return False
        if len(self._logged) < _MAX_LOGGED:
            self._logged.add(key)
        return True
