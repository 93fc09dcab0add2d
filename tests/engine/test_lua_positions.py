"""Where jobs go back in the wait set (the Lua scripts called directly), and the timeout label.

Decision (docs/explanation/engine.md, "Positions in the queue"): a job handed back at shutdown (``release``) or put back
by a stalled check (``recover_stalled``) goes to the FRONT of its priority level, ahead of the jobs
of its level already waiting, never ahead of a better level; a batch keeps its order; a later
put-back goes before an earlier one. Added, retried, promoted jobs take the back of their level.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from qsim.engine import AsyncQueue, Job, Worker
from qsim.engine import protocol as P
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call, ScriptSet, run_calls

pytestmark = pytest.mark.redis

K = QueueKeys("q")


@pytest.fixture
def call(redis_client: redis.Redis) -> Any:
    scripts = ScriptSet(redis_client)

    def run(c: Call) -> Any:
        return run_calls(redis_client, scripts, [c])[0]

    return run


def add(call: Any, *jobs: tuple[str, int]) -> None:
    call(P.add_call(K, [P.JobSpec(jid, "t", "{}", prio, 0, 3, "", 0.0) for jid, prio in jobs]))


def fetch(call: Any, n: int = 10, lock_ms: int = 30000) -> list[P.Fetched]:
    return P.parse_fetch(call(P.fetch_call(K, n, lock_ms, "w1", f"tok{time.monotonic_ns()}")))


def order(redis_client: redis.Redis) -> list[str]:
    """The wait set in the order fetch takes it."""
    return list(redis_client.zrange(K.wait, 0, -1))


def test_handed_back_jobs_go_to_the_front_of_their_level_in_the_order_given(call: Any,
                                                                           redis_client: redis.Redis) -> None:
    # Given four jobs running (two of priority 1, two of priority 3) and a backlog of both levels
    add(call, ("r1", 1), ("r2", 1), ("r3", 3), ("r4", 3))
    running = {f.id: f for f in fetch(call, 4)}
    add(call, ("w1", 1), ("w2", 1), ("w3", 3), ("v0", 0))
    # When the worker hands them back (cut off at shutdown), r2 before r1, r4 before r3
    n = call(P.release_call(K, 100, [(j, running[j].token) for j in ("r2", "r4", "r1", "r3")]))
    assert n == 4
    # Then each is at the front of its own level, the batch in the order given; the better level
    # (v0 at 0) still goes first, and the jobs that waited in their level come after
    assert order(redis_client) == ["v0", "r2", "r1", "w1", "w2", "r4", "r3", "w3"]
    assert [f.id for f in fetch(call, 8)] == ["v0", "r2", "r1", "w1", "w2", "r4", "r3", "w3"]


def test_a_later_put_back_goes_before_an_earlier_one_and_new_adds_after_both(call: Any,
                                                                            redis_client: redis.Redis) -> None:
    add(call, ("a", 2), ("b", 2), ("c", 2))
    got = {f.id: f for f in fetch(call, 3)}
    add(call, ("w", 2))
    call(P.release_call(K, 100, [("a", got["a"].token)]))
    call(P.release_call(K, 100, [("b", got["b"].token, False)]))  # never started: the same place rule
    add(call, ("late", 2))
    assert order(redis_client) == ["b", "a", "w", "late"]
    # and a job retried after a failure takes the back (fail.lua), as one promoted after its backoff
    assert call(P.fail_call(K, 100, [("c", got["c"].token, "E: x", "", 0)])) == [1]
    assert order(redis_client) == ["b", "a", "w", "late", "c"]


def test_stalled_jobs_go_to_the_front_of_their_level_in_lock_expiry_order(call: Any, redis_client: redis.Redis) -> None:
    # Given three jobs locked for 50 ms (x, then y, z a little later: later expiry) and a backlog
    add(call, ("x", 1), ("y", 1), ("z", 4))
    fetch(call, 1, lock_ms=50)
    time.sleep(0.01)
    fetch(call, 2, lock_ms=50)
    add(call, ("w1", 1), ("w4", 4), ("v", 0))
    time.sleep(0.1)  # every lock has expired (their worker died)
    requeued, dead, _ = call(P.recover_stalled_call(K, 100, max_stalled=5))
    # Then each goes to the front of its level, the earliest expiry first
    assert requeued == ["x", "y", "z"] and dead == []
    assert order(redis_client) == ["v", "x", "y", "w1", "z", "w4"]
    assert redis_client.hget(K.job("x"), "stalled") == "1"


def test_scores_stay_inside_their_level_for_the_highest_priority(call: Any, redis_client: redis.Redis) -> None:
    top = P.MAX_PRIORITY
    add(call, ("hi", top - 1), ("lo", top))
    got = {f.id: f for f in fetch(call, 2)}
    add(call, ("w", top))
    call(P.release_call(K, 100, [("lo", got["lo"].token), ("hi", got["hi"].token)]))
    scores = dict(redis_client.zrange(K.wait, 0, -1, withscores=True))
    assert [int(scores[j] // 2**32) for j in ("hi", "lo", "w")] == [top - 1, top, top]
    assert order(redis_client) == ["hi", "lo", "w"]
    assert redis_client.hgetall(K.job("lo"))["state"] == "waiting"


# --------------------------------------------------------------------------- the timeout label


def test_fail_logs_the_outcome_the_worker_sends(call: Any, redis_client: redis.Redis) -> None:
    add(call, ("a", 0), ("b", 0))
    got = {f.id: f for f in fetch(call, 2)}
    codes = call(P.fail_call(K, 100, [("a", got["a"].token, "TimeoutError: attempt timed out after 1 s", "", 0,
                                       "timeout"), ("b", got["b"].token, "E: x", "", 0)]))
    assert codes == [1, 1]
    assert ",timeout,w1;" in redis_client.hget(K.job("a"), "log")
    assert ",failed,w1;" in redis_client.hget(K.job("b"), "log")
    assert redis_client.hget(K.job("a"), "attempts_made") == "1"  # a timeout uses up an attempt


def test_the_worker_labels_a_timed_out_attempt_timeout(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("slow", {"s": 0.5}, job_id="slow", attempts=2, timeout=0.1)
        await q.add("bad", {"s": 0.0}, job_id="bad", attempts=1)

        async def handler(job: Job) -> None:
            await asyncio.sleep(job.data["s"])
            if job.name == "bad":
                raise ValueError("broken")

        w = Worker("q", handler, redis=redis_url, concurrency=2, lock_duration=5.0, stalled_interval=5.0,
                   handle_signals=False)
        task = asyncio.ensure_future(w.run())
        for _ in range(300):
            if (await q.counts())["dead"] == 2:
                break
            await asyncio.sleep(0.02)
        await w.close()
        await task
        slow, bad = await q.get_job("slow"), await q.get_job("bad")
        # Then the engine itself logs each timed-out attempt as "timeout", a raised error as "failed"
        assert [a.outcome for a in slow.attempts] == ["timeout", "timeout"]
        assert slow.error == "TimeoutError: attempt timed out after 0.1 s"
        assert [a.outcome for a in bad.attempts] == ["failed"]
        await q.close()

    asyncio.run(main())
