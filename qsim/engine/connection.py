"""Making Redis clients from URLs: a single server or a Redis Cluster.

``redis://host:port/db`` (or ``rediss://``, ``unix://``) makes a plain
client. ``redis+cluster://host:port`` (or ``rediss+cluster://``) makes a
Redis Cluster client that discovers the other nodes from that one; every
key of a queue shares one hash tag (:mod:`qsim.engine.keys`), so each
script runs on one node. ``Queue``/``AsyncQueue`` also accept a ready
``redis.cluster.RedisCluster`` / ``redis.asyncio.cluster.RedisCluster``
made with ``decode_responses=True``.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from qsim.engine.safety import display_url

__all__ = ["DEFAULT_REDIS_URL", "CLUSTER_SCHEMES", "is_cluster_url", "connect", "connect_async", "check_decoded", "display_url"]

#: How replies that are not UTF-8 are decoded. qsim writes only ASCII JSON and str names, so
#: invalid bytes can only come from a value corrupted (or planted) by hand: they become U+FFFD,
#: the job's JSON no longer parses and the job goes to the DLQ. With "strict", one such value
#: would fail the whole reply it is part of (a batch of fetched jobs, a DLQ listing).
ENCODING_ERRORS = "replace"

#: The Redis a client connects to when given none (``$REDIS_URL`` is the CLI's business, not the library's).
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

#: URL schemes that make a Redis Cluster client.
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` asks for a Redis Cluster client."""
    return url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def _plain(url: str) -> str:
    scheme, rest = url.split("://", 1)
    return scheme.lower().removesuffix("+cluster") + "://" + rest


def connect(url: str, **kwargs: Any) -> Any:
    """A sync client (``redis.Redis`` or ``redis.cluster.RedisCluster``) with decoded replies."""
    kwargs.setdefault("decode_responses", True)
    kwargs.setdefault("encoding_errors", ENCODING_ERRORS)
    if is_cluster_url(url):
        kwargs.pop("health_check_interval", None)
        return redis.cluster.RedisCluster.from_url(_plain(url), **kwargs)
    return redis.Redis.from_url(url, **kwargs)


def connect_async(url: str, **kwargs: Any) -> Any:
    """An asyncio client (``redis.asyncio.Redis`` or its ``RedisCluster``) with decoded replies."""
    kwargs.setdefault("decode_responses", True)
    kwargs.setdefault("encoding_errors", ENCODING_ERRORS)
    if is_cluster_url(url):
        kwargs.pop("health_check_interval", None)
        kwargs.pop("retry_on_error", None)
        return redis.asyncio.cluster.RedisCluster.from_url(_plain(url), **kwargs)
    return redis.asyncio.Redis.from_url(url, **kwargs)


def check_decoded(client: Any) -> None:
    """Raise ValueError unless ``client`` was made with ``decode_responses=True``."""
    if hasattr(client, "get_connection_kwargs"):  # cluster clients
        kwargs = client.get_connection_kwargs()
    else:
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if not kwargs.get("decode_responses"):
        raise ValueError("the Redis client must be created with decode_responses=True")
