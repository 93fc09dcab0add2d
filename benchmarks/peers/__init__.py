"""Peer job queues run through the same no-op drain as qsim (benchmarks/engine_throughput.py).

One module per peer. Each defines ``LIB`` (the import name it needs), ``fill(url, n)``
(enqueue ``n`` no-op jobs in bulk, before any worker runs) and ``work(url, n, concurrency)``
(run that library's own worker in this process, one process with ``concurrency`` threads or
tasks, until SIGTERM). The no-op handler calls :func:`stamp`, which records in Redis the wall
time the first job started and the last of the ``n`` finished (two SETs per run), so a drain is
timed from first start to last finish like qsim's (whose jobs carry Redis-clock timestamps).

The peers are in the optional ``bench`` extra: ``pip install .[bench]``. One that is not
importable is reported as not installed, never an error. arq is left out: every arq release
pins ``redis<6`` and qsim runs on redis-py >= 5 (8.x here), so the two cannot share an env.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import redis

ROOT = Path(__file__).resolve().parents[2]

#: (label, module in this package, pip name), in the order the table prints them
PEERS = [
    ("huey", "huey_peer", "huey"),
    ("dramatiq", "dramatiq_peer", "dramatiq[redis]"),
    ("BullMQ (Python)", "bullmq_peer", "bullmq"),
    ("SAQ", "saq_peer", "saq"),
]
#: peers that cannot be installed next to qsim, with the reason
SKIPPED = [("arq", "not in the bench extra: arq pins redis-py < 6, qsim needs >= 5 (8.x here)")]

FIRST, LAST = "bench:peer:first", "bench:peer:last"


def load(module: str) -> ModuleType | None:
    """The peer module, or None when its library is not installed."""
    mod = importlib.import_module(f"{__name__}.{module}")
    return mod if importlib.util.find_spec(mod.LIB) is not None else None


class Stamper:
    """Counts finished no-op jobs (thread-safe); stamps the first start and the n-th finish in Redis."""

    def __init__(self, url: str, n: int) -> None:
        self.client = redis.Redis.from_url(url)
        self.n = n
        self.started = 0
        self.done = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self.started += 1
            first = self.started == 1
        if first:
            self.client.set(FIRST, repr(time.time()))

    def finish(self) -> None:
        with self.lock:
            self.done += 1
            last = self.done == self.n
        if last:
            self.client.set(LAST, repr(time.time()))


def drain(name: str, module: str, url: str, n: int, concurrency: int, timeout: float = 300.0) -> float:
    """Jobs/s of one worker process of peer ``module`` draining ``n`` no-op jobs enqueued beforehand."""
    mod = load(module)
    if mod is None:
        raise RuntimeError(f"{name} is not installed")
    client = redis.Redis.from_url(url)
    client.flushall()
    mod.fill(url, n)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-m", __name__, module, url, str(n), str(concurrency)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while not client.exists(LAST):
            if p.poll() is not None:
                err = (p.stderr.read() if p.stderr else b"").decode(errors="replace").strip().splitlines()
                raise RuntimeError(f"{name} worker exited with {p.returncode}: {err[-1] if err else ''}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not drain {n} jobs in {timeout:.0f} s")
            time.sleep(0.02)
        first, last = float(client.get(FIRST)), float(client.get(LAST))  # type: ignore[arg-type]
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p.stderr:
            p.stderr.close()
        client.close()
    return n / (last - first)
