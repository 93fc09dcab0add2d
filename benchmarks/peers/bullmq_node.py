"""BullMQ on Node.js through the drains of benchmarks/engine_throughput.py (benchmarks/node/bench.js).

The pinned bullmq 5.x is installed with npm into ``~/.cache/qsim/node`` by
``tests/bullmq_node.py`` (the first time; ``python tests/bullmq_node.py install``
does it up front). Jobs are added with ``addBulk`` before the worker starts,
kept when completed, and the drain is timed from their own stamps: the first
``processedOn`` to the last ``finishedOn`` (ms, the Node process's clock on
this machine), as qsim's drain is timed from its jobs' Redis-clock stamps.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "node" / "bench.js"
sys.path.insert(0, str(ROOT / "tests"))

from bullmq_node import BullMQ, node_missing  # noqa: E402

__all__ = ["BullMQ", "node_missing", "bullmq_unless", "drain", "pickup_latency", "stop", "fields"]

QUEUE, PREFIX = "bench", "bull"


def bullmq_unless(skip: bool, major: str = "6") -> BullMQ | None:
    """The pinned BullMQ of ``major``, or None (saying why) when ``skip`` (``--skip-bullmq``) or Node is missing."""
    if skip:
        return None
    why = node_missing()
    if why:
        print(f"BullMQ (Node) skipped: {why}.")
        return None
    return BullMQ(major)


def _node(bq: BullMQ, cmd: str, url: str, **cfg: Any) -> list[str]:
    return ["node", str(SCRIPT), cmd, json.dumps({"redis": url, "queue": QUEUE, "prefix": PREFIX, **cfg})]


def _worker(bq: BullMQ, url: str, concurrency: int, handler: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(_node(bq, "work", url, concurrency=concurrency, handler=handler), stdout=subprocess.PIPE,
                         text=True, env=bq._env())
    assert p.stdout is not None
    if p.stdout.readline().strip() != "ready":
        p.kill()
        raise RuntimeError("the BullMQ worker did not start")
    return p


def stop(p: subprocess.Popen[Any]) -> None:
    """SIGTERM a worker process, SIGKILL it after 30 s, close its pipe."""
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    if p.stdout is not None:
        p.stdout.close()


def _wait_completed(client: redis.Redis, n: int, p: subprocess.Popen[str], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while client.zcard(f"{PREFIX}:{QUEUE}:completed") < n:
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the BullMQ drain did not finish")
        time.sleep(0.05)


def fields(client: redis.Redis, n: int, *names: str) -> list[list[Any]]:
    pipe = client.pipeline(transaction=False)
    for i in range(1, n + 1):
        pipe.hmget(f"{PREFIX}:{QUEUE}:{i}", *names)
    return list(pipe.execute())


def drain(bq: BullMQ, url: str, n: int, concurrency: int, handler: str = "noop") -> float:
    """Jobs/s of one BullMQ worker process draining ``n`` jobs added first."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        client.flushall()
        subprocess.run(_node(bq, "fill", url, n=n), check=True, env=bq._env(), timeout=300)
        p = _worker(bq, url, concurrency, handler)
        try:
            _wait_completed(client, n, p)
        finally:
            stop(p)
        stamps = fields(client, n, "processedOn", "finishedOn")
        first = min(int(s) for s, _ in stamps)
        last = max(int(f) for _, f in stamps)
        return n / ((last - first) / 1000.0)
    finally:
        client.close()


def pickup_latency(bq: BullMQ, url: str, n: int = 300, gap_ms: int = 5) -> list[float]:
    """Add -> handler start (ms) of ``n`` jobs added one at a time to an idle queue, sorted: from the
    middle of each add call (the producer's clock) to the handler's start (both Node processes here)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        client.flushall()
        p = _worker(bq, url, 10, "stamp")
        try:
            time.sleep(1.5)  # let the worker go idle
            done = subprocess.run(_node(bq, "pickup", url, n=n, gap_ms=gap_ms), check=True, env=bq._env(),
                                  timeout=120, capture_output=True, text=True)
            added = json.loads(done.stdout.strip().splitlines()[-1])
            _wait_completed(client, n, p)
        finally:
            stop(p)
        return sorted(float(rv) - added[str(i)] for i, (rv,) in enumerate(fields(client, n, "returnvalue"), 1))
    finally:
        client.close()
