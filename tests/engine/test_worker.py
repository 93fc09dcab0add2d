"""The Worker in-process against the session's Redis: the job lifecycle through the API."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import pytest
import redis

from engine_helpers import run_worker_until
from waiting import timing_allowance
from qsim.engine import EXIT_CUT_OFF, EXIT_DRAINED, AsyncQueue, Backoff, Job, Worker
from qsim.errors import UnrecoverableError

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.5, "handle_signals": False}


def done(q: AsyncQueue, n: int, state: str = "completed") -> Any:
    async def cond() -> bool:
        return (await q.counts())[state] >= n

    return cond


def test_worker_runs_jobs_and_records_timestamps(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add_bulk([("double", {"n": i}) for i in range(30)])

        async def handler(job: Job) -> dict[str, int]:
            return {"n": job.data["n"] * 2}

        w = Worker("q", handler, redis=redis_url, concurrency=5, **FAST)
        assert await run_worker_until(w, done(q, 30)) == EXIT_DRAINED
        recs = await q.job_records()
        assert len(recs) == 30
        for r in recs:
            assert r.state == "completed" and r.returnvalue == {"n": r.data["n"] * 2}
            assert r.enqueued_at <= r.started_at <= r.finished_at  # type: ignore[operator]
            assert [a.outcome for a in r.attempts] == ["completed"] and r.attempts[0].worker == w.id
            assert r.attempts[0].start == r.started_at and r.attempts[0].end == r.finished_at
        assert (await q.counts())["active"] == 0
        await q.close()

    asyncio.run(main())


def test_priority_order_and_fifo_within_a_level(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        for jid, prio in [("a", 5), ("b", 1), ("c", 5), ("d", 1), ("e", 0)]:
            await q.add("t", {}, priority=prio, job_id=jid)
        seen: list[str] = []

        async def handler(job: Job) -> None:
            seen.append(job.id)

        w = Worker(["q"], handler, redis=redis_url, concurrency=1, **FAST)
        await run_worker_until(w, done(q, 5))
        assert seen == ["e", "b", "d", "a", "c"]
        await q.close()

    asyncio.run(main())


def test_idle_worker_picks_up_within_milliseconds_and_delayed_on_time(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)

        async def handler(job: Job) -> None:
            return None

        w = Worker("q", handler, redis=redis_url, concurrency=2, **FAST)
        task = asyncio.ensure_future(w.run())
        await asyncio.sleep(0.2)  # the worker is idle, blocked on Redis
        for i in range(20):
            await q.add("t", {}, job_id=f"p{i}")
            await asyncio.sleep(0.02)
        await q.add("t", {}, job_id="late", delay=0.3)
        async with asyncio.timeout(5):
            while (await q.counts())["completed"] < 21:
                await asyncio.sleep(0.01)
        assert await w.close() == EXIT_DRAINED
        await task
        waits = [(r.started_at - r.enqueued_at) for r in await q.job_records() if r.id != "late"]  # type: ignore[operator]
        # within milliseconds (5 ms idle, stretched by the machine's load), the delayed one on time
        assert statistics.median(waits) < timing_allowance(0.005) and max(waits) < timing_allowance(0.1), waits
        late = await q.get_job("late")
        assert 0.3 <= late.started_at - late.enqueued_at < 0.3 + timing_allowance(0.15)  # type: ignore[operator]
        await q.close()

    asyncio.run(main())


def test_retries_follow_the_backoff_then_dead_letter(redis_url: str, redis_client: redis.Redis) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("flaky", {"k": 1}, attempts=3, backoff=Backoff.exponential(0.2), job_id="f")
        calls: dict[str, int] = {}

        async def handler(job: Job) -> None:
            calls[str(job.attempt)] = calls.get(str(job.attempt), 0) + 1
            raise RuntimeError(f"attempt {job.attempt} broke")

        w = Worker("q", handler, redis=redis_url, concurrency=2, **FAST)
        seen: list[str] = []
        for ev in ("failed", "retrying", "dead"):
            w.on(ev, lambda job, exc, ev=ev: seen.append(ev))
        await run_worker_until(w, done(q, 1, "dead"))
        assert calls == {"1": 1, "2": 1, "3": 1}
        assert seen == ["failed", "retrying", "failed", "retrying", "failed", "dead"]
        (dead,) = await q.dead()
        assert dead.id == "f" and dead.error == "RuntimeError: attempt 3 broke"
        assert "raise RuntimeError" in dead.traceback and dead.attempts_made == 3  # type: ignore[operator]
        a = dead.attempts
        assert [x.outcome for x in a] == ["failed"] * 3
        gap1, gap2 = a[1].start - a[0].end, a[2].start - a[1].end
        # a retry is due on the delayed set's whole milliseconds (its score), so it may start up to 1 ms before
        # end + backoff, the end being recorded to the microsecond
        assert 0.199 <= gap1 < 0.35 and 0.399 <= gap2 < 0.55, (gap1, gap2)
        assert dead.finished_at == a[2].end
        events = [e["event"] for e in await q.events()]
        assert events == ["failed", "retrying", "failed", "retrying", "failed", "dead"]
        await q.close()

    asyncio.run(main())


def test_retry_from_the_dead_letter_queue(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {}, job_id="x")
        broken = [True]

        async def handler(job: Job) -> str:
            if broken[0]:
                raise ValueError("not yet")
            return "ok"

        w = Worker("q", handler, redis=redis_url, **FAST)
        await run_worker_until(w, done(q, 1, "dead"))
        broken[0] = False
        assert await q.retry_dead("x") == ["x"]
        w = Worker("q", handler, redis=redis_url, **FAST)
        await run_worker_until(w, done(q, 1))
        job = await q.get_job("x")
        assert job.state == "completed" and job.returnvalue == "ok"
        assert [a.outcome for a in job.attempts] == ["failed", "completed"]
        assert await q.retry_dead(all_jobs=True) == [] and await q.purge_dead() == 0
        await q.close()

    asyncio.run(main())


def test_timeout_cancels_the_attempt_and_unrecoverable_skips_retries(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("slow", {}, timeout=0.2, attempts=2, job_id="slow")
        await q.add("fatal", {}, attempts=5, job_id="fatal")
        cancelled: list[str] = []

        async def handler(job: Job) -> None:
            if job.name == "fatal":
                raise UnrecoverableError("no point retrying")
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.append(job.id)
                raise

        w = Worker("q", handler, redis=redis_url, concurrency=3, **FAST)
        t0 = time.monotonic()
        await run_worker_until(w, done(q, 2, "dead"))
        assert time.monotonic() - t0 < 2.0
        slow, fatal = await q.get_job("slow"), await q.get_job("fatal")
        assert slow.error == "TimeoutError: attempt timed out after 0.2 s" and slow.attempts_made == 2
        assert cancelled == ["slow", "slow"]
        assert all(0.19 <= a.end - a.start < 0.35 for a in slow.attempts)
        assert fatal.attempts_made == 1 and fatal.error == "UnrecoverableError: no point retrying"
        await q.close()

    asyncio.run(main())


def test_corrupt_job_goes_to_the_dlq_and_the_worker_keeps_going(redis_url: str, redis_client: redis.Redis) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {}, job_id="bad")
        await q.add("t", {}, job_id="nameless")
        await q.add("t", {}, job_id="good")
        redis_client.hset(q.keys.job("bad"), "data", "{not json")
        redis_client.hdel(q.keys.job("nameless"), "name", "max_attempts")

        async def handler(job: Job) -> int:
            return 1

        w = Worker("q", handler, redis=redis_url, **FAST)
        await run_worker_until(w, done(q, 2, "dead"))
        bad = await q.get_job("bad")
        assert bad.state == "dead" and bad.error.startswith("PayloadError: job data is not valid JSON")  # type: ignore[union-attr]
        assert bad.data_error is not None
        nameless = await q.get_job("nameless")
        assert nameless.state == "dead" and "no name" in nameless.error  # type: ignore[operator]
        assert (await q.get_job("good")).state == "completed"
        await q.close()

    asyncio.run(main())


def test_a_plain_def_handler_dead_letters_at_once_saying_why_and_a_retry_after_the_fix_runs_it(
        redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("t", {}, job_id="j", attempts=3)

        def plain(job: Job) -> int:  # a plain def: its 1 cannot be awaited
            return 1

        # Given a worker whose handler is a plain function
        worker = Worker("q", plain, redis=redis_url, **FAST)  # type: ignore[arg-type]
        await run_worker_until(worker, done(q, 1, "dead"))
        job = await q.get_job("j")
        # Then the job went to the DLQ on its first attempt (no retry mends a handler), saying what is wrong
        assert job.state == "dead" and job.attempts_made == 1, job
        assert "the handler returned int, not an awaitable" in (job.error or "")
        assert "async def handler(job)" in (job.error or "")
        # and once the handler is fixed, a retry from the DLQ runs it
        assert await q.retry_dead("j") == ["j"]

        async def fixed(job: Job) -> int:
            return 1

        await run_worker_until(Worker("q", fixed, redis=redis_url, **FAST), done(q, 1))
        assert (await q.get_job("j")).returnvalue == 1
        await q.close()

    asyncio.run(main())


def test_sensitive_fields_are_redacted_in_events_errors_and_dlq(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url, redact=("password", "token"))
        await q.add("login", {"user": "bob", "password": "hunter2"}, job_id="x")

        async def handler(job: Job) -> None:
            await job.progress({"step": 1, "token": "abc123"})
            raise PermissionError(f"bad password {job.data['password']} for {job.data['user']}")

        w = Worker("q", handler, redis=redis_url, redact=("password", "token"), **FAST)
        progress: list[Any] = []
        w.on("progress", lambda job, v: progress.append(v))
        await run_worker_until(w, done(q, 1, "dead"))
        (dead,) = await q.dead()
        assert dead.data == {"user": "bob", "password": "***"}
        assert dead.error == "PermissionError: bad password *** for bob"
        assert "hunter2" not in (dead.traceback or "") and "hunter2" not in json.dumps(await q.events())
        ev = [e for e in await q.events() if e["event"] == "progress"]
        assert json.loads(ev[0]["progress"]) == {"step": 1, "token": "***"}
        assert progress == [{"step": 1, "token": "abc123"}]  # the handler's own callback sees its value
        assert (await q.get_job("x")).data["password"] == "hunter2"  # stored as given
        assert "bad password *** for bob" in caplog.text and "hunter2" not in caplog.text
        await q.close()

    asyncio.run(main())


def test_close_hands_cut_off_jobs_back_at_once(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add_bulk([("long", {}, {"job_id": "l1"}), ("long", {}, {"job_id": "l2"}),
                          ("short", {}, {"job_id": "s1"})])

        async def handler(job: Job) -> None:
            await asyncio.sleep(10 if job.name == "long" else 0.1)

        w = Worker("q", handler, redis=redis_url, concurrency=3, shutdown_grace=0.5, **FAST)
        task = asyncio.ensure_future(w.run())
        async with asyncio.timeout(5):
            while (await q.counts())["active"] < 3:
                await asyncio.sleep(0.01)
        t0 = time.monotonic()
        code = await w.close()
        assert code == EXIT_CUT_OFF and await task == EXIT_CUT_OFF
        assert time.monotonic() - t0 < 1.5
        c = await q.counts()
        assert c["waiting"] == 2 and c["active"] == 0 and c["completed"] == 1
        for jid in ("l1", "l2"):
            j = await q.get_job(jid)
            assert j.state == "waiting" and j.attempts_made == 0
            assert [a.outcome for a in j.attempts] == ["released"]
        await q.close()

    asyncio.run(main())


def test_worker_config_is_validated() -> None:
    async def h(job: Job) -> None:
        return None

    with pytest.raises(ValueError, match="concurrency must be an int >= 1, got 0"):
        Worker("q", h, concurrency=0)
    with pytest.raises(ValueError, match="lock_duration must be > 0 seconds, got -1"):
        Worker("q", h, lock_duration=-1)
    with pytest.raises(ValueError, match="policy must be one of priority, ordered, wrr, got 'fair'"):
        Worker(["a", "b"], h, policy="fair")
    with pytest.raises(ValueError, match="weights name a queue this worker does not serve: 'c'"):
        Worker(["a", "b"], h, policy="wrr", weights={"c": 1})
    with pytest.raises(ValueError, match="weight of queue 'a' must be an int >= 1, got 0"):
        Worker(["a", "b"], h, policy="wrr", weights={"a": 0})
    with pytest.raises(ValueError, match="must not repeat"):
        Worker(["a", "a"], h)
    with pytest.raises(ValueError, match="event must be one of"):
        Worker("q", h).on("finished", print)


def test_retention_trims_completed_jobs(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.set_retention(keep_count=5)
        await q.add_bulk([("t", {}) for _ in range(20)])

        async def handler(job: Job) -> None:
            return None

        w = Worker("q", handler, redis=redis_url, **FAST)

        async def drained() -> bool:
            c = await q.counts()
            return c["waiting"] == 0 and c["active"] == 0

        await run_worker_until(w, drained)
        assert (await q.counts())["completed"] == 5 and len(await q.job_records()) == 5
        await q.close()

    asyncio.run(main())


def test_locks_are_renewed_while_a_long_job_runs(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("long", {}, job_id="L")

        async def handler(job: Job) -> str:
            await asyncio.sleep(2.5)  # > 2 lock durations
            return "done"

        # a lock of 1 s renewed every 0.5 s: robust to a loaded machine, yet the job outlives 2 locks
        w = Worker("q", handler, redis=redis_url, lock_duration=1.0, stalled_interval=0.2, handle_signals=False)
        await run_worker_until(w, done(q, 1))
        job = await q.get_job("L")
        assert job.stalled == 0 and [a.outcome for a in job.attempts] == ["completed"]
        assert job.returnvalue == "done"
        await q.close()

    asyncio.run(main())


def test_retention_by_age(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.set_retention(keep_count=None, keep_age=0.2)
        await q.add("t", {}, job_id="old")

        async def handler(job: Job) -> None:
            return None

        w = Worker("q", handler, redis=redis_url, **FAST)
        task = asyncio.ensure_future(w.run())
        async with asyncio.timeout(5):
            while (await q.counts())["completed"] < 1:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
            await q.add("t", {}, job_id="new")  # its completion trims what is older than 0.2 s
            while (await q.counts())["waiting"] or (await q.counts())["active"]:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
        await w.close()
        await task
        assert [r.id for r in await q.job_records()] == ["new"]
        await q.close()

    asyncio.run(main())


def test_idle_worker_blocks_instead_of_polling(redis_url: str, redis_client: redis.Redis) -> None:
    def script_calls() -> int:
        stats = redis_client.info("commandstats")
        return sum(int(v["calls"]) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_blpop"))

    before, after, _ = asyncio.run(_idle_worker(redis_url, script_calls, settle=0.3, idle=1.0))
    assert after - before <= 1, f"{after - before} calls while idle"


def test_an_idle_workers_timed_out_wait_fetches_nothing_from_an_empty_queue(
    redis_url: str, redis_client: redis.Redis
) -> None:
    # Given a worker waiting on an empty queue with a 0.2 s block_timeout
    def calls() -> tuple[int, int]:
        stats = redis_client.info("commandstats")
        return tuple(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("blpop", "zpopmin"))  # type: ignore[return-value]

    async def main() -> tuple[tuple[int, int], tuple[int, int]]:
        w = Worker("q", _none, redis=redis_url, stalled_interval=30, lock_duration=30, block_timeout=0.2,
                   handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await _blocked(redis_url)
        before = calls()
        await asyncio.sleep(1.5)
        after = calls()
        await w.close()
        assert await task == EXIT_DRAINED
        return before, after

    before, after = asyncio.run(main())
    # When its waits time out, over and over; Then each is followed by an idle check (a promotion that would
    # re-arm the marker), never by a fetch (the fetch script's ZPOPMIN): nothing waits, nothing is fetched
    assert after[0] - before[0] >= 3, "the blocking waits did not time out"
    assert after[1] - before[1] == 0, f"{after[1] - before[1]} fetches from an empty queue while idle"


def test_a_wake_up_lost_with_a_dead_worker_is_given_again_within_a_block_timeout(
    redis_url: str, redis_client: redis.Redis
) -> None:
    # Given a worker waiting on its queue's marker (block_timeout 0.5 s)
    async def main() -> float:
        done: list[float] = []

        async def handler(job: Job) -> None:
            done.append(time.monotonic())

        w = Worker("q", handler, redis=redis_url, stalled_interval=30, lock_duration=30, block_timeout=0.5,
                   handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await _blocked(redis_url)
        # When a job is added and its wake-up taken at once by a worker that then died (the add and the pop in
        # one transaction: the waiting worker never sees the push)
        q = AsyncQueue("q", redis=redis_url)
        keys = q.keys
        await q.close()
        p = redis_client.pipeline(transaction=True)
        p.zadd(keys.wait, {"lost": 2**31})
        p.hset(f"{keys.job_prefix}lost", mapping={"name": "t", "data": "null", "priority": 0, "delay": 0,
                                                 "max_attempts": 1, "enqueued_at": time.time(), "state": "waiting",
                                                 "attempts_made": 0, "stalled": 0})
        p.rpush(keys.marker, "1")
        p.lpop(keys.marker)
        p.execute()
        added = time.monotonic()
        try:
            async with asyncio.timeout(10):
                while not done:
                    await asyncio.sleep(0.02)
        finally:
            await w.close()
            await task
        return done[0] - added

    # Then the worker's next timed-out wait re-arms the marker and the job runs within about a block_timeout
    took = asyncio.run(main())
    assert took < 0.5 + timing_allowance(1.0), f"the job waited {took:.2f} s"


async def _none(job: Job) -> None:
    return None


def test_an_idle_workers_blpop_runs_its_whole_block_timeout_on_one_connection(
    redis_url: str, redis_client: redis.Redis
) -> None:
    # redis-py 8 reads with a 5 s socket timeout by default: the worker's own must outlast its BLPOP,
    # or every idle 5 s block ends in a client-side timeout and a new connection
    def connections() -> int:
        return int(redis_client.info("stats")["total_connections_received"])

    before, after, code = asyncio.run(_idle_worker(redis_url, connections, settle=0.5, idle=6.0))  # > one BLPOP
    assert code == EXIT_DRAINED
    assert after - before == 0, f"{after - before} new connections while idle"


async def _blocked(redis_url: str, timeout: float = 30.0) -> None:
    """Return once a client of the server waits in a blocking command (the worker's BLPOP)."""
    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + timeout
        while int(client.info("clients")["blocked_clients"]) < 1:
            assert time.monotonic() < deadline, f"no worker blocked on its BLPOP within {timeout} s"
            await asyncio.sleep(0.02)
    finally:
        client.close()


async def _idle_worker(redis_url: str, count: Any, *, settle: float, idle: float) -> tuple[int, int, int]:
    """``count()`` before and after ``idle`` s of a worker with nothing to do (started ``settle`` s earlier),
    and the worker's exit code."""
    async def handler(job: Job) -> None:
        return None

    w = Worker("q", handler, redis=redis_url, stalled_interval=30, lock_duration=30, handle_signals=False)
    task = asyncio.ensure_future(w.run())
    await _blocked(redis_url)  # started up and waiting on its BLPOP (a busy machine takes longer than `settle`)
    await asyncio.sleep(settle)
    before = count()
    await asyncio.sleep(idle)
    after = count()
    await w.close()
    return before, after, await task


def test_event_stream_is_capped(redis_url: str, redis_client: redis.Redis) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url, events_maxlen=10)
        await q.add_bulk([("t", {}) for _ in range(500)])

        async def handler(job: Job) -> None:
            return None

        w = Worker("q", handler, redis=redis_url, events_maxlen=10, **FAST)
        await run_worker_until(w, done(q, 500))
        await q.close()

    asyncio.run(main())
    assert redis_client.xlen("qsim:{q}:events") < 250  # approximate trimming (MAXLEN ~)


def test_a_result_that_is_not_json_fails_the_attempt(redis_url: str) -> None:
    async def main() -> None:
        async with AsyncQueue("q", redis=redis_url) as q:
            await q.add("t", {}, job_id="x", attempts=2)

            async def handler(job: Job) -> object:
                return {"when": time}  # a module: not JSON

            w = Worker("q", handler, redis=redis_url, **FAST)
            await run_worker_until(w, done(q, 1, "dead"))
            job = await q.get_job("x")
            assert job.attempts_made == 2 and job.outcome == "dead"
            assert job.error.startswith("PayloadError: job x return value.when: module is not JSON")  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_worker_whose_stalled_check_is_sending_when_it_stops_still_exits(redis_url: str) -> None:
    # On Python 3.11 a cancel that lands while a task is in asyncio.wait_for, whose awaitable just finished, is
    # lost; redis-py sends every command through wait_for when the client has a socket timeout (the worker's has).
    # The worker's stalled-job check (a loop) then went on after its one cancel, and run() never returned: the
    # SIGTERM'd worker that now and then did not exit.
    async def handler(job: Job) -> None:
        return None

    async def main() -> list[float]:
        took = []
        for _ in range(20):
            # Given an idle worker whose stalled-job check sends to Redis back to back (every 1 ms)
            w = Worker("q", handler, redis=redis_url, lock_duration=1.0, stalled_interval=0.001,
                       handle_signals=False)
            task = asyncio.ensure_future(w.run())
            await asyncio.sleep(0.05)
            # When it is closed
            t0 = time.monotonic()
            try:
                async with asyncio.timeout(10):
                    assert await w.close() == EXIT_DRAINED and await task == EXIT_DRAINED
            except TimeoutError:
                task.cancel()
                raise AssertionError(f"close() did not end the worker within 10 s (run {len(took) + 1})") from None
            took.append(time.monotonic() - t0)
        return took

    # Then it stops every time, at once
    took = asyncio.run(main())
    assert max(took) < 5.0, took
