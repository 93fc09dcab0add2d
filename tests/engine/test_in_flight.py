"""The in_flight metric read from Redis: the engine's waiting + active jobs, and a BullMQ queue's keys."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from bullmq_node import BullMQ, node_missing  # type: ignore[import-not-found]
from qsim import Scenario
from qsim.bullmq.gauges import bullmq_counts
from qsim.engine import AsyncQueue, Job, Worker
from qsim.harness.autoscaling import EngineAutoscaler
from qsim.harness.processes import WorkerProcesses

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.5, "handle_signals": False}


def scenario(metric: str) -> Scenario:
    return Scenario.from_dict({
        "name": "in-flight", "duration": 10.0, "queues": [{"name": "slow"}],
        "jobs": [{"name": "nap", "queue": "slow", "service": {"kind": "constant", "mean": 1.0},
                  "arrival": {"kind": "poisson", "rate": 1.0}}],
        "pools": [{"name": "p", "queues": ["slow"], "workers": 2}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 20, "policy": "hpa", "metric": metric, "target": 1.0}]})


@pytest.mark.parametrize(("metric", "wanted"), [("in_flight", 5), ("list_length", 3)])
def test_the_engine_autoscaler_reads_waiting_plus_active(redis_url: str, metric: str, wanted: int) -> None:
    async def main() -> None:
        # Given 5 jobs on a queue, 2 of them held running by a worker of concurrency 2
        q = AsyncQueue("slow", redis=redis_url)
        await q.add_bulk([("nap", {}) for _ in range(5)])
        release = asyncio.Event()

        async def handler(job: Job) -> None:
            await release.wait()

        w = Worker("slow", handler, redis=redis_url, concurrency=2, **FAST)
        task = asyncio.ensure_future(w.run())
        async with asyncio.timeout(5):
            while (await q.counts())["active"] < 2:
                await asyncio.sleep(0.01)
        s = scenario(metric)
        pools = WorkerProcesses(s, redis_url, prefix="qsim", ready_key="unused")
        auto = EngineAutoscaler(s, s.autoscalers[0], pools, url=redis_url, prefix="qsim", seed=0,
                                loop_t0=asyncio.get_running_loop().time())
        try:
            # When the engine's autoscaler observes the queue (the gauges every KEDA trigger reads)
            obs = await auto.observe(0.0, 2, 2)
            # Then in_flight counts the 3 waiting and the 2 running, list_length the waiting only,
            # and an HPA of 1 per replica asks for that many
            assert (obs.list_length, obs.in_flight) == (3, 5)
            assert auto.control.decide(obs) == wanted
        finally:
            auto.collector.close()
            pools.close()
            release.set()
            await w.close()
            await task
            for queue in auto.queues:
                await queue.close()
            await q.close()

    asyncio.run(main())


def test_a_bullmq_queue_in_flight_counts_wait_prioritized_and_active(redis_url: str) -> None:
    # Given BullMQ's keys as its scripts write them: 3 in the wait list, 2 prioritized, 1 active, 4 delayed
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    client.rpush("bull:orders:wait", "1", "2", "3")
    client.zadd("bull:orders:prioritized", {"4": 2 ** 21, "5": 2 ** 22})
    client.rpush("bull:orders:active", "6")
    client.zadd("bull:orders:delayed", {str(i): 1e6 + i for i in range(7, 11)})
    client.zadd("bull:other:completed", {"x": 1.0})
    # Then waiting counts the list and the prioritized set, in_flight adds the active list, delayed is neither
    got = bullmq_counts(client, "orders")
    assert (got["waiting"], got["active"], got["in_flight"], got["delayed"]) == (5, 1, 6, 4)
    assert bullmq_counts(client, "other")["completed"] == 1 and bullmq_counts(client, "orders", prefix="x")[
        "in_flight"] == 0
    client.close()


@pytest.mark.skipif(node_missing() is not None, reason=node_missing() or "")
def test_a_real_bullmq6_queue_in_flight(redis_url: str) -> None:
    # Given a BullMQ 6 queue with 4 plain and 3 prioritized jobs, then a worker of concurrency 2 on slow jobs
    bq = BullMQ("6")
    plan = [[0, "plain", {}, {}]] * 4 + [[0, "urgent", {}, {"priority": 1}]] * 3
    bq.produce(redis_url, "orders", plan=plan)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    before = bullmq_counts(client, "orders")
    with bq.worker(redis_url, "orders", concurrency=2, service={"*": {"kind": "constant", "mean": 4.0}}):
        deadline = time.monotonic() + 20
        while bullmq_counts(client, "orders")["active"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        during = bullmq_counts(client, "orders")
    client.close()
    # Then before the worker all 7 wait (the prioritized ones in their sorted set), none is active;
    # with the worker 2 are active, 5 wait, and in flight stays 7
    assert (before["waiting"], before["active"], before["in_flight"]) == (7, 0, 7)
    assert (during["waiting"], during["active"], during["in_flight"]) == (5, 2, 7)
