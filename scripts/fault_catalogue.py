#!/usr/bin/env python3
"""Write docs/faults.md from the catalogue of fault signatures (faults/), so the doc never drifts:
`python scripts/fault_catalogue.py > docs/faults.md` (tests/unit/test_signatures.py checks it is current)."""

from __future__ import annotations

from trainwarden.faults import STAGES

from trainwarden import faults

HEAD = """# Fault signatures

Every fault line the agent recognises, made from `faults/` by `scripts/fault_catalogue.py` (do not
edit by hand). A signature is one line a framework prints when it fails, declared once with the source that
prints it, the words a message uses, a remedy and real sample lines; the tests run every sample through the
agent's own tagging (tests/unit/test_signatures.py). The policies' `log_pattern` rules name a **tag**
(`tag: oom`); the default policy has one rule per tag (`log-oom`, `log-ecc`, ...), and a rule without a
`remedy:` of its own carries its signature's.

The **stage** says where a line stands in a failure: `cause` (a fault of its own), `unexplained` (a traceback no
signature explains), `collective` (what the other ranks see: a collective timed out), `teardown` (the launcher
taking the job down: SIGTERM to the survivors, ChildFailedError). A line at a later stage than a log anomaly
open now, opened within the hour, folds into it (policies/rootcause.py): the cause's message already says what
happened. A fault anomaly clears only when training goes on (a loss at a later step, or 3 new loss samples): an
unrelated number in the log (`local_rank: 0`) does not clear it.

To add a fault: declare a `Signature` in the module of its family (memory, gpu, distributed, hang, host, signals,
disk, numeric) with its source and at least one real line, regenerate this file, and run the tests
(CONTRIBUTING.md, "A fault signature").

| tag | signature | stage | severity | the message says | source | sample |
|---|---|---|---|---|---|---|
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main() -> None:
    rows = []
    for s in faults.REGISTRY:
        sample = s.samples[0]
        line = sample.line if len(sample.line) <= 160 else sample.line[:157] + "..."
        rows.append(
            f"| `{s.tag}` | `{s.id}` | {STAGES[s.stage]} | {s.severity} | {_cell(sample.said or s.what)} "
            f"| {_cell(s.source.repo)} `{_cell(s.source.path)}` | `{_cell(line)}` ({_cell(sample.seen)}) |"
        )
    remedies = [f"- `{s.id}`: {_cell(s.remedy)}" for s in faults.REGISTRY]
    print(HEAD + "\n".join(rows) + "\n\n## Remedies\n\n" + "\n".join(remedies))


if __name__ == "__main__":
    main()
