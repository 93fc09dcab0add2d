"""Hooks: code that runs around every attempt, or when a worker starts and stops, without wrapping the handler.

An **attempt hook** is any object with ``before_attempt(job)`` and ``after_attempt(job,
seconds, error)`` (:class:`AttemptHook`); ``Worker.add_hook(hook)`` registers
it. The worker calls ``before_attempt`` right before the handler starts
(after a prefetched job got its slot) and ``after_attempt`` right after it
returned or raised, with the handler's time in seconds and the exception
(None on success; ``WaitingForChildren`` when the job parked itself; a
``CancelledError`` when the worker cut it off at shutdown). Hooks run on the
event loop, in the order registered: keep them short and non-blocking. A hook
that raises is logged and does not change the attempt.

A **lifecycle hook** is any object with ``async on_start(worker)`` and ``async
on_stop(worker)`` (:class:`LifecycleHook`), registered with the same
``Worker.add_hook`` (an object with both pairs is both). Each ``run()`` awaits
every ``on_start`` in the order registered before it connects to Redis (one
that raises ends the run with its error), and every started hook's ``on_stop``
in the reverse order once the run ended, however it ended (one that raises is
logged). The metrics server (:class:`qsim.engine.metrics.MetricsServer`), the
background advisor (:class:`qsim.advise.live.Advisor`) and a cold start
(:class:`ColdStart`) are lifecycle hooks; :class:`Started` makes one of a pair
of plain ``start()`` / ``stop()`` calls.

:class:`~qsim.engine.metrics.WorkerMetrics` is an attempt hook (it times attempts
and counts waits); outcomes after Redis acknowledged them (completed, retrying,
dead, ...) are events: ``Worker.on(event, callback)``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from qsim.engine.eventloop import cancel_and_wait
from qsim.engine.job import Job

__all__ = ["AttemptHook", "LifecycleHook", "Started", "ColdStart", "is_attempt_hook", "is_lifecycle_hook"]

logger = logging.getLogger(__name__)


class AttemptHook(Protocol):
    """Called around each attempt (see the module docstring)."""

    def before_attempt(self, job: Job) -> None:
        """The handler is about to run ``job`` (``job.wait`` is set on a first attempt)."""

    def after_attempt(self, job: Job, seconds: float, error: BaseException | None) -> None:
        """The handler ran ``job`` for ``seconds`` and raised ``error`` (None: it returned)."""


class LifecycleHook(Protocol):
    """Called when a worker's ``run()`` starts and when it has stopped (see the module docstring).
    ``worker`` is the :class:`~qsim.engine.Worker`."""

    async def on_start(self, worker: Any) -> None:
        """The worker is about to connect to Redis and take work."""

    async def on_stop(self, worker: Any) -> None:
        """The worker's run has ended (its Redis client closed)."""


def is_attempt_hook(hook: object) -> bool:
    """Whether ``hook`` has ``before_attempt`` and ``after_attempt``."""
    return callable(getattr(hook, "before_attempt", None)) and callable(getattr(hook, "after_attempt", None))


def is_lifecycle_hook(hook: object) -> bool:
    """Whether ``hook`` has ``on_start`` and ``on_stop``."""
    return callable(getattr(hook, "on_start", None)) and callable(getattr(hook, "on_stop", None))


class Started:
    """A lifecycle hook of two plain calls: ``start()`` when the worker starts, ``stop()`` when it has stopped."""

    def __init__(self, start: Callable[[], None], stop: Callable[[], None]) -> None:
        self.start, self.stop = start, stop

    async def on_start(self, worker: Any) -> None:
        """Call ``start()``."""
        self.start()

    async def on_stop(self, worker: Any) -> None:
        """Call ``stop()``."""
        self.stop()


class ColdStart:
    """A worker that takes no work before ``at`` (a time.time() timestamp), then says it is ready by pushing its
    id on the Redis list ``ready_key`` (None: it says nothing) once it takes work (connected, its first fetch
    answered: :meth:`~qsim.engine.worker.Worker.wait_taking_work`): a pod's cold start and readiness, as the
    harness's pool processes have them (:mod:`qsim.harness.pool_worker`). Said earlier, jobs added at once
    would wait for the worker to connect and load its scripts (about 0.1 s on a loaded 2-core machine). A
    SIGTERM meanwhile ends the process (the worker's own handlers are installed once it runs)."""

    def __init__(self, at: float, ready_key: str | None = None) -> None:
        self.at, self.ready_key = at, ready_key
        self._saying: asyncio.Future[None] | None = None

    async def on_start(self, worker: Any) -> None:
        """Wait until ``at``; then, in a task of its own, push the worker's id on ``ready_key`` once it takes work."""
        wait = self.at - time.time()
        if wait > 0:
            await asyncio.sleep(wait)
        if self.ready_key is not None:
            self._saying = asyncio.ensure_future(self._say_ready(worker, self.ready_key))

    @staticmethod
    async def _say_ready(worker: Any, ready_key: str) -> None:
        import redis.asyncio

        try:
            await worker.wait_taking_work()
        except RuntimeError:
            return  # it stopped before it took work: it never was ready
        client = redis.asyncio.Redis.from_url(worker.url)
        try:
            await client.rpush(ready_key, worker.id)
        except redis.RedisError as e:
            logger.error("worker %s takes work but could not say so on %s: %s", worker.id, ready_key, e)
        finally:
            await client.aclose()

    async def on_stop(self, worker: Any) -> None:
        """Stop waiting to say it is ready (a worker that stopped first never was)."""
        if self._saying is not None:
            await cancel_and_wait([self._saying])
            self._saying = None
