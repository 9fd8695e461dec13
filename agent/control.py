"""Reading the host's control stream (message format in agent.watch)."""

from __future__ import annotations

import logging

from trainwarden.agent.errors import ControlMessageError
from trainwarden.agent.watch import ControlMessage, parse_control
from trainwarden.events.control import read_control
from trainwarden.events.redis_types import Client

log = logging.getLogger(__name__)

READ_COUNT = 100


class ControlReader:
    """Plain XREAD after the last applied entry (kept in the agent's state file): one agent per host
    reads its stream, so no consumer group is needed, and a restarted agent picks up where it was."""

    def __init__(self, client: Client, key: str) -> None:
        self.client = client
        self.key = key

    def read(self, after: str) -> list[tuple[str, ControlMessage | None]]:
        """Entries after stream id `after`, oldest first; a malformed one comes back as None (logged)."""
        out: list[tuple[str, ControlMessage | None]] = []
        for raw_id, fields in read_control(self.client, self.key, after, count=READ_COUNT):
            sid = raw_id.decode()
            try:
                out.append((sid, parse_control(fields)))
            except ControlMessageError as exc:
                log.warning("skipping control message %s on %s: %s", sid, self.key, exc)
                out.append((sid, None))
        return out
