"""Clients for the event log's Redis and for RQ's: the one place a redis-py client is made.

The composition root (trainwarden/wiring.py) reads the URLs from the settings and calls these; every
other module gets a client, or better a repository, handed to it.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import redis
from redis.cluster import RedisCluster
from trainwarden.core.errors import ConfigError
from trainwarden.events.redis_types import Client

CLUSTER_SCHEME = "redis+cluster://"
SCHEMES = ("redis://", "rediss://", "unix://", CLUSTER_SCHEME)
WHERE = "REDIS_URL, --redis-url or redis_url in the settings file"  # the URL came from one of them
QueueClient: TypeAlias = redis.Redis  # RQ's queues: one plain Redis (RQ does not run on a cluster)


def _shown(url: str) -> str:
    """Pure: the URL as a message may show it: a password (anything before an `@`) masked."""
    return f"***@{url.rpartition('@')[2]}" if "@" in url else url


def url_problem(url: str) -> str | None:
    """Pure: what is wrong with a Redis URL redis-py would refuse (with a 20-line traceback), and the URL meant;
    None for one it takes. `localhost:6479` -> redis://localhost:6479/0."""
    if url.startswith(SCHEMES):
        return None
    scheme, sep, rest = url.partition("://")
    if sep and "/" not in scheme and "@" not in scheme:
        said = f"Redis URL {_shown(url)!r} has the scheme {scheme + sep!r}"
    else:
        said, rest = f"Redis URL {_shown(url)!r} has no scheme", url
    meant = f"redis://{_shown(rest).rstrip('/')}" + ("" if "/" in rest.rstrip("/") else "/0")
    return f"{said}; write it as {meant} (or rediss://, unix://, {CLUSTER_SCHEME}) in {WHERE}"


def _checked(url: str) -> str:
    if (problem := url_problem(url)) is not None:
        raise ConfigError(problem)
    return url


def _from_url(make: Any, url: str, **options: Any) -> Any:
    """redis-py's `from_url`, its ValueError on a malformed URL (a port that is not a number) as one line."""
    try:
        return make(url, **options)
    except ValueError as exc:
        raise ConfigError(f"Redis URL {_shown(url)!r}: {exc}; correct it in {WHERE}") from None


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEME)


def event_log_client(url: str) -> Client:
    """The event log's client: one server (`redis://`), or a Redis Cluster (`redis+cluster://` and any one node's
    address; the client discovers the others)."""
    if is_cluster_url(_checked(url)):
        return _from_url(RedisCluster.from_url, "redis://" + url.removeprefix(CLUSTER_SCHEME), socket_timeout=30,
                         socket_connect_timeout=5)  # fmt: skip
    return _from_url(redis.Redis.from_url, url, socket_timeout=30, socket_connect_timeout=5, health_check_interval=30)


def queue_client(url: str) -> QueueClient:
    """RQ's client for a plain `redis://` URL (the caller refuses a cluster's, saying what to set)."""
    return _from_url(redis.Redis.from_url, _checked(url), socket_connect_timeout=5)
