"""What a fault line says, in the few words a message needs: pure functions over one log line.

`describe(tag, line)` turns the line that matched a fault tag (faults/logtags.py) into the specifics
a person acts on, from the catalogue of fault signatures (faults/): how much memory the OOM
asked for, which collective timed out after how long on which rank, which signal killed a worker, that
the disk was full at a checkpoint save. `remedy(tag, line)` is that signature's remedy. None where no
signature matches: the caller quotes the line itself (`quote`).
"""

from __future__ import annotations

from trainwarden.faults import signature_of

MAX_QUOTE = 500  # characters of the matched line kept in the anomaly's values
SHOWN = 200  # characters of it shown in a reason


def describe(tag: str, line: str, text: str = "") -> str | None:
    """The fault in a few words, from the line that matched `tag` and the event's whole text (a traceback's
    frames); None when no signature of `tag` matches the line."""
    signature = signature_of(line, tag)
    return None if signature is None else signature.words(line, text)


def remedy(tag: str, line: str) -> str | None:
    """What to do about the fault the line reports, or None when no signature of `tag` matches it."""
    signature = signature_of(line, tag)
    return None if signature is None else signature.remedy


def quote(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
