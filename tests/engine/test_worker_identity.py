"""What a worker tells apart and warns about: lock tokens unique per process even with a fixed
``worker_id``, and a Redis that may evict keys."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import redis

from engine_helpers import run_worker_until
from qsim.engine import AsyncQueue, Job, Worker

pytestmark = pytest.mark.redis


def test_workers_with_a_fixed_id_never_repeat_a_lock_token(redis_url: str) -> None:
    # Given two workers (replicas, or a restart) with the same fixed worker_id, and a rate limit of
    # 2 starts per 10 s whose window counts starts by their lock token
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.set_rate_limit(2, 10.0)
        tokens: list[str] = []

        async def handler(job: Job) -> None:
            tokens.append(job.token)

        def ran(n: int) -> Any:
            async def cond() -> bool:
                return (await q.counts())["completed"] >= n

            return cond

        for n in (1, 2):  # one job for each worker
            await q.add("t", {}, job_id=f"j{n}")
            w = Worker("q", handler, redis=redis_url, worker_id="pod-0", concurrency=1, handle_signals=False)
            await run_worker_until(w, ran(n))
        await q.add("t", {}, job_id="j3")
        w = Worker("q", handler, redis=redis_url, worker_id="pod-0", concurrency=1, handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await asyncio.sleep(0.5)
        await w.close()
        await task
        # Then their tokens differ, both starts count in the window, and the third job waits for it
        assert len(tokens) == 2 and tokens[0] != tokens[1], tokens
        assert all(t.startswith("pod-0:") for t in tokens)
        assert (await q.limits())["rate_window"] == 2
        assert (await q.counts())["waiting"] == 1
        await q.close()

    asyncio.run(main())


@pytest.mark.parametrize("policy, warned", [("allkeys-lru", True), ("volatile-ttl", True), ("noeviction", False)])
def test_the_worker_warns_at_start_when_redis_may_evict_job_keys(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture, policy: str, warned: bool
) -> None:
    old = redis_client.config_get("maxmemory-policy")["maxmemory-policy"]
    redis_client.config_set("maxmemory-policy", policy)

    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {})

        async def handler(job: Job) -> None:
            return None

        async def done() -> bool:
            return (await q.counts())["completed"] == 1

        with caplog.at_level(logging.WARNING, logger="qsim.engine.worker"):
            await run_worker_until(Worker("q", handler, redis=redis_url, handle_signals=False), done)
        await q.close()

    try:
        asyncio.run(main())
    finally:
        redis_client.config_set("maxmemory-policy", old)
    found = [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert bool(found) == warned, caplog.text
    if warned:
        assert policy in found[0].getMessage() and "noeviction" in found[0].getMessage()
