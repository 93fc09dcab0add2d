"""Flow benchmark: the cost of flows and fan-out against plain jobs; prints its figures.

Starts a throwaway redis-server on a free port (never touches 6379), then,
with two in-process workers (one per queue, concurrency 50 each):

* plain: N no-op jobs (the baseline);
* flows: N / (k + 1) flows of one parent and k children (N jobs in all), added
  with ``FlowProducer.add`` one flow per call; the parents run after their
  children and read ``children_values()``;
* fan-out: N / (k + 1) parents that each ``add_children`` k children and
  ``wait_children()`` for them (holding their slot), then the same with
  ``move_to_waiting_children()`` (the slot is freed; the parent runs twice).

Rates use Redis-clock job timestamps (first start to last finish).

Usage: ``python benchmarks/flows.py [--jobs 12000] [--children 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qsim.engine import AsyncQueue, FlowProducer, Job, Worker  # noqa: E402
from qsim.harness.server import RedisServer  # noqa: E402


async def handler(job: Job) -> Any:
    if job.name == "parent":
        return len(await job.children_values())
    if job.name == "fan":
        await job.add_children([("kids", "child", {}) for _ in range(job.data["k"])])
        return len(await job.wait_children(progress=False))
    if job.name == "park":
        await job.add_children([("kids", "child", {}, {"job_id": f"{job.id}-{i}"}) for i in range(job.data["k"])])
        await job.move_to_waiting_children()
        return len(await job.children_values())
    return None


async def drain(url: str, total: int) -> float:
    qs = [AsyncQueue(n, redis=url) for n in ("top", "kids")]
    # a worker per queue: parents waiting in wait_children() must not hold the slots their children need
    ws = [Worker(n, handler, redis=url, concurrency=50, handle_signals=False, keep_completed=None)
          for n in ("top", "kids")]
    tasks = [asyncio.ensure_future(w.run()) for w in ws]
    try:
        while sum([(await q.counts())["completed"] for q in qs]) < total:
            await asyncio.sleep(0.05)
    finally:
        await asyncio.gather(*(w.close() for w in ws))
        await asyncio.gather(*tasks)
    recs = [r for q in qs for r in await q.job_records()]
    rate = len(recs) / (max(r.finished_at for r in recs) - min(r.started_at for r in recs))  # type: ignore[type-var, operator]
    for q in qs:
        await q.client.flushall()
        await q.close()
    return rate


async def main(url: str, n: int, k: int) -> None:
    flows_n = n // (k + 1)
    total = flows_n * (k + 1)
    top = AsyncQueue("top", redis=url)
    await top.add_bulk([("plain", None) for _ in range(total)])
    print(f"plain jobs:                         {await drain(url, total):>8,.0f} jobs/s  ({total} jobs)")
    t0 = time.perf_counter()
    async with FlowProducer(redis=url) as fp:
        for _ in range(flows_n):
            await fp.add(parent=("top", "parent", {}), children=[("kids", "child", {}) for _ in range(k)])
    add_rate = flows_n / (time.perf_counter() - t0)
    print(f"flows (1 parent + {k} children):      {await drain(url, total):>8,.0f} jobs/s  "
          f"({flows_n} flows; FlowProducer.add: {add_rate:,.0f} flows/s, one call each)")
    await top.add_bulk([("fan", {"k": k}) for _ in range(flows_n)])
    print(f"fan-out (add_children + wait):      {await drain(url, total):>8,.0f} jobs/s  ({flows_n} parents)")
    await top.add_bulk([("park", {"k": k}) for _ in range(flows_n)])
    print(f"fan-out (move_to_waiting_children): {await drain(url, total):>8,.0f} jobs/s  ({flows_n} parents, "
          "each run twice)")
    await top.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=12000)
    ap.add_argument("--children", type=int, default=5)
    a = ap.parse_args()
    server = RedisServer(Path(tempfile.mkdtemp(prefix="qsim-bench-"))).start()
    try:
        print(f"redis-server on port {server.port}; a worker per queue (top, kids), concurrency 50 each")
        asyncio.run(main(server.url, a.jobs, a.children))
    finally:
        server.stop()
