"""Read-only Redis helpers shared by the qsim and BullMQ sources: bounded batches, never KEYS.

Sorted sets are read with ``ZREVRANGEBYSCORE ... LIMIT`` / ``ZRANGE`` in
batches of :data:`BATCH`, lists with ``LRANGE`` in batches, hashes with
pipelined ``HMGET``; key discovery (only for error messages) with a bounded
``SCAN``. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import redis

from qsim.engine.connection import connect
from qsim.engine.safety import unreachable
from qsim.errors import RedisUnavailable

__all__ = ["BATCH", "open_client", "redis_now", "newest_first", "all_members", "list_members", "hashes",
           "scan_some", "key_type"]

BATCH = 1000
Progress = Callable[[float], None]


def open_client(url: str) -> Any:
    """A sync client with decoded replies; RedisUnavailable when Redis cannot be reached."""
    try:
        client = connect(url, socket_connect_timeout=5.0)
        client.ping()
    except (redis.RedisError, OSError, ValueError) as e:
        raise RedisUnavailable(unreachable(url, e)) from e
    return client


def redis_now(client: Any) -> float:
    """The Redis server's clock (Unix seconds)."""
    reply = client.time()
    if isinstance(reply, dict):  # a cluster client answers per node
        reply = next(iter(reply.values()))
    sec, usec = reply
    return float(sec) + float(usec) / 1e6


def key_type(client: Any, key: str) -> str:
    """The type of ``key`` ("none" when it does not exist)."""
    t = client.type(key)
    return t.decode() if isinstance(t, bytes) else str(t)


def newest_first(client: Any, key: str, *, low: float | str = "-inf", limit: int) -> list[tuple[str, float]]:
    """Up to ``limit`` members of a sorted set with score >= ``low``, highest score first."""
    out: list[tuple[str, float]] = []
    offset = 0
    while len(out) < limit:
        page = client.zrevrangebyscore(key, "+inf", low, start=offset, num=min(BATCH, limit - len(out)),
                                       withscores=True)
        if not page:
            break
        out.extend((str(m), float(s)) for m, s in page)
        offset += len(page)
        if len(page) < BATCH:
            break
    return out


def all_members(client: Any, key: str, *, limit: int) -> list[str]:
    """Up to ``limit`` members of a sorted set, by rank, in batches."""
    out: list[str] = []
    while len(out) < limit:
        page = client.zrange(key, len(out), len(out) + min(BATCH, limit - len(out)) - 1)
        if not page:
            break
        out.extend(str(m) for m in page)
        if len(page) < BATCH:
            break
    return out


def list_members(client: Any, key: str, *, limit: int) -> list[str]:
    """Up to ``limit`` items of a list, in batches."""
    out: list[str] = []
    while len(out) < limit:
        page = client.lrange(key, len(out), len(out) + min(BATCH, limit - len(out)) - 1)
        if not page:
            break
        out.extend(str(m) for m in page)
        if len(page) < BATCH:
            break
    return out


def hashes(client: Any, keys: Sequence[str], fields: Sequence[str],
           progress: Progress | None = None) -> Iterator[list[str | None]]:
    """``HMGET key *fields`` for every key, pipelined in batches; yields one list per key."""
    for i in range(0, len(keys), BATCH):
        pipe = client.pipeline(transaction=False)
        for k in keys[i:i + BATCH]:
            pipe.hmget(k, list(fields))
        yield from pipe.execute()
        if progress:
            progress(min(1.0, (i + BATCH) / max(len(keys), 1)))


def scan_some(client: Any, pattern: str, *, limit: int = 20, budget: int = 20_000) -> list[str]:
    """Up to ``limit`` keys matching ``pattern``, looking at no more than ``budget`` keys (SCAN, bounded)."""
    found: list[str] = []
    if not isinstance(client, redis.Redis):  # a cluster client scans node by node
        for key in client.scan_iter(match=pattern, count=1000):
            found.append(str(key))
            if len(found) >= limit:
                break
        return found
    cursor, looked = 0, 0
    while True:
        cursor, keys = client.scan(cursor, match=pattern, count=1000)
        found.extend(str(k) for k in keys)
        looked += 1000
        if int(cursor) == 0 or len(found) >= limit or looked >= budget:
            return found[:limit]
