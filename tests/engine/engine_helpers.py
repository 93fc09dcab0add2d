"""Helpers for the engine tests (imported by name: tests/engine is on sys.path)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("worker_proc.py")


def wait_until(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll ``pred`` until truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


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
