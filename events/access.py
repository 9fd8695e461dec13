"""What the agent asks of Redis, command by command: its ACL rule, and whether a connection's user may.

A GPU server's agent needs few rights: append events (the append script: EVALSHA, else EVAL, and the
XADD/HGET/HSET/ZADD it calls, each checked against the caller's ACL), write its own heartbeat, read its
host's control stream, hold its host's agent lease (events/agent_lease.py: two scripts over the lease and its
fence, and a GET of the fence before it signals a run); and, for the commands run on that server with its URL,
`trainwarden health --here` (its heartbeat read back) and `trainwarden watch` (a run added to its control
stream, its run.watched read). The rule and the check are built from one list, so the rule given to operators
(deploy/redis-central.conf, docs/operations.md) is the one `health --here` checks. The check asks Redis
itself (`redis.acl_check_cmd`, Redis 7) in one script, and writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import redis
from trainwarden.events import agent_lease
from trainwarden.events.errors import AclUncheckable
from trainwarden.events.keys import Keys
from trainwarden.events.redis_errors import redis_errors
from trainwarden.events.redis_types import Client
from trainwarden.events.store import APPEND_CLUSTER_SHA, APPEND_SHA

PROBE_RUN = "RUN"  # the run whose keys stand for every run's in the check: it only names them, writing none
# Lua: the 1-based indexes of the commands (ARGV[1], a JSON list of argv lists) this user may not run
_CHECK = """local out = {}
for i, argv in ipairs(cjson.decode(ARGV[1])) do
  if not redis.acl_check_cmd(unpack(argv)) then out[#out + 1] = i end
end
return out"""


@dataclass(frozen=True, slots=True)
class Need:
    """One command the agent sends, its key (None for none), the argv the check asks about, and what for."""

    argv: tuple[str, ...]
    key: str | None
    why: str

    @property
    def words(self) -> str:
        """How an operator reads it: `XADD tw:{RUN}:log`."""
        return f"{self.argv[0].upper()} {self.key}" if self.key else self.argv[0].upper()


def agent_needs(keys: Keys, host: str, *, cluster: bool = False) -> tuple[Need, ...]:
    """Every command the agent on `host` sends, with the keys it names (a stand-in run's for per-run keys)."""
    component = f"agent@{host}"
    beat, log, hwm, control = keys.beat(component), keys.log(PROBE_RUN), keys.hwm(PROBE_RUN), keys.agent_control(host)
    shared = [keys.outbox(PROBE_RUN)] if cluster else [keys.feed(), keys.runs()]
    script = (str(2 + len(shared)), log, hwm, *shared)
    writes = [Need(("rpush", shared[0], "x"), shared[0], "append: the shared writes wait in the run's outbox")] \
        if cluster else [Need(("xadd", shared[0], "*", "r", PROBE_RUN), shared[0], "append: the feed entry"),
                         Need(("zadd", shared[1], "1", PROBE_RUN), shared[1], "append: the runs index")]  # fmt: skip
    return (
        Need(("ping",), None, "reach Redis at start"),
        Need(("evalsha", APPEND_CLUSTER_SHA if cluster else APPEND_SHA, *script), log, "append events"),
        Need(("eval", "return 1", *script), log, "append events (the script's first call)"),
        Need(("xadd", log, "*", "e", "x"), log, "append: the run's event log"),
        Need(("hget", hwm, "p"), hwm, "append: each producer's last sequence number"),
        Need(("hset", hwm, "p", "1"), hwm, "append: each producer's last sequence number"),
        *writes,
        Need(("hset", beat, "f", "v"), beat, "its heartbeat"),
        Need(("pexpire", beat, "1"), beat, "its heartbeat"),
        Need(("sadd", keys.beats(), component), keys.beats(), "its heartbeat"),
        Need(("xread", "COUNT", "1", "STREAMS", control, "0"), control, "its host's control stream"),
        *lease_needs(keys, host),
        Need(("smembers", keys.beats()), keys.beats(), "`trainwarden health --here`"),
        Need(("hgetall", beat), beat, "`trainwarden health --here`, `trainwarden watch`"),
        Need(("pttl", beat), beat, "`trainwarden health --here`, `trainwarden watch`"),
        Need(("xadd", control, "*", "op", "watch"), control, "`trainwarden watch` on this host: a run for the agent"),
        Need(("xrange", log, "-", "+", "COUNT", "1"), log, "`trainwarden watch`: the agent's run.watched"),
    )


def lease_keys(keys: Keys, host: str) -> tuple[str, str]:
    """The host's agent lease and its fence (events/lease.py names them from the lease's name)."""
    base = f"{keys.namespace}:{{{agent_lease.name(host)}}}"
    return f"{base}:lease", f"{base}:fence"


def lease_needs(keys: Keys, host: str) -> tuple[Need, ...]:
    """One agent per host: the lease's scripts (take, renew, release) call these on its two keys."""
    lease, fence = lease_keys(keys, host)
    why = "its host's agent lease (one agent per host)"
    return (
        Need(("eval", "return 1", "2", lease, fence), lease, why),
        Need(("get", lease), lease, why),
        Need(("set", lease, "1 x", "PX", "1"), lease, why),
        Need(("pexpire", lease, "1"), lease, why),
        Need(("pttl", lease), lease, why),
        Need(("del", lease), lease, why),
        Need(("incr", fence), fence, why),
        Need(("get", fence), fence, why + ": the fence, checked before it signals a run"),
    )


def agent_acl_rule(keys: Keys, host: str, *, cluster: bool = False) -> str:
    """The ACL rule (after `ACL SETUSER NAME on >PASSWORD`, or `user NAME on >PASSWORD` in redis.conf) that gives
    the agent on `host` what it needs and no more: per-run keys by pattern; of the per-host keys, its own only."""
    patterns = [keys.log("*"), keys.hwm("*"), *([keys.outbox("*")] if cluster else [keys.feed(), keys.runs()]),
                keys.beats(), keys.beat(f"agent@{host}"), keys.agent_control(host),
                *lease_keys(keys, host)]  # fmt: skip
    commands = dict.fromkeys(n.argv[0] for n in agent_needs(keys, host, cluster=cluster))
    return " ".join(["resetkeys", *(f"~{p}" for p in patterns), "resetchannels", "-@all",
                     *(f"+{c}" for c in commands)])  # fmt: skip


def denied(client: Client, needs: tuple[Need, ...]) -> list[Need]:
    """The needs this connection's user may not run, asked of Redis in one script that writes nothing. EVAL
    itself refused: the EVAL need alone (the rest cannot be asked). AclUncheckable before Redis 7."""
    with redis_errors("check the ACL user's rights"):
        try:
            reply = client.eval(_CHECK, 0, json.dumps([list(n.argv) for n in needs]))
        except redis.exceptions.NoPermissionError:
            return [n for n in needs if n.argv[0] == "eval"]
        except redis.ResponseError as exc:
            if "acl_check_cmd" in str(exc):
                raise AclUncheckable(f"Redis cannot check an ACL user's rights before version 7: {exc}") from exc
            raise
    return [needs[int(i) - 1] for i in reply]


def may(client: Client, *argv: str) -> bool:
    """Whether this connection's user may run `argv` (False where Redis cannot tell): asked before a command
    the user may lack, so that Redis' ACL LOG is not filled with refusals."""
    try:
        return not denied(client, (Need(argv, None, ""),))
    except AclUncheckable:
        return False
