"""The stop breaker's one Slack message, in Redis: which episode it is, where it was posted, the runs it lists.

    tw:breaker:notice   JSON {episode, channel, ts, runs: {run: held}, closed}

The notifier (bot/breaker_notice.py) writes it at each `stop.held` (a new episode when none is open), the
Release / Cancel buttons close it. `close` is one Lua script, so that two people clicking at once do not both
act: the first click closes the episode, the second finds it closed. An entry that does not read as JSON is
taken for none (a new message is posted: nothing malformed drives a stop).
"""

from __future__ import annotations

import json
from typing import Any

from redis.client import Pipeline
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client, bytes_value

# KEYS[1] the notice; ARGV episode, who closes it. Returns the notice as it was before, or nil when it is not
# that episode's or was closed already.
_CLOSE = """
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local notice = cjson.decode(raw)
if notice['episode'] ~= ARGV[1] or notice['closed'] then return nil end
notice['closed'] = ARGV[2]
redis.call('SET', KEYS[1], cjson.encode(notice))
return raw
"""

# KEYS[1] the notice; ARGV the new JSON. A message a person closed meanwhile stays closed (its click acted on it).
_SAVE = """
local raw = redis.call('GET', KEYS[1])
local new = cjson.decode(ARGV[1])
if raw then
  local old = cjson.decode(raw)
  if old['episode'] == new['episode'] and old['closed'] then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""


def _decoded(raw: bytes | str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def notice(client: Client, keys: Keys) -> dict[str, Any] | None:
    """The breaker's message, open or closed; None before the first one."""
    with redis_errors("read the stop breaker's message"):
        return _decoded(bytes_value(client.get(keys.breaker_notice())))


def save(keys: Keys, value: dict[str, Any], *, pipeline: Pipeline) -> None:
    """Queue the breaker's message into `pipeline` (the notifier's fenced MULTI), unless a click closed that
    episode meanwhile."""
    pipeline.eval(_SAVE, 1, keys.breaker_notice(), json.dumps(value, sort_keys=True))


def close(client: Client, keys: Keys, *, episode: str, by: str) -> dict[str, Any] | None:
    """Close the message of `episode` for a person's choice; the message as it was, or None when it was
    closed already (another click) or is not that episode's."""
    with redis_errors("close the stop breaker's message"):
        raw = client.eval(_CLOSE, 1, keys.breaker_notice(), episode, by)
    return _decoded(raw)
