"""SAQ: ``Queue.from_url`` (Redis), ``enqueue`` calls gathered, one ``Worker`` with ``concurrency``.

Installed as plain ``saq`` (its ``redis`` extra pins redis-py < 8; SAQ's Redis queue runs on the
redis-py that qsim brings)."""

from __future__ import annotations

import asyncio
import signal

LIB = "saq"
QUEUE = "bench"


def fill(url: str, n: int) -> None:
    from saq import Queue

    async def go() -> None:
        q = Queue.from_url(url, name=QUEUE)
        await q.connect()
        for i in range(0, n, 1000):
            await asyncio.gather(*(q.enqueue("noop") for _ in range(min(1000, n - i))))
        await q.disconnect()

    asyncio.run(go())


def work(url: str, n: int, concurrency: int) -> int:
    from saq import Queue, Worker

    from benchmarks.peers import Stamper

    stamper = Stamper(url, n)

    async def noop(ctx) -> None:  # noqa: ANN001
        stamper.start()
        stamper.finish()

    async def go() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        worker = Worker(Queue.from_url(url, name=QUEUE), functions=[("noop", noop)], concurrency=concurrency)
        task = asyncio.ensure_future(worker.start())
        await stop.wait()
        await worker.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    return 0
