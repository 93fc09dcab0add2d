"""Worker(prefetch=N): jobs fetched beyond concurrency wait their turn and go back untouched at shutdown."""

from __future__ import annotations

import asyncio

import pytest

from engine_helpers import run_worker_until
from qsim.engine import EXIT_DRAINED, AsyncQueue, Job, Worker

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.5, "handle_signals": False}


def test_prefetch_never_runs_more_than_concurrency(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add_bulk([("t", {"i": i}) for i in range(60)])
        running, peak = 0, 0

        async def handler(job: Job) -> None:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

        async def all_done() -> bool:
            return (await q.counts())["completed"] == 60

        w = Worker("q", handler, redis=redis_url, concurrency=4, prefetch=6, **FAST)
        assert await run_worker_until(w, all_done) == EXIT_DRAINED
        assert peak == 4
        assert all(len(r.attempts) == 1 for r in await q.job_records())
        await q.close()

    asyncio.run(main())


def test_prefetched_jobs_go_back_unused_at_shutdown(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add_bulk([("t", {"i": i}, {"attempts": 1}) for i in range(10)])
        started = asyncio.Event()

        async def handler(job: Job) -> None:
            started.set()
            await asyncio.sleep(0.3)

        async def two_running() -> bool:
            return started.is_set() and (await q.counts())["active"] >= 2

        # Given a worker with 1 slot that has fetched more jobs than it runs
        w = Worker("q", handler, redis=redis_url, concurrency=1, prefetch=3, shutdown_grace=5.0, **FAST)
        # When it is closed while its one job runs
        assert await run_worker_until(w, two_running) == EXIT_DRAINED
        counts = await q.counts()
        # Then the running job finished, the prefetched ones are waiting again, nothing was used up
        assert counts["completed"] == 1 and counts["active"] == 0 and counts["waiting"] == 9
        waiting = [r for r in await q.job_records() if r.state == "waiting"]
        assert len(waiting) == 9 and all(r.attempts_made == 0 and r.stalled == 0 for r in waiting)
        await q.close()

    asyncio.run(main())
