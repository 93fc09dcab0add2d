"""One worker process of a scenario pool: ``python -m qsim.harness.pool_worker``.

It runs an engine :class:`~qsim.engine.Worker` with the synthetic handler
:func:`make_synthetic`, which does what the job plan (:mod:`qsim.harness.plan`)
says: sleep the attempt's service time, then fail or succeed. The harness
starts these processes, signals them (SIGTERM, SIGKILL) and starts new ones,
exactly as a deployment would.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from qsim.engine import AsyncQueue, Job, Worker
from qsim.harness.plan import engine_options

__all__ = ["make_synthetic", "main"]

Handler = Callable[[Job], Awaitable[dict[str, Any]]]


class PlannedFailure(Exception):
    """The failure the job plan asked for (a transient error or a poison job)."""


def make_synthetic(redis_url: str, prefix: str) -> Handler:
    """The synthetic handler: sleep the planned service time of this attempt, fail
    if planned, and on success add the planned fan-out children (one round trip)."""
    queues: dict[str, AsyncQueue] = {}

    async def synthetic(job: Job) -> dict[str, Any]:
        plan = job.data
        k = min(job.attempt, len(plan["s"])) - 1
        await asyncio.sleep(float(plan["s"][k]))
        if plan["x"][min(job.attempt, len(plan["x"])) - 1]:
            raise PlannedFailure(f"planned failure of attempt {job.attempt}")
        fan = plan.get("fan")
        if fan:
            if fan["queue"] not in queues:
                queues[fan["queue"]] = AsyncQueue(fan["queue"], redis=redis_url, prefix=prefix)
            await queues[fan["queue"]].add_bulk(
                [(fan["type"], data, engine_options(fan["options"], jid)) for jid, data in fan["jobs"]])
        return {"attempt": job.attempt}

    return synthetic


def main(argv: list[str] | None = None) -> int:
    """Run one pool worker until SIGTERM; the exit code is the worker's."""
    p = argparse.ArgumentParser(prog="python -m qsim.harness.pool_worker")
    p.add_argument("--redis", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--queue", action="append", required=True, help="a queue of the pool (repeat for several)")
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--policy", default="priority", help="priority | ordered | wrr")
    p.add_argument("--weight", action="append", default=[], metavar="QUEUE=N", help="wrr weight (repeat)")
    p.add_argument("--lock-duration", type=float, default=30.0)
    p.add_argument("--stalled-interval", type=float, default=30.0)
    p.add_argument("--max-stalled", type=int, default=1)
    p.add_argument("--grace", type=float, default=30.0)
    p.add_argument("--worker-id", required=True)
    p.add_argument("--ready-key", required=True, help="Redis list this process pushes its id to once running")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"%(asctime)s {a.worker_id} %(levelname)s %(name)s: %(message)s")

    async def run() -> int:
        weights = {q: int(w) for q, w in (item.split("=", 1) for item in a.weight)}
        worker = Worker(a.queue if len(a.queue) > 1 else a.queue[0], make_synthetic(a.redis, a.prefix),
                        redis=a.redis, prefix=a.prefix, policy=a.policy, weights=weights,
                        concurrency=a.concurrency, lock_duration=a.lock_duration,
                        stalled_interval=a.stalled_interval, max_stalled=a.max_stalled,
                        shutdown_grace=a.grace, worker_id=a.worker_id, keep_completed=None)
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(a.redis)
        try:
            await client.rpush(a.ready_key, a.worker_id)
        finally:
            await client.aclose()
        return await worker.run()

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
