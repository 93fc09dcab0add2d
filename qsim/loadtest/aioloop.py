"""An asyncio event loop in a native thread of its own, called from Locust's greenlets (or plain threads).

Why: the maintained ``bullmq`` Python package is asyncio only, and Locust
runs on gevent (``import locust`` monkey-patches the process). An asyncio
loop must not run in a greenlet of Locust's hub (it would own the thread's
"running loop" while every other greenlet runs), and a greenlet must not
block on a ``concurrent.futures.Future`` (its patched lock cannot be released
from another native thread). So :class:`LoopThread` runs the loop in one real
OS thread (gevent's thread pool when the process is patched, ``threading``
otherwise) and :meth:`LoopThread.call` waits for a coroutine's result the way
the caller's world waits:

- under gevent, on a :class:`gevent.event.AsyncResult` that the loop's thread
  fills through ``hub.loop.run_callback_threadsafe`` (the hub's own
  thread-safe wake-up), so only the calling greenlet waits and Locust's other
  users run on;
- otherwise, on the future of :func:`asyncio.run_coroutine_threadsafe`.

Inside the loop's thread the patched ``socket`` and ``selectors`` modules still
work (gevent gives that thread a hub of its own). Nothing here imports Locust;
gevent only when the process is patched.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["LoopThread", "gevent_patched"]

T = TypeVar("T")


def gevent_patched() -> bool:
    """Whether gevent has monkey-patched this process (as ``import locust`` does)."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    return bool(monkey.is_module_patched("socket"))


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run ``loop`` until stopped, let cancelled tasks finish, close it (in the loop's own thread)."""
    try:
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        # the default executor's threads (getaddrinfo of a host name: `localhost`) end with the loop; under
        # gevent they are greenlets of this thread's hub, which the interpreter's exit would wait for forever
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


class LoopThread:
    """One asyncio loop in one native thread; :meth:`call` runs a coroutine there and returns its result.

    Args:
        name: The thread's name (logs).
    """

    def __init__(self, name: str = "qsim-asyncio") -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._gevent = gevent_patched()
        self._pool: Any = None
        self._served: Any = None

    def start(self, timeout: float = 10.0) -> LoopThread:
        """Start the thread and wait until its loop runs."""
        if self.loop is not None:
            return self
        made: list[asyncio.AbstractEventLoop] = []

        def serve(signal: Callable[[], None]) -> None:
            # the loop is made in its own thread: under gevent its selector belongs to that thread's hub
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            made.append(loop)
            loop.call_soon(signal)
            _serve(loop)

        if self._gevent:
            import gevent.threadpool
            from gevent.event import AsyncResult

            up = AsyncResult()
            hub = gevent.get_hub()
            self._pool = gevent.threadpool.ThreadPool(1)
            self._served = self._pool.spawn(serve, lambda: hub.loop.run_callback_threadsafe(up.set, True))
            up.get(timeout=timeout)
        else:
            ready = threading.Event()
            threading.Thread(target=serve, args=(ready.set,), name=self.name, daemon=True).start()
            if not ready.wait(timeout):
                raise RuntimeError(f"{self.name}: the asyncio loop did not start within {timeout} s")
        self.loop = made[0]
        return self

    def call(self, make: Callable[[], Awaitable[T]], timeout: float | None = 60.0) -> T:
        """Run ``make()`` (a coroutine) on the loop; its result, or its exception raised here."""
        loop = self.loop
        if loop is None:
            raise RuntimeError(f"{self.name} is not running (start() it first)")

        async def job() -> T:
            return await make()

        future = asyncio.run_coroutine_threadsafe(job(), loop)
        if not self._gevent:
            return future.result(timeout)
        import gevent
        from gevent.event import AsyncResult

        result = AsyncResult()
        hub = gevent.get_hub()

        def done(f: Any) -> None:  # on the loop's thread
            error = f.exception()
            if error is not None:
                hub.loop.run_callback_threadsafe(result.set_exception, error)
            else:
                hub.loop.run_callback_threadsafe(result.set, f.result())

        future.add_done_callback(done)
        try:
            value: T = result.get(timeout=timeout)
        except gevent.Timeout:
            future.cancel()
            raise TimeoutError(f"{self.name}: no answer within {timeout} s") from None
        return value

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop (pending calls are cancelled) and let its thread end."""
        loop, self.loop = self.loop, None
        if loop is None:
            return

        def halt() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.stop()

        loop.call_soon_threadsafe(halt)
        if self._pool is not None:
            self._served.wait(timeout)  # the thread ran the loop to its end and closed it
            self._pool.kill()
            self._pool = None
