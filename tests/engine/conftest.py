"""Engine test helpers: queues on the session's Redis and worker subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qsim.engine import Queue

ROOT = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("worker_proc.py")


@pytest.fixture
def queue(redis_url: str) -> Iterator[Queue]:
    """A sync Queue named 'q' on the flushed session server."""
    q = Queue("q", redis=redis_url)
    yield q
    q.close()


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


@pytest.fixture
def spawn_worker() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    """Start ``worker_proc.py`` subprocesses; kills leftovers at teardown."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(url: str, queue: str = "q", **opts: Any) -> subprocess.Popen[bytes]:
        args = [sys.executable, str(HELPER), url, queue]
        for k, v in opts.items():
            args += [f"--{k.replace('_', '-')}", str(v)]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p)
        return p

    yield spawn
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.communicate()


async def run_worker_until(worker: Any, cond: Callable[[], Any], timeout: float = 10.0,
                           close_timeout: float = 5.0) -> int:
    """Run ``worker`` until the async ``cond()`` is truthy, then close it; returns the exit code."""
    import asyncio

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
