"""Run the harness's coroutines from sync code, in a terminal or inside a running event loop.

The engine harness is async (:func:`qsim.harness.run.run_scenario_async`);
its sync front doors (``run_scenario``, ``compare``) call :func:`run_sync`.
Without a running loop in this thread (a script, the CLI) the coroutine runs
here on a fresh loop; with one (Jupyter, IPython, an async web app) it runs on
a fresh loop in a worker thread while this thread waits, because a loop
cannot be re-entered. Notebooks had better ``await`` the async functions
directly: the kernel stays responsive and the run can be interrupted.

Ctrl-C ends a run here for sure: asyncio's runner cancels the coroutine once,
and on Python 3.11 a cancel can be lost in redis-py's ``wait_for`` (see
:func:`qsim.engine.eventloop.cancel_and_wait`), so the run went on to its end
and exited 0. The coroutine is cancelled again until it has ended, then
``KeyboardInterrupt`` is raised as usual.
"""

from __future__ import annotations

import asyncio
from asyncio import Runner
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["run_sync", "loop_running"]

T = TypeVar("T")


def loop_running() -> bool:
    """Whether an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_here(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    with Runner() as runner:
        return runner.run(_cancelled_for_sure(make()))


async def _cancelled_for_sure(main: Coroutine[Any, Any, T]) -> T:
    """``main``; when this is cancelled (the runner's Ctrl-C), ``main`` is cancelled until it has ended."""
    from qsim.engine.eventloop import cancel_and_wait

    task = asyncio.ensure_future(main)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await cancel_and_wait([task])
        raise


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to completion and return its result (see the module docstring).

    ``make`` is called where the coroutine runs, so it is created on the loop that awaits it.
    """
    if not loop_running():
        return _run_here(make)
    with ThreadPoolExecutor(1, thread_name_prefix="qsim-run") as pool:
        return pool.submit(_run_here, make).result()
