"""The event loop of a worker process: uvloop when installed, asyncio's own otherwise.

Only process entry points call :func:`run_process` (``qsim worker``, the
harness's pool workers, the benchmarks' worker processes): it makes a fresh
loop and runs one coroutine to its end, like :func:`asyncio.run`. Library
code never does (a notebook's kernel already runs a loop), and nothing here
sets a global event loop policy.

uvloop comes with the ``fast`` extra (``pip install qsim[fast]``, with
hiredis, which redis-py uses by itself). Turn it off with
``QSIM_NO_UVLOOP=1`` in the environment or ``qsim worker --no-uvloop``.

A process run by :func:`run_process` prints what each of its tasks awaits
(its coroutine stack) to its log on ``SIGUSR1``: ``kill -USR1 <pid>`` shows
where a worker that does not stop is waiting.

:func:`cancel_and_wait` stops tasks for good: on Python 3.11 a cancel that
lands while its task is in :func:`asyncio.wait_for`, whose awaitable has just
finished, is lost (the task goes on; fixed in 3.12), and redis-py sends every
command through ``wait_for`` when its client has a socket timeout. A worker's
stalled-job check, a loop of Redis calls, went on after its one cancel, and a
SIGTERM'd worker now and then never exited.
"""

from __future__ import annotations

import asyncio
import importlib
import io
import linecache
import logging
import os
import signal
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["NO_UVLOOP_ENV", "uvloop_wanted", "loop_factory", "run_process", "dump_tasks", "cancel_and_wait"]

logger = logging.getLogger(__name__)

#: Environment variable that keeps worker processes on asyncio's own loop when set to a true value.
NO_UVLOOP_ENV = "QSIM_NO_UVLOOP"

T = TypeVar("T")


def uvloop_wanted(use_uvloop: bool = True, environ: Mapping[str, str] | None = None) -> bool:
    """Whether uvloop may be used: not refused by the caller nor by ``QSIM_NO_UVLOOP`` (1/true/yes/on)."""
    env = os.environ if environ is None else environ
    refused = env.get(NO_UVLOOP_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return use_uvloop and not refused


def loop_factory(use_uvloop: bool = True, environ: Mapping[str, str] | None = None
                 ) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """``uvloop.new_event_loop`` when uvloop is wanted and importable; None means asyncio's default loop."""
    if not uvloop_wanted(use_uvloop, environ):
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_process(main: Coroutine[Any, Any, T], *, use_uvloop: bool = True) -> T:
    """Run ``main`` to its end on a fresh loop (uvloop when wanted and installed): for process entry points.
    The tasks it leaves running are then cancelled until they have ended (:func:`cancel_and_wait`).

    Raises:
        RuntimeError: An event loop already runs in this thread (use ``await`` there instead).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_process() is for process entry points: an event loop already runs here, "
                           "await the coroutine instead")
    factory = loop_factory(use_uvloop)
    logger.debug("event loop: %s", "uvloop" if factory is not None else "asyncio")
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_ending_the_rest(_dumping_tasks_on_sigusr1(main)))


def dump_tasks() -> str:
    """Every task of the running loop with the chain of coroutines it awaits, innermost last
    (the ``SIGUSR1`` report)."""
    out = io.StringIO()
    tasks = asyncio.all_tasks()
    out.write(f"{len(tasks)} tasks:\n")
    for task in tasks:
        out.write(f"-- {task.get_name()}\n")
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is None:  # a future, or a coroutine that finished
                out.write(f"   awaiting {awaited!r}\n")
                break
            out.write(f"   {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}: "
                      f"{linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()}\n")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return out.getvalue()


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], *, every: float = 0.05,
                          raise_errors: bool = False) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again, every ``every`` s, each that
    goes on (its cancel was lost: see the module docstring). What they raised is dropped, unless
    ``raise_errors``: then the first error one raised (other than its cancellation) is raised here."""
    tasks = list(tasks)
    pending = {t for t in tasks if not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=every)
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    errors = [e for e in outcomes if isinstance(e, BaseException) and not isinstance(e, asyncio.CancelledError)]
    if raise_errors and errors:
        raise errors[0]


async def _ending_the_rest(main: Coroutine[Any, Any, T]) -> T:
    """``main``, then every task it left running ended with :func:`cancel_and_wait` (asyncio's runner
    cancels them once, and waits forever for one whose cancel was lost)."""
    try:
        return await main
    finally:
        await cancel_and_wait(t for t in asyncio.all_tasks() if t is not asyncio.current_task())


async def _dumping_tasks_on_sigusr1(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGUSR1, lambda: logger.warning("SIGUSR1: %s", dump_tasks()))
    except (NotImplementedError, RuntimeError, ValueError, AttributeError):  # no SIGUSR1 (Windows)
        return await main
    try:
        return await main
    finally:
        loop.remove_signal_handler(signal.SIGUSR1)
