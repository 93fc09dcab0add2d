"""Redis's own cost of the engine's jobs, measured on a real Redis: CPU and commands per job, idle cost per worker.

Redis reports the CPU its process has used (``INFO cpu``: ``used_cpu_sys`` +
``used_cpu_user``, seconds) and the calls of every command (``INFO
commandstats``). Read before and after a piece of work, their differences are
what that work cost Redis, networking included — nothing else runs on the
probe's Redis while it measures, or its figures include that traffic too.

:func:`probe_redis_cost` runs three short phases in this process, on keys of
its own (a ``qsim-redis-probe-<hex>`` prefix, deleted afterwards):

1. **add**: ``jobs`` no-op jobs added one call each (as a service adds them);
2. **drain**: one worker (``concurrency`` slots, a no-op handler) runs them all;
   the add and drain costs per job sum to :attr:`RedisCost.cpu_per_job_us`;
3. **idle**: ``idle_workers`` workers wait on the empty queue, watched for
   ``idle_seconds`` (one ``block_timeout``): their commands per second, priced
   at the CPU per command measured in the add and the drain (a waiting
   worker's few commands are too little CPU to measure directly above Redis's
   own timers), give :attr:`RedisCost.idle_us_per_worker`.

A Redis that is busy with other clients makes the figures larger (the probe
cannot tell their CPU from its own); run it on a quiet Redis of the kind you
deploy. The caller checks the Redis is one the probe may write to.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from qsim.harness.aio import run_sync
from qsim.spec.redis_cost import RedisCost

__all__ = ["RedisSample", "sample", "delta", "watch_idle", "probe_redis_cost", "PROBE_JOBS", "IDLE_SECONDS"]

logger = logging.getLogger(__name__)

#: Jobs the probe adds and drains (enough for a CPU delta far above ``INFO``'s own cost).
PROBE_JOBS = 2000
#: Seconds the idle workers are watched waiting on the empty queue: one default ``block_timeout``, so that each
#: worker's blocking pop (counted by Redis when it ends) ends once in it, whatever its phase.
IDLE_SECONDS = 5.0


@dataclass(frozen=True)
class RedisSample:
    """Redis's counters at one moment: CPU seconds used, command calls, and when (``time.monotonic``)."""

    cpu: float
    calls: int
    at: float


def sample(client: Any) -> RedisSample:
    """Read ``INFO cpu`` and ``INFO commandstats`` (a sync redis-py client)."""
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    calls = sum(int(v.get("calls", 0)) for k, v in stats.items() if isinstance(v, dict) and k != "cmdstat_info")
    return RedisSample(float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]), calls, time.monotonic())


def delta(before: RedisSample, after: RedisSample) -> tuple[float, int, float]:
    """CPU seconds, command calls and wall seconds between two samples (the second INFO call not counted)."""
    return max(0.0, after.cpu - before.cpu), max(0, after.calls - before.calls - 1), after.at - before.at


async def _noop(job: Any) -> None:
    return None


async def _drain(url: str, queue: str, prefix: str, jobs: int, concurrency: int, timeout: float) -> None:
    from qsim.engine import AsyncQueue, Worker

    q = AsyncQueue(queue, redis=url, prefix=prefix)
    w = Worker(queue, _noop, redis=url, prefix=prefix, concurrency=concurrency, keep_completed=None,
               handle_signals=False)
    task = asyncio.create_task(w.run())
    try:
        deadline = time.monotonic() + timeout
        while (await q.counts())["completed"] < jobs:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError(f"the Redis probe's worker did not finish {jobs} jobs in {timeout:g} s")
            await asyncio.sleep(0.02)
    finally:
        await w.close()
        await task
        await q.close()


async def watch_idle(url: str, queue: str, prefix: str, workers: int, seconds: float,
                measure: Callable[[], RedisSample]) -> tuple[RedisSample, RedisSample]:
    """Start ``workers`` one-slot workers on an empty ``queue``; ``measure()`` (run in a thread) half a second
    later and again ``seconds`` after that; both samples."""
    from qsim.engine import Worker

    ws = [Worker(queue, _noop, redis=url, prefix=prefix, concurrency=1, handle_signals=False)
          for _ in range(workers)]
    tasks = [asyncio.create_task(w.run()) for w in ws]
    try:
        await asyncio.sleep(0.5)  # start-up (connections, a first stalled check) left out
        before = await asyncio.to_thread(measure)
        await asyncio.sleep(seconds)
        after = await asyncio.to_thread(measure)
    finally:
        for w in ws:
            await w.close()
        await asyncio.gather(*tasks, return_exceptions=True)
    return before, after


def probe_redis_cost(url: str, *, jobs: int = PROBE_JOBS, concurrency: int = 10, idle_workers: int = 10,
                     idle_seconds: float = IDLE_SECONDS, timeout: float = 120.0) -> RedisCost:
    """Measure Redis's CPU per job and per idle worker on ``url`` (keys of its own, deleted afterwards).

    Raises:
        RedisUnavailable: Redis cannot be reached.  RuntimeError: the drain did not finish.
    """
    import redis as redis_py

    from qsim.engine import Queue

    if jobs < 1 or concurrency < 1 or idle_workers < 0 or idle_seconds <= 0:
        raise ValueError(f"the Redis probe needs jobs >= 1, concurrency >= 1, idle_workers >= 0 and idle_seconds "
                         f"> 0, got {jobs}, {concurrency}, {idle_workers}, {idle_seconds}")
    prefix = f"qsim-redis-probe-{secrets.token_hex(4)}"
    client = redis_py.Redis.from_url(url, decode_responses=True)
    q = Queue("probe", redis=url, prefix=prefix)
    try:
        q.set_retention(keep_count=None)
        start = sample(client)
        for _ in range(jobs):
            q.add("noop", None)
        added = sample(client)
        run_sync(lambda: _drain(url, "probe", prefix, jobs, concurrency, timeout))
        drained = sample(client)
        add_cpu, add_calls, _ = delta(start, added)
        drain_cpu, drain_calls, drain_wall = delta(added, drained)
        per_call = (add_cpu + drain_cpu) / max(1, add_calls + drain_calls)
        idle_us = 0.0
        idle_calls = 0.0
        if idle_workers:
            before, after = run_sync(
                lambda: watch_idle(url, "probe", prefix, idle_workers, idle_seconds, lambda: sample(client)))
            _, calls, wall = delta(before, after)
            idle_calls = calls / wall / idle_workers
            idle_us = idle_calls * per_call * 1e6
        cost = RedisCost(
            cpu_per_job_us=(add_cpu + drain_cpu) / jobs * 1e6, idle_us_per_worker=idle_us,
            source=f"qsim calibrate --probe: {jobs} no-op jobs added one by one and drained by one worker at "
                   f"concurrency {concurrency}", detail={
                       "add_us": add_cpu / jobs * 1e6, "drain_us": drain_cpu / jobs * 1e6,
                       "commands_per_job": (add_calls + drain_calls) / jobs,
                       "drain_jobs_per_s": jobs / drain_wall if drain_wall > 0 else 0.0,
                       "drain_redis_utilization": drain_cpu / drain_wall if drain_wall > 0 else 0.0,
                       "idle_commands_per_worker_s": idle_calls, "us_per_command": per_call * 1e6})
        logger.info("Redis probe: %.1f us of Redis CPU per job (add %.1f, drain %.1f), %.1f commands per job",
                    cost.cpu_per_job_us, cost.detail["add_us"], cost.detail["drain_us"],
                    cost.detail["commands_per_job"])
        return cost
    finally:
        try:
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            for i in range(0, len(keys), 500):
                client.delete(*keys[i:i + 500])
        finally:
            q.close()
            client.close()
