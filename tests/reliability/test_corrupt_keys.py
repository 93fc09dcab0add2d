"""A job key overwritten with another type while its job runs: that job goes to the DLQ and the
``corrupt`` set; its healthy neighbours keep their locks, run once, and are acknowledged."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
import redis

from qsim.engine import AsyncQueue, Job, Worker

pytestmark = pytest.mark.redis


@pytest.mark.parametrize("kind", ["string", "set"])
def test_a_job_key_overwritten_while_active_loses_nothing_and_runs_nothing_twice(
    redis_url: str, redis_client: redis.Redis, kind: str
) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add_bulk([("t", {}, {"job_id": f"j{i}"}) for i in range(4)])
        gate = asyncio.Event()
        runs: Counter[str] = Counter()

        async def handler(job: Job) -> str:
            runs[job.id] += 1
            await gate.wait()
            return job.id

        # Given a worker holding 4 jobs, with a short lock that must be renewed while they run
        w = Worker("q", handler, redis=redis_url, concurrency=4, lock_duration=0.6, stalled_interval=0.2,
                   handle_signals=False)
        task = asyncio.ensure_future(w.run())
        async with asyncio.timeout(10):
            while sum(runs.values()) < 4:
                await asyncio.sleep(0.01)
        # When one running job's key is overwritten with another type, for longer than two locks
        key = q.keys.job("j2")
        redis_client.delete(key)
        if kind == "string":
            redis_client.set(key, "overwritten")
        else:
            redis_client.sadd(key, "x")
        await asyncio.sleep(1.5)
        gate.set()
        async with asyncio.timeout(10):
            while (c := await q.counts())["completed"] + c["dead"] < 4:
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        assert not task.done()
        assert await w.close() == 0
        await task
        # Then the others kept their locks (no stall), ran once and completed; that job is dead and corrupt
        assert runs == {"j0": 1, "j1": 1, "j2": 1, "j3": 1}
        c = await q.counts()
        assert c["completed"] == 3 and c["dead"] == 1 and c["active"] == 0 and c["waiting"] == 0
        for jid in ("j0", "j1", "j3"):
            info = await q.get_job(jid)
            assert info.state == "completed" and info.stalled == 0 and info.attempts_made == 1
        (dead,) = await q.dead()
        assert dead.id == "j2" and dead.error is not None and f"held a {kind}, not a hash" in dead.error
        assert redis_client.smembers(q.keys.corrupt) == {"j2"}
        assert redis_client.type(key + ":corrupt") == kind
        await q.close()

    asyncio.run(main())
