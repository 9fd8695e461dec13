"""One run's sidecar metrics file as `metric` events: the names and steps the training process gave.

The training process appends one JSON object per line (`trainwarden.log`, or the callbacks in
`trainwarden.sdk.integrations`; the file's contract is `trainwarden.core.sidecar`). Lines are followed like
the log (`LogTail`: complete lines only, truncation and rotation seen), so ids are deterministic:

| events | producer | seq |
|---|---|---|
| `metric` | `<host>/sidecar/<run>/g<generation>` | byte offset of the line's end |

Once the file has given a line the sidecar is *active*: it is the run's metrics source and the
log's metric lines and W&B rows are no longer published (agent.arbiter). A line that is not a JSON
object of numbers gives nothing; a value the events refuse is left out (`SourceErrors`).
"""

from __future__ import annotations

from pathlib import Path

from trainwarden.agent.formats import json_line
from trainwarden.agent.isolation import SourceErrors
from trainwarden.agent.state import LogPosition
from trainwarden.agent.tail import LogTail
from trainwarden.core.metrics import normalise, without_problems
from trainwarden.events import types as t
from trainwarden.events.envelope import Event, make_event


class RunSidecar:
    def __init__(self, *, run: str, host: str, path: Path, position: LogPosition | None = None,
                 errors: SourceErrors | None = None) -> None:  # fmt: skip
        pos = position or LogPosition()
        self.run = run
        self.host = host
        self.path = path
        self.tail = LogTail(path, offset=pos.offset, generation=pos.generation, inode=pos.inode)
        self.errors = errors or SourceErrors()
        self.active = pos.offset > 0  # a restart resumes a sidecar that was already the source
        self.lines_read = 0

    def position(self) -> LogPosition:
        return LogPosition(offset=self.tail.offset, generation=self.tail.generation, inode=self.tail.inode)

    def poll(self, now: float) -> list[Event]:
        out: list[Event] = []
        for line in self.tail.poll():
            self.lines_read += 1
            if not line.text.strip():
                continue
            self.active = True
            try:
                metrics, refused = without_problems(normalise(json_line(line.text.strip())))
            except Exception as exc:  # this line only
                self.errors.failed(f"{self.run} sidecar", exc, detail=f"the line at byte {line.start} is skipped")
                continue
            if refused:
                self.errors.refused_values(f"{self.run} sidecar", refused)
            if metrics:
                out.append(make_event(t.METRIC, run=self.run, host=self.host, data=metrics, ts=now, seq=line.end,
                                      producer=f"{self.host}/sidecar/{self.run}/g{line.generation}"))  # fmt: skip
        return out
