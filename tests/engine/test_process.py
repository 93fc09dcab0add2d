"""Real worker processes and real signals: crash recovery, graceful shutdown, Redis restarts."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from engine_helpers import wait_until
from qsim.engine import EXIT_CUT_OFF, AsyncQueue, Job, Queue, Worker
from qsim.engine import protocol as P
from qsim.engine.scripts import ScriptSet, run_calls
from qsim.errors import RedisUnavailable
from redis_server import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.chaos]


def started(r: redis.Redis, n: int) -> list[str]:
    return r.lrange("test:started", 0, -1) if r.llen("test:started") >= n else []  # type: ignore[return-value]


def test_sigkilled_worker_jobs_recovered_once_and_late_completion_refused(
    redis_url: str, redis_client: redis.Redis, queue: Queue, spawn_worker: Any
) -> None:
    # Given a worker running two jobs
    queue.add_bulk([("t", {"sleep": 1.0}, {"job_id": "k1"}), ("t", {"sleep": 1.0}, {"job_id": "k2"})])
    a = spawn_worker(redis_url, concurrency=2)
    wait_until(lambda: started(redis_client, 2), timeout=20)
    old_token = redis_client.hget(queue.keys.job("k1"), "token")
    old_worker = redis_client.hget(queue.keys.job("k1"), "worker")
    # When it is SIGKILLed mid-job and another worker starts
    a.send_signal(signal.SIGKILL)
    a.wait(5)
    b = spawn_worker(redis_url, concurrency=2)
    # Then the new worker recovers both after the lock expires and completes each exactly once
    wait_until(lambda: queue.counts()["completed"] == 2, timeout=20)
    done = redis_client.lrange("test:done", 0, -1)
    assert sorted(d.split(":")[0] for d in done) == ["k1", "k2"]
    assert all(d.endswith(f":{b.pid}") for d in done)
    for jid in ("k1", "k2"):
        job = queue.get_job(jid)
        assert job.stalled == 1 and job.attempts_made == 1
        assert [x.outcome for x in job.attempts] == ["stalled", "completed"]
        assert job.attempts[0].worker == old_worker and job.attempts[1].worker != old_worker
        assert job.returnvalue == {"pid": b.pid}
    # And a late completion with the killed worker's token is refused (no double completion)
    scripts = ScriptSet(redis_client)
    codes = run_calls(redis_client, scripts, [P.complete_call(queue.keys, 100, -1, -1, [("k1", old_token, "1")])])
    assert codes == [[-1]]
    assert queue.get_job("k1").returnvalue == {"pid": b.pid}
    events = [e["event"] for e in queue.events()]
    assert events.count("stalled") == 2 and events.count("completed") == 2
    b.send_signal(signal.SIGTERM)
    assert b.wait(10) == 0


def test_sigterm_with_long_grace_drains_and_exits_0(
    redis_url: str, redis_client: redis.Redis, queue: Queue, spawn_worker: Any
) -> None:
    queue.add_bulk([("t", {"sleep": 0.5}) for _ in range(4)] + [("t", {"sleep": 0}) for _ in range(3)])
    w = spawn_worker(redis_url, concurrency=4, grace=10)
    wait_until(lambda: started(redis_client, 4), timeout=20)
    w.send_signal(signal.SIGTERM)
    assert w.wait(10) == 0
    c = queue.counts()
    # lost 0: every job is completed or still waiting (the worker stopped fetching)
    assert c["active"] == 0 and c["completed"] >= 4 and c["completed"] + c["waiting"] == 7


def test_sigterm_with_short_grace_hands_jobs_back_and_exits_cut_off(
    redis_url: str, redis_client: redis.Redis, queue: Queue, spawn_worker: Any
) -> None:
    queue.add_bulk([("t", {"sleep": 30}, {"job_id": f"l{i}"}) for i in range(2)] + [("t", {}) for _ in range(3)])
    w = spawn_worker(redis_url, concurrency=2, grace=0.3)
    wait_until(lambda: started(redis_client, 2), timeout=20)
    t0 = time.monotonic()
    w.send_signal(signal.SIGTERM)
    assert w.wait(10) == EXIT_CUT_OFF
    assert time.monotonic() - t0 < 5
    c = queue.counts()
    assert c["waiting"] == 5 and c["active"] == 0 and c["completed"] == 0
    for i in range(2):
        job = queue.get_job(f"l{i}")
        assert job.state == "waiting" and [a.outcome for a in job.attempts] == ["released"]


def test_second_signal_forces(redis_url: str, redis_client: redis.Redis, queue: Queue, spawn_worker: Any) -> None:
    queue.add("t", {"sleep": 30}, job_id="x")
    w = spawn_worker(redis_url, concurrency=1, grace=60)
    wait_until(lambda: started(redis_client, 1), timeout=20)
    t0 = time.monotonic()
    w.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert w.poll() is None  # still draining
    w.send_signal(signal.SIGINT)
    assert w.wait(10) == EXIT_CUT_OFF
    took = time.monotonic() - t0
    assert queue.get_job("x").state == "waiting"
    # and the log says when and why the job was cut off: seconds after the first signal, not the 60 s grace
    cut = [line for line in w.communicate()[1].decode().splitlines() if "cutting off" in line]
    assert len(cut) == 1 and "(on a second signal)" in cut[0], cut
    waited = float(re.search(r"after ([0-9.]+) s", cut[0]).group(1))  # type: ignore[union-attr]
    assert 0.2 <= waited <= took, cut


def test_worker_reconnects_after_a_redis_restart_and_loses_no_job(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "aof-redis", extra_args=["--appendonly", "yes", "--appendfsync", "always"]).start()
    try:
        async def main() -> None:
            q = AsyncQueue("q", redis=server.url)
            await q.add_bulk([("t", {"i": i}) for i in range(60)])

            async def handler(job: Job) -> int:
                await asyncio.sleep(0.05)
                return int(job.data["i"])

            w = Worker("q", handler, redis=server.url, concurrency=4, lock_duration=10.0, stalled_interval=1.0,
                       handle_signals=False)
            task = asyncio.ensure_future(w.run())
            async with asyncio.timeout(10):
                while (await q.counts())["completed"] < 8:
                    await asyncio.sleep(0.02)
            await asyncio.to_thread(server.restart)  # the worker's connections drop
            async with asyncio.timeout(30):
                while True:
                    try:
                        if (await q.counts())["completed"] == 60:
                            break
                    except Exception:  # noqa: BLE001 - Redis may still be loading
                        pass
                    await asyncio.sleep(0.05)
            assert await w.close() == 0
            await task
            recs = await q.job_records()
            assert len(recs) == 60 and all(r.state == "completed" for r in recs)
            assert sorted(r.returnvalue for r in recs) == list(range(60))
            await q.close()

        asyncio.run(main())
    finally:
        server.stop()


def test_worker_survives_losing_an_unpersisted_redis(own_redis: RedisServer) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=own_redis.url)

        async def handler(job: Job) -> None:
            return None

        w = Worker("q", handler, redis=own_redis.url, handle_signals=False, lock_duration=5.0)
        task = asyncio.ensure_future(w.run())
        await q.add("t", {}, job_id="before")
        async with asyncio.timeout(5):
            while (await q.counts())["completed"] < 1:
                await asyncio.sleep(0.01)
        own_redis.kill()
        await asyncio.sleep(0.5)
        await asyncio.to_thread(own_redis.start)
        # a fresh, empty Redis. The producer never resends behind the caller's back: the first command on
        # its stale connection raises, the caller retries with the same job_id, the producer reconnects
        for attempt in range(3):
            try:
                await q.add("t", {}, job_id="after")
                break
            except RedisUnavailable:
                assert attempt < 2
                await asyncio.sleep(0.1)
        async with asyncio.timeout(15):
            while (await q.counts())["completed"] < 1:
                await asyncio.sleep(0.02)
        assert await w.close() == 0
        await task
        assert (await q.get_job("after")).state == "completed"
        await q.close()

    asyncio.run(main())
