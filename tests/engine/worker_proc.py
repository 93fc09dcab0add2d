"""A worker process for the engine tests (run as a script by the tests).

The handler sleeps ``job.data["sleep"]`` seconds (on the job's first run, after blocking its event loop
``job.data["block"]`` seconds, if given, once job ``job.data["after"]`` ended in this process: a process
that does not get the CPU while a fetch's reply waits unread) and records each attempt's
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
import time

from qsim.engine import Job, Worker
from qsim.engine.connection import connect, connect_async


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
    p.add_argument("--block-timeout", type=float, default=5.0, help="longest single BLPOP, seconds")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    pid = os.getpid()
    done: dict[str, asyncio.Event] = {}

    def ended(job_id: str) -> asyncio.Event:
        """Set when job ``job_id`` ended in this process."""
        return done.setdefault(job_id, asyncio.Event())

    async def run() -> int:
        r = connect_async(a.record_url or a.url)  # redis:// or redis+cluster://
        sync = connect(a.record_url or a.url)

        async def handler(job: Job) -> dict[str, int]:
            if job.data.get("block") and not sync.exists(f"test:blocked:{job.id}"):
                if job.data.get("after"):  # once job "after" ended here and its slot set off the next batch
                    await ended(job.data["after"]).wait()
                for _ in range(4):  # a few steps of the loop: that batch is written, its reply not yet read
                    await asyncio.sleep(0)
                if sync.set(f"test:blocked:{job.id}", pid, nx=True):  # (blocking calls: the loop stops here)
                    time.sleep(float(job.data["block"]))
            await r.rpush("test:started", f"{job.id}:{job.attempt}:{pid}")
            await asyncio.sleep(float(job.data.get("sleep", 0)))
            await r.rpush("test:done", f"{job.id}:{pid}")
            ended(job.id).set()
            return {"pid": pid}

        w = Worker(a.queue, handler, redis=a.url, concurrency=a.concurrency, lock_duration=a.lock_duration,
                   stalled_interval=a.stalled_interval, shutdown_grace=a.grace, max_stalled=a.max_stalled,
                   block_timeout=a.block_timeout,
                   prefetch=a.prefetch if a.prefetch == "auto" else int(a.prefetch))
        try:
            return await w.run()
        finally:
            await r.aclose()

    return asyncio.run(run())


if __name__ == "__main__":
    sys.exit(main())
