"""Helpers for the engine tests (imported by name: tests/engine is on sys.path)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from waiting import ROOT, wait_until  # noqa: F401 - re-exported for the tests here

HELPER = Path(__file__).with_name("worker_proc.py")


async def run_worker_until(worker: Any, cond: Callable[[], Any], timeout: float = 10.0,
                           close_timeout: float = 5.0) -> int:
    """Run ``worker`` until the async ``cond()`` is truthy, then close it; returns the exit code."""
    task = asyncio.ensure_future(worker.run())
    try:
        async with asyncio.timeout(timeout):
            while not await cond():
                if task.done():
                    task.result()
                    raise AssertionError("worker stopped early")
                await asyncio.sleep(0.01)
    finally:
        if not task.done():
            await worker.close(close_timeout)
    return int(await task)
