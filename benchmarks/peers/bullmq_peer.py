"""BullMQ for Python: ``Queue.addBulk``, one ``Worker`` with ``concurrency`` (locks, lock renewal,
stalled-job recovery: the closest peer to qsim in guarantees)."""

from __future__ import annotations

import asyncio
import signal

LIB = "bullmq"
QUEUE = "bench"


def fill(url: str, n: int) -> None:
    from bullmq import Queue

    async def go() -> None:
        q = Queue(QUEUE, {"connection": url})
        for i in range(0, n, 1000):
            await q.addBulk([{"name": "noop", "data": {}} for _ in range(min(1000, n - i))])
        await q.close()

    asyncio.run(go())


def work(url: str, n: int, concurrency: int) -> int:
    from bullmq import Worker

    from benchmarks.peers import Stamper

    stamper = Stamper(url, n)

    async def noop(job, token) -> None:  # noqa: ANN001
        stamper.start()
        stamper.finish()

    async def go() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        worker = Worker(QUEUE, noop, {"connection": url, "concurrency": concurrency})
        await stop.wait()
        await worker.close()

    asyncio.run(go())
    return 0
