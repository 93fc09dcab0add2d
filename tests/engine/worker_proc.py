"""A worker process for the engine tests (run as a script by the tests).

The handler sleeps ``job.data["sleep"]`` seconds and records each attempt's
start in the Redis list ``test:started`` (``<id>:<attempt>:<pid>``), so a test
can wait until a job runs before it kills or signals this process (or count
how often a job's handler ran); ``--record-url`` keeps those lists in another
Redis (a test that fills the queue's Redis to its maxmemory).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from qsim.engine import Job, Worker
from qsim.engine.connection import connect_async


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("queue")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--lock-duration", type=float, default=1.0)
    p.add_argument("--stalled-interval", type=float, default=0.5)
    p.add_argument("--grace", type=float, default=30.0)
    p.add_argument("--prefetch", default="auto", help="auto or N")
    p.add_argument("--max-stalled", type=int, default=1)
    p.add_argument("--record-url", help="Redis where the starts are recorded (default: the queue's)")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    pid = os.getpid()

    async def run() -> int:
        r = connect_async(a.record_url or a.url)  # redis:// or redis+cluster://

        async def handler(job: Job) -> dict[str, int]:
            await r.rpush("test:started", f"{job.id}:{job.attempt}:{pid}")
            await asyncio.sleep(float(job.data.get("sleep", 0)))
            await r.rpush("test:done", f"{job.id}:{pid}")
            return {"pid": pid}

        w = Worker(a.queue, handler, redis=a.url, concurrency=a.concurrency, lock_duration=a.lock_duration,
                   stalled_interval=a.stalled_interval, shutdown_grace=a.grace, max_stalled=a.max_stalled,
                   prefetch=a.prefetch if a.prefetch == "auto" else int(a.prefetch))
        try:
            return await w.run()
        finally:
            await r.aclose()

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
