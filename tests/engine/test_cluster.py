"""The core engine scenarios on a local 3-master Redis Cluster (each script touches one slot)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.cluster

from engine_helpers import run_worker_until
from qsim.engine import AsyncQueue, Backoff, Job, Queue, Worker
from qsim.engine import protocol as P
from qsim.engine.scripts import ScriptSet, run_calls

pytestmark = [pytest.mark.redis, pytest.mark.cluster]

FAST = {"lock_duration": 1.0, "stalled_interval": 0.3, "handle_signals": False}


def done(q: AsyncQueue, n: int, state: str = "completed") -> Any:
    async def cond() -> bool:
        return (await q.counts())[state] >= n

    return cond


def test_queues_live_on_different_nodes_and_run_jobs(cluster_url: str) -> None:
    # Given two queues whose hash tags fall on different masters
    rc = redis.cluster.RedisCluster.from_url(cluster_url.replace("+cluster", ""), decode_responses=True)
    a, b = Queue("orders", redis=rc), Queue("billing", redis=rc)
    nodes = {rc.get_node_from_key(q.keys.wait).name for q in (a, b)}
    assert len(nodes) == 2, nodes
    a.add_bulk([("double", {"n": i}) for i in range(40)])
    b.add_bulk([("double", {"n": i}) for i in range(10)])
    assert a.counts()["waiting"] == 40 and b.counts()["waiting"] == 10

    # When a worker per queue runs them (redis+cluster:// URL)
    async def main() -> None:
        async def handler(job: Job) -> int:
            return int(job.data["n"]) * 2

        for q, n in (("orders", 40), ("billing", 10)):
            aq = AsyncQueue(q, redis=cluster_url)
            w = Worker(q, handler, redis=cluster_url, concurrency=8, **FAST)
            await run_worker_until(w, done(aq, n))
            await aq.close()

    asyncio.run(main())
    # Then every job completed with its result and Redis-clock timestamps
    for q, n in ((a, 40), (b, 10)):
        recs = q.job_records()
        assert len(recs) == n and all(r.state == "completed" and r.returnvalue == r.data["n"] * 2 for r in recs)
        assert all(r.enqueued_at <= r.started_at <= r.finished_at for r in recs)  # type: ignore[operator]
        assert q.counts() == {"waiting": 0, "active": 0, "delayed": 0, "completed": n, "dead": 0,
                              "waiting_children": 0}
    a.close()
    b.close()
    rc.close()


def test_retry_backoff_dead_letter_and_retry_dead(cluster_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("flaky", redis=cluster_url)
        await q.add("t", {}, attempts=3, backoff=Backoff.fixed(0.1), job_id="f")
        await q.add("t", {}, delay=0.2, job_id="late")
        broken = [True]

        async def handler(job: Job) -> str:
            if job.id == "f" and broken[0]:
                raise RuntimeError(f"attempt {job.attempt} broke")
            return "ok"

        w = Worker("flaky", handler, redis=cluster_url, concurrency=2, **FAST)
        await run_worker_until(w, done(q, 1, "dead"))
        (dead,) = await q.dead()
        assert dead.id == "f" and dead.attempts_made == 3 and dead.error == "RuntimeError: attempt 3 broke"
        assert [a.outcome for a in dead.attempts] == ["failed"] * 3
        late = await q.get_job("late")
        assert late.state == "completed" and late.started_at - late.enqueued_at >= 0.2  # type: ignore[operator]
        broken[0] = False
        assert await q.retry_dead("f") == ["f"]
        w = Worker("flaky", handler, redis=cluster_url, **FAST)
        await run_worker_until(w, done(q, 2))
        assert (await q.get_job("f")).returnvalue == "ok"
        assert await q.purge_dead() == 0
        await q.close()

    asyncio.run(main())


def test_stalled_job_is_recovered_and_lost_completion_refused(cluster_url: str) -> None:
    # Given a job fetched by a "worker" that dies holding a 50 ms lock
    q = Queue("stall", redis=cluster_url)
    q.add("t", {}, job_id="s")
    scripts = ScriptSet(q.client)
    (got,) = P.parse_fetch(run_calls(q.client, scripts, [P.fetch_call(q.keys, 1, 50, "dead-worker", "tok")])[0])
    assert got.id == "s" and q.counts()["active"] == 1
    time.sleep(0.1)

    # When a live worker starts (it looks for stalled jobs at once)
    async def main() -> None:
        async def handler(job: Job) -> str:
            return "recovered"

        aq = AsyncQueue("stall", redis=cluster_url)
        await run_worker_until(Worker("stall", handler, redis=cluster_url, **FAST), done(aq, 1))
        await aq.close()

    asyncio.run(main())
    # Then the job ran again; the dead worker's late completion is refused
    job = q.get_job("s")
    assert job.state == "completed" and job.stalled == 1
    assert [a.outcome for a in job.attempts] == ["stalled", "completed"]
    late = run_calls(q.client, scripts, [P.complete_call(q.keys, 100, -1, -1, [("s", got.token, "1")])])[0]
    assert late == [-1]
    q.close()


def test_metrics_read_queue_depth_from_the_cluster(cluster_url: str) -> None:
    from qsim.engine.metrics import WorkerMetrics

    # Given jobs in two queues on different masters, served by one worker each
    async def main() -> None:
        async def handler(job: Job) -> None:
            return None

        for name in ("orders", "billing"):
            q = AsyncQueue(name, redis=cluster_url)
            await q.add_bulk([("t", {}) for _ in range(6)])
            w = Worker(name, handler, redis=cluster_url, **FAST)
            m = WorkerMetrics(w)
            await run_worker_until(w, done(q, 6))
            await q.add("t", {}, delay=30)
            await q.pause()
            await q.add_bulk([("t", {}), ("t", {})])
            # When the registry is collected (as a scrape would)
            get = m.registry.get_sample_value
            # Then counts come from the worker and depths from the queue's node
            assert get("qsim_jobs_completed_total", {"queue": name, "job": "t"}) == 6
            assert get("qsim_queue_jobs", {"queue": name, "state": "waiting"}) == 2
            assert get("qsim_queue_jobs", {"queue": name, "state": "delayed"}) == 1
            assert get("qsim_queue_jobs", {"queue": name, "state": "active"}) == 0
            m.close()
            await q.close()

    asyncio.run(main())


def test_worker_processes_on_the_cluster_recover_a_killed_workers_job(cluster_url: str, spawn_worker: Any) -> None:
    import signal

    from engine_helpers import wait_until

    q = Queue("orders", redis=cluster_url)
    q.add("t", {"sleep": 30}, job_id="long")
    # Given worker process A running the long job
    a = spawn_worker(cluster_url, "orders", concurrency=2)
    started = lambda: q.client.lrange("test:started", 0, -1)  # noqa: E731
    (first,) = wait_until(started, timeout=15)
    assert first.startswith(f"long:1:{a.pid}")
    # When A is SIGKILLed and B starts, with more jobs queued
    a.send_signal(signal.SIGKILL)
    a.wait(10)
    q.add_bulk([("t", {"sleep": 0.01}) for _ in range(20)])
    b = spawn_worker(cluster_url, "orders", concurrency=4)
    q.client.hset(q.keys.job("long"), "data", '{"sleep": 0}')  # the recovered attempt finishes at once
    wait_until(lambda: q.counts()["completed"] == 21, timeout=30, interval=0.05)
    # Then the long job was recovered once (stalled, then completed by B); nothing was lost
    job = q.get_job("long")
    assert [x.outcome for x in job.attempts] == ["stalled", "completed"] and job.stalled == 1
    assert job.returnvalue == {"pid": b.pid}
    assert q.counts() == {"waiting": 0, "active": 0, "delayed": 0, "completed": 21, "dead": 0, "waiting_children": 0}
    b.send_signal(signal.SIGTERM)
    assert b.wait(15) == 0
    q.close()
