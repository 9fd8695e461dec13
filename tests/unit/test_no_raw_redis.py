"""No Redis command outside the event-log package: state lives behind the repositories in events/.

An AST scan, like the import-direction test: a call of a Redis command method (`hset`, `xrevrange`, `ping`...)
anywhere outside events/ fails, and so does `import redis`. Names that are also dict, set or Path methods
(`get`, `set`, `delete`, `exists`, `execute`) count only on a receiver that names a client (`redis`, `client`,
`pipe`...), since the scan cannot see types.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.layout import tracked_modules

COMMANDS = frozenset({
    "hset", "hget", "hgetall", "hdel", "hmget", "hincrby", "hexists", "hlen", "xadd", "xrange", "xrevrange", "xlen",
    "xread", "xreadgroup", "xack", "xtrim", "xdel", "xgroup_create", "xpending", "xpending_range", "xautoclaim",
    "xclaim", "xinfo_groups", "zadd", "zrange", "zrangebyscore", "zrevrange", "zscore", "zrem", "zcard", "incr",
    "incrby", "expire", "pexpire", "pttl", "setnx", "getset", "mget", "mset", "eval", "evalsha", "script_load",
    "register_script", "unwatch", "multi", "pipeline", "ping", "scan_iter", "lpush", "rpush", "lpop", "rpop",
    "lrange", "llen", "sadd", "srem", "smembers", "execute_command",
})  # fmt: skip
AMBIGUOUS = frozenset({"get", "set", "delete", "exists", "execute", "watch", "keys"})
CLIENT_NAMES = frozenset({"redis", "client", "pipe", "pipeline", "r", "conn"})

# module -> why it may still speak to Redis itself
ALLOWED: dict[str, str] = {
    "trainwarden.tools.redis_server": "starts Redis servers (tests, `up`) and pings them before anything else exists",
}


def receiver_name(node: ast.expr) -> str | None:
    """`client` for client.get, `redis` for self.store.redis.set, `pipe` for pipe.execute."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def raw_calls(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "redis"]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "redis":
            out.append(f"{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if name in COMMANDS or (name in AMBIGUOUS and receiver_name(node.func.value) in CLIENT_NAMES):
                out.append(f"{node.lineno}: .{name}(...)")
    return out


def outside_events() -> dict[str, Path]:
    return {m: p for m, p in tracked_modules().items() if not m.startswith("trainwarden.events")}


def test_no_redis_command_outside_the_event_log_package() -> None:
    found = [
        f"{path.relative_to(path.parents[1])}:{hit}"
        for module, path in sorted(outside_events().items())
        if module not in ALLOWED
        for hit in raw_calls(path)
    ]
    assert not found, "Redis commands belong in a repository in events/ (CONTRIBUTING.md):\n" + "\n".join(found)


def test_the_allow_list_names_modules_that_still_need_it() -> None:
    modules = outside_events()
    stale = [m for m in ALLOWED if m not in modules or not raw_calls(modules[m])]
    assert not stale, f"allowed but no longer speaking to Redis (drop them from ALLOWED): {stale}"


def test_the_scan_sees_a_raw_command(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import redis\n\ndef f(store, d):\n    d.get('x')\n    return store.redis.hget('k', 'f')\n")
    assert raw_calls(module) == ["1: import redis", "5: .hget(...)"]
