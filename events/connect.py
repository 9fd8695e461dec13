"""Clients for the event log's Redis and for RQ's: the one place a redis-py client is made.

The composition root (trainwarden/wiring.py) reads the URLs from the settings and calls these; every
other module gets a client, or better a repository, handed to it.
"""

from __future__ import annotations

from typing import TypeAlias

import redis
from redis.cluster import RedisCluster
from trainwarden.events.redis_types import Client

CLUSTER_SCHEME = "redis+cluster://"
QueueClient: TypeAlias = redis.Redis  # RQ's queues: one plain Redis (RQ does not run on a cluster)


def is_cluster_url(url: str) -> bool:
    return url.startswith(CLUSTER_SCHEME)


def event_log_client(url: str) -> Client:
    """The event log's client: one server (`redis://`), or a Redis Cluster (`redis+cluster://` and any one node's
    address; the client discovers the others)."""
    if is_cluster_url(url):
        return RedisCluster.from_url("redis://" + url.removeprefix(CLUSTER_SCHEME), socket_timeout=30,
                                     socket_connect_timeout=5)  # fmt: skip
    return redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=5, health_check_interval=30)


def queue_client(url: str) -> QueueClient:
    """RQ's client for a plain `redis://` URL (the caller refuses a cluster's, saying what to set)."""
    return redis.Redis.from_url(url, socket_connect_timeout=5)
