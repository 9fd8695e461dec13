"""Which entries of a run's log someone still needs: the bound an archive may not pass.

Trimming a log's head is safe only for entries every reader is done with:
- the workers read strictly after their checkpoint's `after`, and a pending action re-reads the
  entry that asked for it (workers/actions.py);
- the notifier reads strictly after its checkpoint's `after` (bot/notifier.py);
- a feed entry a consumer group has not acknowledged (pending, or not delivered yet) will make its
  consumer read the run from that entry's first id, checkpoint or not.
Each becomes a `Hold`; the archive stops at the tightest one and says which it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from trainwarden.events.archive_state import checkpoint_hashes, unfinished_feed_entries
from trainwarden.events.errors import DecodeError
from trainwarden.events.feed import parse_feed_entry
from trainwarden.events.keys import Keys
from trainwarden.events.redis_types import Client
from trainwarden.events.sids import sid_key
from trainwarden.events.store import next_id

NOTHING = "0-0"  # below every stream id: a hold here lets nothing go


@dataclass(frozen=True, slots=True)
class Hold:
    """Entries up to `sid` (inclusive) or before it (not inclusive) may be archived, for `who`'s sake."""

    sid: str
    inclusive: bool
    who: str
    why: str

    @property
    def bound(self) -> str:
        """The XRANGE end for the entries this hold lets go."""
        return self.sid if self.inclusive else next_id(self.sid)

    def order(self) -> tuple[tuple[int, int], int]:
        return sid_key(self.sid), int(self.inclusive)


def tightest(holds: Iterable[Hold]) -> Hold | None:
    """The hold that lets the fewest entries go; None when nobody holds anything."""
    return min(holds, key=Hold.order, default=None)


def checkpoint_holds(worker: dict[bytes, bytes], notifier: dict[bytes, bytes]) -> list[Hold]:
    """Pure: holds from the workers' checkpoint hash (`after`, `pending`) and the notifier's (`after`)."""
    holds: list[Hold] = []
    if worker:
        after = worker.get(b"after", b"").decode()
        holds.append(
            Hold(after, True, "the workers", f"the workers have evaluated the log up to {after} (their checkpoint)")
            if after
            else Hold(NOTHING, True, "the workers", "the workers have a checkpoint but have evaluated nothing yet")
        )
        for action in json.loads(worker.get(b"pending", b"[]") or b"[]"):
            sid = action.get("sid")
            if isinstance(sid, str):
                why = f"a pending {action.get('kind')} action of the workers re-reads entry {sid}"
                holds.append(Hold(sid, False, "the workers", why))
    if notifier:
        after = notifier.get(b"after", b"").decode()
        why = f"the notifier has read the log up to {after} (its checkpoint)" if after else "the notifier read nothing"
        holds.append(Hold(after or NOTHING, True, "the notifier", why))
    return holds


def read_checkpoint_holds(client: Client, keys: Keys, run: str) -> list[Hold]:
    return checkpoint_holds(*checkpoint_hashes(client, keys, run))


def read_feed_holds(client: Client, keys: Keys) -> dict[str, Hold]:
    """Per run, the earliest entry a feed entry not yet acknowledged by some consumer group points at.

    One pass over what each group has not finished: its pending entries and those after its read
    position (the dispatcher trims the feed below both, so this is usually short).
    """
    holds: dict[str, Hold] = {}
    for group, fid, fields, state in unfinished_feed_entries(client, keys):
        try:
            entry = parse_feed_entry(fid, fields)
        except DecodeError:  # the dispatcher dead-letters a garbled entry; it points at nothing
            continue
        why = f"feed entry {fid} ({entry.first}..{entry.last}) is {state} by consumer group '{group}'"
        hold = Hold(entry.first, False, f"consumer group '{group}' of the feed", why)
        if entry.run not in holds or hold.order() < holds[entry.run].order():
            holds[entry.run] = hold
    return holds
