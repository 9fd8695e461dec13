"""The agent control stream of a host: messages the launch, the CLI and the workers send to its agent.

One plain stream per host (`Keys.agent_control`), read with XREAD by the one agent there; message
formats live in agent/watch.py. Redis errors come back as trainwarden's (events/redis_errors.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, Entry, field_map, stream_reads


def send_control(
    client: Client, keys: Keys, host: str, message: Mapping[str, str], /, *, what: str, **context: Any
) -> str:
    """Append `message` to `host`'s control stream; its stream id (`what` says what for, in an error)."""
    with redis_errors(what, **context):
        return cast(bytes, client.xadd(keys.agent_control(host), field_map(message))).decode()


def read_control(client: Client, key: str, after: str, *, count: int) -> list[Entry]:
    """Up to `count` entries of the control stream `key` after stream id `after`, oldest first."""
    with redis_errors("read the agent control stream"):
        reply = stream_reads(client.xread({key: after}, count=count))
    return [entry for _key, entries in reply for entry in entries]
