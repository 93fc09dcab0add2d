"""Per-queue scheduling settings, global to every worker: concurrency limit, rate limit, priority aging.

They live in the queue's meta hash and are enforced by ``lua/fetch.lua`` in
the same atomic step that takes jobs, so they hold across every worker on
every machine:

* ``concurrency_limit`` (``n``): a fetch never lets more than ``n`` jobs of
  the queue be active. A job's slot frees when it completes or fails (those
  scripts then push the queue's marker, waking a waiting worker), or, if its
  worker died, when its lock expired and the stalled check put it back.
* ``rate_max`` / ``rate_per_ms`` [/ ``rate_key``]: a **sliding window**. The
  queue keeps the start times (Redis clock, microseconds) of its recent job
  starts in a ZSET; a start at time ``now`` is allowed only while fewer than
  ``max`` starts lie in ``(now - per, now]``, so no window of length ``per``,
  wherever it is placed, ever holds more than ``max`` starts. BullMQ's
  limiter counts starts in *fixed* windows (a counter that expires ``per``
  after the window's first start), which lets ``max`` starts at the end of one
  window and ``max`` more at the start of the next: up to ``2 * max`` in a
  span of ``per``. With ``rate_key`` set, each value of that payload field has
  its own window (jobs without the field share the value ``""``). The value is
  read from the payload by the producer when the job is added and stored, as
  text, in the job's ``rkey`` field (numbers keep every digit; ``1.0`` is
  ``1``); no script decodes a payload. The add scripts check that a producer
  read the queue's current key and have it read again otherwise, so jobs added
  after ``set_rate_limit(key=...)`` are keyed by it; jobs already waiting keep
  the value of the key they were added under (``""`` when there was none).
  A keyed queue serves **per-key lanes**: beside its wait set it keeps one
  ZSET of waiting ids per key value and an index of the lanes whose window
  has room (by their best job) and of those whose window is full (by the time
  it has room again); a fetch takes the best job of the first open lane, so
  one key's backlog of any size never delays another key that has room (cost
  per job taken: a few commands on ZSETs of at most one member per key
  value). ``lua/fetch.lua`` says how lanes open and shut; ``set_rate_limit``
  drops the lanes when the key changes and the next fetch builds them from
  the wait set (once, in one step: a large backlog makes that fetch slow).
  A worker whose queues are all held back by their rate limit waits exactly
  until the earliest allowed start (the fetch returns that delay).
* ``aging_ms``: a waiting job's effective priority is
  ``priority - (now - ready) / aging`` (seconds; ``ready = enqueued_at +
  delay``, the first moment it could run; a retried job keeps it), so it
  gains one level per ``aging`` seconds of waiting. Each fetch compares the
  oldest job of each of the queue's 32 best priority levels (bounded work)
  and takes the one with the lowest effective priority (ties: the better
  level); within a level jobs stay FIFO.
"""

from __future__ import annotations

import math
from typing import Any

from qsim.engine.keys import QueueKeys, check_unicode
from qsim.engine.scripts import Call, Op, command

__all__ = ["op_set_concurrency_limit", "op_set_rate_limit", "op_set_aging", "op_limits"]


def _wake(k: QueueKeys) -> list[Any]:
    return [command("RPUSH", k.marker, "1"), command("LTRIM", k.marker, -1, -1)]


def op_set_concurrency_limit(k: QueueKeys, n: int | None) -> Op[None]:
    """At most ``n`` active jobs of the queue, all workers together (None: no limit)."""
    if n is None:
        return Op([command("HDEL", k.meta, "concurrency_limit"), *_wake(k)], lambda r: None)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"concurrency limit must be an int >= 1 or None, got {n!r}")
    return Op([command("HSET", k.meta, "concurrency_limit", n), *_wake(k)], lambda r: None)


def op_set_rate_limit(k: QueueKeys, max_starts: int | None, per: float, key: str | None) -> Op[None]:
    """At most ``max_starts`` job starts in any window of ``per`` s (per value of payload field ``key``)."""
    keys = (k.meta, k.marker, k.lanes, k.lanes_shut, k.active, k.ratelimit)
    if max_starts is None:
        return Op([Call("set_rate_limit", keys, ("", 0, ""))], lambda r: None)
    if isinstance(max_starts, bool) or not isinstance(max_starts, int) or max_starts < 1:
        raise ValueError(f"rate limit max must be an int >= 1, got {max_starts!r}")
    if not isinstance(per, (int, float)) or not math.isfinite(per) or not per >= 0.001:
        raise ValueError(f"rate limit per must be >= 0.001 seconds, got {per!r}")
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError(f"rate limit key must be a payload field name or None, got {key!r}")
    if key:
        check_unicode("rate limit key", key)
    return Op([Call("set_rate_limit", keys, (max_starts, int(round(per * 1000)), key or ""))], lambda r: None)


def op_set_aging(k: QueueKeys, seconds: float | None) -> Op[None]:
    """A waiting job gains one priority level per ``seconds`` of waiting (None: off)."""
    if seconds is None:
        return Op([command("HDEL", k.meta, "aging_ms")], lambda r: None)
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or not seconds >= 0.001:
        raise ValueError(f"aging must be >= 0.001 seconds or None, got {seconds!r}")
    return Op([command("HSET", k.meta, "aging_ms", int(round(seconds * 1000)))], lambda r: None)


def op_limits(k: QueueKeys) -> Op[dict[str, Any]]:
    """Settings and their current use: concurrency_limit, active, rate_limit, rate_window, aging."""
    fields = ("concurrency_limit", "rate_max", "rate_per_ms", "rate_key", "aging_ms")

    def parse(r: list[Any]) -> Any:
        m, active, t = r
        out: dict[str, Any] = {
            "concurrency_limit": int(m[0]) if m[0] else None,
            "active": int(active),
            "rate_limit": None,
            "rate_window": 0,
            "aging": int(m[4]) / 1000 if m[4] else None,
        }
        if not m[1]:
            return out
        per_ms = int(m[2])
        out["rate_limit"] = {"max": int(m[1]), "per": per_ms / 1000, "key": m[3] or None}
        if m[3]:
            return out
        now_us = int(t[0]) * 1_000_000 + int(t[1])

        def count(r2: list[Any]) -> dict[str, Any]:
            out["rate_window"] = int(r2[0])
            return out

        return Op([command("ZCOUNT", k.ratelimit, f"({now_us - per_ms * 1000}", "+inf")], count)

    return Op([command("HMGET", k.meta, *fields), command("ZCARD", k.active), command("TIME")], parse)
