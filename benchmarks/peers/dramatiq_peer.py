"""dramatiq: ``RedisBroker`` (acks, requeue of a dead worker's messages), one ``dramatiq.Worker``
process with ``concurrency`` worker threads and its default prefetch and middleware."""

from __future__ import annotations

import signal
import threading

LIB = "dramatiq"
QUEUE = "bench"


def _make(url: str, stamper: object = None):  # noqa: ANN202
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(url=url)
    dramatiq.set_broker(broker)

    def noop() -> None:
        if stamper is not None:
            stamper.start()  # type: ignore[attr-defined]
            stamper.finish()  # type: ignore[attr-defined]

    actor = dramatiq.actor(noop, actor_name="noop", queue_name=QUEUE, broker=broker, max_retries=0)
    return broker, actor


def fill(url: str, n: int) -> None:
    broker, actor = _make(url)
    for _ in range(n):  # dramatiq has no bulk enqueue: one dispatch script call per message
        actor.send()
    broker.close()


def work(url: str, n: int, concurrency: int) -> int:
    import dramatiq

    from benchmarks.peers import Stamper

    broker, _ = _make(url, Stamper(url, n))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    worker = dramatiq.Worker(broker, worker_threads=concurrency)
    worker.start()
    stop.wait()
    worker.stop()
    broker.close()
    return 0
