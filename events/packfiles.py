"""An evidence pack's chart and report, kept in Redis for a while for readers on other machines.

The worker writes the pack to its own disk; the bot, which uploads the chart to Slack, may run
elsewhere (another host, a container). So the worker also puts the chart and the report under
`tw:{run}:pack:<event id>` (the STOP decision's) for `TTL_S` (long enough for a Slack outage over a weekend), when
together they are at most `MAX_BYTES`; the bot reads them from there, or from the pack directory
when it can read that (same machine or a shared disk). Best effort on both sides: a chart that
is not there costs its upload, never a message. A critical anomaly's chart is kept the same way,
under the `anomaly.opened` event's id.
"""

from __future__ import annotations

from collections.abc import Mapping

from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, field_map, hash_fields

CHART = "chart.png"
REPORT = "report.md"
STACKS = "stacks.txt"  # a stalled run's process dump (workers/dump_request.py)
TTL_S = 7 * 24 * 3600
MAX_BYTES = 2 * 1024 * 1024  # a chart is some 30 KB; a pack this large is not worth a phone's download


def keep(client: Client, keys: Keys, *, run: str, event_id: str, files: Mapping[str, bytes]) -> bool:
    """Store the files for `TTL_S`; False (nothing stored) when they are over `MAX_BYTES` or none."""
    if not files or sum(len(data) for data in files.values()) > MAX_BYTES:
        return False
    key = keys.pack_files(run, event_id)
    with redis_errors("keep an evidence pack's files", run=run):
        pipe = client.pipeline(transaction=True)
        pipe.hset(key, mapping=field_map(files))
        pipe.expire(key, TTL_S)
        pipe.execute()
    return True


def read(client: Client, keys: Keys, *, run: str, event_id: str) -> dict[str, bytes]:
    """The files kept under `event_id` (a STOP decision's, an anomaly's), by name; {} when none are (expired,
    too large, never kept)."""
    with redis_errors("read an evidence pack's files", run=run):
        raw = hash_fields(client.hgetall(keys.pack_files(run, event_id)))
    return {name.decode(): data for name, data in raw.items()}
