"""Fetching ahead: jobs fetched beyond concurrency wait their turn, are recorded as starting when their
handler starts, go back untouched at shutdown; ``prefetch="auto"`` does it only for short jobs on
queues without limits."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engine_helpers import run_worker_until
from waiting import timing_allowance
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


async def _drain(redis_url: str, n: int, handler: Any, limits: bool = False, **kw: Any) -> list[Any]:
    """Run a worker over ``n`` jobs; returns the job records (each job's result: what its handler saw)."""
    q = AsyncQueue("q", redis=redis_url)
    if limits:
        await q.set_rate_limit(10**6, 1.0)
    await q.add_bulk([("t", {"i": i}) for i in range(n)])

    async def all_done() -> bool:
        return (await q.counts())["completed"] == n

    w = Worker("q", handler, redis=redis_url, **{**FAST, **kw})
    assert await run_worker_until(w, all_done, timeout=30) == EXIT_DRAINED
    recs = await q.job_records()
    await q.close()
    return recs


async def _seen(job: Job, sleep: float) -> dict[str, Any]:
    """A handler that says when it started (wall clock, as Redis's on this machine) and how long it was held."""
    t = time.time()
    await asyncio.sleep(sleep)
    return {"t": t, "held_us": job.held_us, "wait": job.wait}


def test_a_job_fetched_ahead_is_recorded_as_starting_when_its_handler_starts(redis_url: str) -> None:
    # Given one slot, 3 jobs fetched ahead and 30 ms jobs: each held job waits up to ~90 ms in the worker
    recs = asyncio.run(_drain(redis_url, 20, lambda job: _seen(job, 0.03), concurrency=1, prefetch=3))
    held = [r for r in recs if r.returnvalue["held_us"] > 0]
    assert len(held) >= 10 and max(r.returnvalue["held_us"] for r in held) > 40_000
    for r in recs:
        # Then the recorded start (Redis clock) is the handler's start, not the fetch: within the reply's way
        # back (a few ms); without the correction a held job would be off by its whole hold
        t = r.returnvalue["t"]
        assert len(r.attempts) == 1 and abs(r.attempts[0].start - t) < timing_allowance(0.01), (r.id, r.attempts[0].start, t)
        assert r.started_at == r.attempts[0].start
        assert r.attempts[0].start <= r.attempts[0].end
        # and the job's wait counts the hold: enqueue to the handler's start
        assert abs(r.returnvalue["wait"] - (r.started_at - r.enqueued_at)) < timing_allowance(0.01)


def test_auto_fetches_ahead_for_short_jobs(redis_url: str) -> None:
    # Given 1 ms jobs at concurrency 4: one would wait ~0.25 ms for a slot, so auto fetches ahead
    recs = asyncio.run(_drain(redis_url, 400, lambda job: _seen(job, 0.001), concurrency=4))
    held = [r.returnvalue["held_us"] for r in recs]
    # Then some jobs waited in the worker for a slot, and each is recorded from its handler's start
    assert sum(h > 0 for h in held) >= 40
    # (the recorded start is Redis's fetch time moved on by the hold: a busy machine adds its own pauses
    # between the fetch and the handler to a few of them, so the tail is checked, not the worst one)
    errors = sorted(abs(r.attempts[0].start - r.returnvalue["t"]) for r in recs)
    assert errors[len(errors) // 2] < timing_allowance(0.003) and errors[int(len(errors) * 0.95)] < timing_allowance(0.01), \
        errors[-20:]


@pytest.mark.parametrize("case", ["long jobs", "a rate limit", "prefetch=0"])
def test_auto_does_not_fetch_ahead_for_long_jobs_or_limited_queues(redis_url: str, case: str) -> None:
    # Given 25 ms jobs at concurrency 2 (one would wait ~12 ms: longer than a round trip), or short jobs on a
    # queue with a (non-binding) rate limit, or fetching ahead turned off
    sleep = 0.025 if case == "long jobs" else 0.001
    kw: dict[str, Any] = {"prefetch": 0} if case == "prefetch=0" else {}
    recs = asyncio.run(_drain(redis_url, 60 if case == "long jobs" else 300, lambda job: _seen(job, sleep),
                              limits=case == "a rate limit", concurrency=2, **kw))
    # Then no job ever waited in the worker for a slot
    assert [r.returnvalue["held_us"] for r in recs] == [0] * len(recs)


async def _steal(redis_url: str, q: AsyncQueue, job_id: str) -> Any:
    """Expire ``job_id``'s lock and run a stalled check, as another worker would after this one froze."""
    from qsim.engine import protocol as P
    from qsim.engine.scripts import ScriptSet, run_calls_async

    await q.client.zadd(q.keys.active, {job_id: 0})
    return (await run_calls_async(q.client, ScriptSet(q.client), [P.recover_stalled_call(q.keys, 100, 5)]))[0]


def test_a_running_job_fetched_again_runs_once_under_the_new_lock(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        ran: list[str] = []
        go = asyncio.Event()

        async def handler(job: Job) -> str:
            ran.append(job.id)
            await go.wait()
            return job.token

        # Given a worker of 1 slot fetching 1 ahead, running job "a"
        w = Worker("q", handler, redis=redis_url, concurrency=1, prefetch=1, lock_duration=30.0,
                   stalled_interval=30.0, handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await q.add("t", {}, job_id="a")
        while not ran:
            await asyncio.sleep(0.01)
        # When its lock expires and a stalled check puts it back, and this worker fetches it again
        requeued, _, _ = await _steal(redis_url, q, "a")
        assert requeued == ["a"]
        for _ in range(300):
            if (await q.get_job("a")).state == "active":
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        go.set()
        for _ in range(300):
            if (await q.get_job("a")).state == "completed":
                break
            await asyncio.sleep(0.01)
        await w.close()
        await task
        info = await q.get_job("a")
        # Then the handler ran once, and its result was accepted under the new lock
        assert ran == ["a"]
        assert info.state == "completed" and [a.outcome for a in info.attempts] == ["stalled", "completed"]
        await q.close()

    asyncio.run(main())


def test_a_held_job_fetched_again_runs_once_and_counts_no_stall(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        ran: list[str] = []

        async def handler(job: Job) -> None:
            ran.append(job.id)
            await asyncio.sleep(float(job.data["sleep"]))

        # Given a worker of 1 slot fetching 2 ahead, warmed on 0.3 s jobs (a held job may wait ~1.2 s)
        w = Worker("q", handler, redis=redis_url, concurrency=1, prefetch=2, lock_duration=10.0,
                   stalled_interval=30.0, handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await q.add_bulk([("warm", {"sleep": 0.3}) for _ in range(2)])
        while (await q.counts())["completed"] < 2:
            await asyncio.sleep(0.01)
        # running "long" and holding "b"
        await q.add_bulk([("t", {"sleep": 0.8}, {"job_id": "long"}), ("t", {"sleep": 0.0}, {"job_id": "b"})])
        while (await q.counts())["active"] < 2:
            await asyncio.sleep(0.005)
        # When b's lock is lost (a stalled check of another worker) and this worker fetches b again
        _, _, unstarted = await _steal(redis_url, q, "b")
        for _ in range(300):
            if (await q.counts())["completed"] == 4:
                break
            await asyncio.sleep(0.01)
        await w.close()
        await task
        b = await q.get_job("b")
        # Then b was put back without a stall, ran once, and completed
        assert unstarted == ["b"]
        assert ran.count("b") == 1 and b.state == "completed" and b.stalled == 0
        assert [a.outcome for a in b.attempts] == ["completed"]
        await q.close()

    asyncio.run(main())
