"""huey: ``RedisHuey`` (blocking BRPOP dequeue), its consumer with ``concurrency`` worker threads.

huey's guarantees are lighter than qsim's: a dequeued task is gone from Redis (no lock, no
stalled-job recovery), so a consumer killed mid-task loses it.
"""

from __future__ import annotations

LIB = "huey"
QUEUE = "bench"


def _make(url: str, stamper: object = None):  # noqa: ANN202
    from huey import RedisHuey

    huey = RedisHuey(QUEUE, url=url, results=False)

    @huey.task(name="noop")
    def noop() -> None:
        if stamper is not None:
            stamper.start()  # type: ignore[attr-defined]
            stamper.finish()  # type: ignore[attr-defined]

    return huey, noop


def fill(url: str, n: int) -> None:
    huey, noop = _make(url)
    msgs = [huey.serialize_task(noop.s()) for _ in range(n)]
    conn, key = huey.storage.conn, huey.storage.queue_key
    for i in range(0, n, 1000):
        conn.lpush(key, *msgs[i : i + 1000])  # huey's own enqueue is one LPUSH per task


def work(url: str, n: int, concurrency: int) -> int:
    from benchmarks.peers import Stamper

    huey, _ = _make(url, Stamper(url, n))
    consumer = huey.create_consumer(workers=concurrency, worker_type="thread", periodic=False)
    consumer.run()  # SIGTERM stops it
    return 0
