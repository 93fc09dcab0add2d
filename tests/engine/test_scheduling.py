"""Scheduling inside the fetch: several queues per worker, aging, global concurrency and rate limits."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis

from engine_helpers import run_worker_until, wait_until
from qsim.engine import AsyncQueue, Job, Queue, Worker
from qsim.engine import protocol as P
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call, ScriptSet, command, run_calls

pytestmark = pytest.mark.redis

A, B, C = QueueKeys("a"), QueueKeys("b"), QueueKeys("c")


@pytest.fixture
def call(redis_client: redis.Redis) -> Any:
    scripts = ScriptSet(redis_client)

    def run(c: Call) -> Any:
        return run_calls(redis_client, scripts, [c])[0]

    return run


def add(call: Any, k: QueueKeys, *jobs: tuple[str, int] | tuple[str, int, str]) -> None:
    """Add (id, priority[, data]) jobs to queue k, one script call each (distinct enqueue times); the
    rate-limit key value is read from the data for the queue's key, as the producers do."""
    field = call(command("HGET", k.meta, "rate_key")) or ""
    for j in jobs:
        data = j[2] if len(j) == 3 else '{"x":1}'  # type: ignore[misc]
        spec = P.with_rate_key(P.JobSpec(j[0], "t", data, j[1], 0, 1, "", 0.0), field)
        call(P.add_call(k, [spec]))


def fetch(call: Any, ks: list[QueueKeys], n: int = 10, policy: str = "priority", weights: Any = None,
          worker: str = "w1") -> tuple[list[str], int, list[int]]:
    got, wait_ms, held, _, _ = P.parse_fetch_status(call(P.fetch_multi_call(ks, n, 30000, worker, "tok", policy,
                                                                           weights)))
    return [f"{ks[int(g.queue_index) - 1].queue}:{g.id}" for g in got], wait_ms, held


def swrr(weights: list[int], picks: int) -> list[int]:
    """Reference smooth weighted round-robin (nginx), all queues eligible."""
    cur, out = [0] * len(weights), []
    for _ in range(picks):
        cur = [c + w for c, w in zip(cur, weights)]
        best = max(range(len(weights)), key=lambda i: (cur[i], -i))
        cur[best] -= sum(weights)
        out.append(best)
    return out


def intervals(recs: list[Any]) -> list[tuple[float, float]]:
    return [(a.start, a.end) for r in recs for a in r.attempts]


def max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(e, -1) for _, e in spans] + [(s, 1) for s, _ in spans])  # ends first at a tie
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def max_in_window(starts_us: list[int], per_us: int) -> int:
    s = sorted(starts_us)
    j, best = 0, 0
    for i in range(len(s)):
        while s[i] - s[j] >= per_us:
            j += 1
        best = max(best, i - j + 1)
    return best


# -- the fetch script, called directly ------------------------------------------------
def test_priority_policy_takes_the_best_priority_across_queues_fifo_within_a_level(call: Any) -> None:
    # Given jobs of priorities 5 and 1 spread over two queues, added in this order
    add(call, A, ("a1", 5), ("a2", 1))
    add(call, B, ("b1", 1), ("b2", 5), ("b3", 0))
    # When one fetch takes them all under policy priority
    got, wait_ms, held = fetch(call, [A, B])
    # Then lowest priority first; within a level, by enqueue order whatever the queue
    assert got == ["b:b3", "a:a2", "b:b1", "a:a1", "b:b2"]
    assert (wait_ms, held) == (-1, [])


def test_ordered_policy_empties_the_first_listed_queue_first(call: Any) -> None:
    add(call, A, ("a1", 0), ("a2", 0))
    add(call, B, ("b1", 0))
    add(call, C, ("c1", 0), ("c2", 0))
    # priorities do not matter across queues under ordered
    add(call, C, ("c0", 0))
    assert fetch(call, [C, A, B], n=4, policy="ordered")[0] == ["c:c1", "c:c2", "c:c0", "a:a1"]
    assert fetch(call, [C, A, B], n=4, policy="ordered")[0] == ["a:a2", "b:b1"]


def test_wrr_follows_smooth_weighted_round_robin_and_keeps_state_between_calls(
    call: Any, redis_client: redis.Redis
) -> None:
    # Given three backlogged queues with weights 5, 3, 1
    for k in (A, B, C):
        add(call, k, *[(f"{k.queue}{i}", 0) for i in range(20)])
    # When a worker fetches 18 jobs in calls of 4, 4, 10
    seq = []
    for n in (4, 4, 10):
        seq += [g.split(":")[0] for g in fetch(call, [A, B, C], n=n, policy="wrr", weights=[5, 3, 1])[0]]
    # Then the picks are exactly nginx's smooth WRR sequence (state kept in Redis between calls)
    assert seq == ["abc"[i] for i in swrr([5, 3, 1], 18)]
    assert seq[:9].count("a") == 5 and seq[:9].count("b") == 3 and seq[:9].count("c") == 1
    assert redis_client.ttl(A.wrr("w1")) > 3000
    # And a queue with no job left drops out of the rotation (no empty picks)
    redis_client.delete(B.wait)
    got = [g.split(":")[0] for g in fetch(call, [A, B, C], n=6, policy="wrr", weights=[5, 3, 1])[0]]
    assert len(got) == 6 and "b" not in got and got.count("c") >= 1


def test_concurrency_limit_in_the_fetch_and_wake_on_completion(
    call: Any, redis_client: redis.Redis, redis_url: str
) -> None:
    q = Queue("a", redis=redis_url)
    q.set_concurrency_limit(2)
    add(call, A, *[(f"j{i}", 0) for i in range(5)])
    # A worker asking for 10 gets 2; another gets none and the queue's stale marker is consumed
    got, _, _ = fetch(call, [A], n=10)
    assert got == ["a:j0", "a:j1"]
    assert fetch(call, [A], n=10, worker="w2")[0] == [] and redis_client.llen(A.marker) == 0
    assert q.limits()["concurrency_limit"] == 2 and q.limits()["active"] == 2
    # When one completes, the marker is pushed (a waiting worker wakes) and one more slot is free
    tok = redis_client.hget(A.job("j0"), "token")
    assert call(P.complete_call(A, 100, -1, -1, [("j0", tok, "null")])) == [1]
    assert redis_client.llen(A.marker) == 1
    assert fetch(call, [A], n=10)[0] == ["a:j2"]
    # A failure frees a slot too
    tok = redis_client.hget(A.job("j1"), "token")
    redis_client.delete(A.marker)
    assert call(P.fail_call(A, 100, [("j1", tok, "E: x", "", -1)])) == [3]
    assert redis_client.llen(A.marker) == 1
    # Another queue of the same worker is not held back by a's limit
    add(call, B, ("b1", 9))
    assert fetch(call, [A, B], n=10)[0] == ["a:j3", "b:b1"]
    q.set_concurrency_limit(None)
    assert fetch(call, [A], n=10)[0] == ["a:j4"]
    q.close()


def test_rate_limit_is_a_sliding_window_and_returns_the_wait(
    call: Any, redis_client: redis.Redis, redis_url: str
) -> None:
    q = Queue("a", redis=redis_url)
    q.set_rate_limit(3, 0.4)
    add(call, A, *[(f"j{i}", 0) for i in range(8)])
    add(call, B, ("b1", 9))
    # The first fetch starts 3 (and b's job) and reports a's wait: the window's oldest start + per - now
    got, wait_ms, held = fetch(call, [A, B], n=10)
    assert got == ["a:j0", "a:j1", "a:j2", "b:b1"]
    assert held == [1] and 390 <= wait_ms <= 400
    assert q.limits()["rate_window"] == 3 and q.limits()["rate_limit"] == {"max": 3, "per": 0.4, "key": None}
    got, wait_ms, held = fetch(call, [A], n=10)
    assert got == [] and held == [1] and 0 < wait_ms <= 400
    # After the window slides past the first starts, 3 more may start, not more
    time.sleep(wait_ms / 1000 + 0.01)
    assert fetch(call, [A], n=10)[0] == ["a:j3", "a:j4", "a:j5"]
    q.close()


def test_keyed_rate_limit_holds_per_key_and_skips_limited_keys(call: Any, redis_url: str) -> None:
    q = Queue("a", redis=redis_url)
    q.set_rate_limit(2, 10.0, key="tenant")
    add(call, A, *[(f"x{i}", 0, '{"tenant":"x"}') for i in range(4)],
        *[(f"y{i}", 0, '{"tenant":"y"}') for i in range(3)], ("n1", 0, '{"other":1}'))
    got, wait_ms, held = fetch(call, [A], n=10)
    # two per key; jobs without the field share one key ""; the limited x2, x3 are skipped, not blocking
    assert got == ["a:x0", "a:x1", "a:y0", "a:y1", "a:n1"]
    # the wait is reported, but a keyed queue is not held back whole: a job of another key may come
    assert held == [] and 9_900 < wait_ms <= 10_000
    got, wait_ms, held = fetch(call, [A], n=10)
    assert got == [] and held == [] and 9_000 < wait_ms <= 10_000
    add(call, A, ("z0", 0, '{"tenant":"z"}'))
    assert fetch(call, [A], n=10)[0] == ["a:z0"]
    q.close()


def test_aging_lets_an_old_low_priority_job_overtake(call: Any, redis_url: str) -> None:
    # Given a priority-3 job that has waited 0.45 s, with aging 0.1 s per level, and fresh priority-0 jobs
    qa, qb = Queue("a", redis=redis_url), Queue("b", redis=redis_url)
    qa.set_aging(0.1)
    for k in (A, B):
        add(call, k, ("old", 3))
    time.sleep(0.45)
    for k in (A, B):
        add(call, k, ("new1", 0), ("new2", 0))
    # Then with aging it goes first (3 - 4.5 < 0); without aging (queue b) it goes last
    assert fetch(call, [A], n=10)[0] == ["a:old", "a:new1", "a:new2"]
    assert fetch(call, [B], n=10)[0] == ["b:new1", "b:new2", "b:old"]
    # And across queues under policy priority the effective priority is what is compared
    add(call, A, ("old2", 3))
    time.sleep(0.45)
    add(call, B, ("fresh", 0))
    add(call, A, ("fresh", 1))
    assert fetch(call, [B, A], n=10)[0] == ["a:old2", "b:fresh", "a:fresh"]
    assert qa.limits()["aging"] == 0.1 and qb.limits()["aging"] is None
    with pytest.raises(ValueError, match="aging must be >= 0.001 seconds or None, got 0"):
        qa.set_aging(0)
    qa.close()
    qb.close()


def test_limit_settings_are_validated(redis_url: str) -> None:
    q = Queue("a", redis=redis_url)
    with pytest.raises(ValueError, match="concurrency limit must be an int >= 1 or None, got 0"):
        q.set_concurrency_limit(0)
    with pytest.raises(ValueError, match="rate limit max must be an int >= 1, got 2.5"):
        q.set_rate_limit(2.5, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rate limit per must be >= 0.001 seconds, got 0"):
        q.set_rate_limit(5, 0)
    q.close()


def test_queue_groups_share_one_hash_tag() -> None:
    ka, kb = QueueKeys("a", group="shop"), QueueKeys("b", group="shop")
    assert ka.wait == "qsim:{shop}:a:wait" and kb.marker == "qsim:{shop}:b:marker" and ka.tag == "shop"
    assert QueueKeys("a").wait == "qsim:{a}:wait"
    with pytest.raises(ValueError, match="group"):
        QueueKeys("a", group="x{y")


# -- workers ---------------------------------------------------------------------------
async def _noop(job: Job) -> None:
    return None


def test_wrr_shares_match_the_weights_over_3000_jobs(redis_url: str) -> None:
    weights = {"hi": 5, "mid": 3, "lo": 1}

    async def main() -> dict[str, float]:
        qs = {n: AsyncQueue(n, redis=redis_url) for n in weights}
        for n, w in weights.items():  # enough that every queue is still backlogged after 3,000 starts
            await qs[n].add_bulk([("t", {}) for _ in range(w * 400 + 100)])
        w = Worker(list(weights), _noop, redis=redis_url, policy="wrr", weights=weights, concurrency=20,
                   handle_signals=False)

        async def done() -> bool:
            return sum([(await q.counts())["completed"] for q in qs.values()]) >= 3000

        await run_worker_until(w, done, timeout=60)
        started = {n: sum(1 for r in await q.job_records() if r.started_at is not None) for n, q in qs.items()}
        for n, q in qs.items():
            assert (await q.counts())["waiting"] > 0, n  # still backlogged at the end
            await q.close()
        total = sum(started.values())
        assert total >= 3000
        return {n: started[n] / total for n in weights}

    shares = asyncio.run(main())
    print("wrr shares", shares)
    for n, w in weights.items():
        assert shares[n] == pytest.approx(w / 9, rel=0.03), (n, shares)


@pytest.mark.parametrize("policy", ["priority", "wrr"])
def test_priority_starves_the_low_queue_under_sustained_load_and_wrr_does_not(redis_url: str, policy: str) -> None:
    async def main() -> int:
        hi, lo = AsyncQueue("hi", redis=redis_url), AsyncQueue("lo", redis=redis_url)
        # more lo jobs than the run starts (a share of 1 in 4 of ~800): the share never depends on lo running out
        await lo.add_bulk([("t", {}, {"priority": 5}) for _ in range(600)])
        await hi.add_bulk([("t", {}, {"priority": 0}) for _ in range(300)])

        async def handler(job: Job) -> None:
            if job.queue == "hi":  # sustained high-priority load: every hi job brings another
                await hi.add("t", {}, priority=0)

        w = Worker(["hi", "lo"], handler, redis=redis_url, policy=policy, weights={"hi": 3, "lo": 1},
                   concurrency=10, handle_signals=False)

        async def done() -> bool:
            return (await hi.counts())["completed"] + (await lo.counts())["completed"] >= 800

        await run_worker_until(w, done, timeout=60)
        assert (await lo.counts())["waiting"] > 0  # lo was backlogged all along
        n_lo = sum(1 for r in await lo.job_records() if r.started_at is not None)
        n_all = n_lo + sum(1 for r in await hi.job_records() if r.started_at is not None)
        await hi.close()
        await lo.close()
        return round(100 * n_lo / n_all)

    pct_lo = asyncio.run(main())
    if policy == "priority":
        assert pct_lo == 0
    else:
        assert 22 <= pct_lo <= 28  # weight 1 of 4


def test_concurrency_limit_4_across_3_processes_is_never_exceeded(
    redis_url: str, queue: Queue, spawn_worker: Any
) -> None:
    # Given a global limit of 4 and 3 worker processes of concurrency 10 each
    queue.set_concurrency_limit(4)
    queue.add_bulk([("t", {"sleep": 0.04}) for _ in range(80)])
    procs = [spawn_worker(redis_url, concurrency=10) for _ in range(3)]
    # When they drain the queue
    wait_until(lambda: queue.counts()["completed"] == 80, timeout=40)
    recs = queue.job_records()
    # Then at most 4 jobs were ever active at once, and 4 were (measured from the jobs' Redis-clock times)
    peak = max_overlap(intervals(recs))
    print("max active", peak, "workers used", len({r.worker for r in recs}))
    assert peak == 4
    assert all(len(r.attempts) == 1 for r in recs)
    for p in procs:
        p.terminate()
        assert p.wait(10) == 0


def test_rate_limit_20_per_s_across_3_processes(redis_url: str, queue: Queue, spawn_worker: Any) -> None:
    # Given a shared limit of 20 starts per second and 3 worker processes
    queue.set_rate_limit(20, 1.0)
    n = 100
    queue.add_bulk([("t", {}) for _ in range(n)])
    procs = [spawn_worker(redis_url, concurrency=10) for _ in range(3)]
    wait_until(lambda: queue.counts()["completed"] == n, timeout=40)
    starts = sorted(round(r.attempts[0].start * 1_000_000) for r in queue.job_records())
    # Then no 1-second window holds more than 20 starts, and the rate is 20/s within 3 %: the limiter
    # is saturated throughout, so each start should be followed by the 20th next one 1 s later
    # (not sooner, not much later); the rate is 20 over the mean of those gaps
    assert max_in_window(starts, 1_000_000) == 20
    gaps = [starts[i + 20] - starts[i] for i in range(n - 20)]
    assert min(gaps) >= 1_000_000
    rate = 20 / (sum(gaps) / len(gaps) / 1e6)
    print("rate-limited throughput", rate, "slowest gap", max(gaps) / 1e6)
    assert rate == pytest.approx(20, rel=0.03)
    for p in procs:
        p.terminate()
        assert p.wait(10) == 0


def test_keyed_rate_limit_holds_per_tenant_with_a_worker(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.set_rate_limit(4, 0.5, key="tenant")
        await q.add_bulk([("t", {"tenant": t}) for _ in range(10) for t in ("a", "b")])
        w = Worker("q", _noop, redis=redis_url, concurrency=10, handle_signals=False)

        async def done() -> bool:
            return (await q.counts())["completed"] == 20

        await run_worker_until(w, done, timeout=20)
        recs = await q.job_records()
        by = {t: [round(r.attempts[0].start * 1e6) for r in recs if r.data["tenant"] == t] for t in "ab"}
        assert max_in_window(by["a"], 500_000) == 4 and max_in_window(by["b"], 500_000) == 4
        assert max_in_window(by["a"] + by["b"], 500_000) == 8  # the keys do not share a limit
        await q.close()

    asyncio.run(main())


@pytest.mark.cluster
def test_grouped_queues_share_a_slot_and_one_worker_serves_them_on_cluster(cluster_url: str) -> None:
    # Given two queues in one group on a 3-master cluster, one with a rate limit and one with a concurrency limit
    async def main() -> None:
        qa = AsyncQueue("orders", redis=cluster_url, group="shop")
        qb = AsyncQueue("billing", redis=cluster_url, group="shop")
        await qa.set_concurrency_limit(2)
        await qb.set_rate_limit(5, 0.2)
        await qa.add_bulk([("t", {}) for _ in range(30)])
        await qb.add_bulk([("t", {}) for _ in range(10)])
        w = Worker(["orders", "billing"], _noop, redis=cluster_url, group="shop", policy="wrr",
                   weights={"orders": 2, "billing": 1}, concurrency=8, lock_duration=1.0, handle_signals=False)

        async def done() -> bool:
            return (await qa.counts())["completed"] == 30 and (await qb.counts())["completed"] == 10

        # When one worker serves both (one fetch script over both queues' keys, one BLPOP on both markers)
        await run_worker_until(w, done, timeout=30)
        # Then every job ran, within both limits
        ra, rb = await qa.job_records(), await qb.job_records()
        assert max_overlap(intervals(ra)) <= 2
        assert max_in_window([round(r.attempts[0].start * 1e6) for r in rb], 200_000) <= 5
        await qa.close()
        await qb.close()

    assert QueueKeys("orders", group="shop").wait.startswith("qsim:{shop}:")
    asyncio.run(main())
    with pytest.raises(ValueError, match="needs a shared group"):
        Worker(["orders", "billing"], _noop, redis=cluster_url)


def test_a_dead_workers_slot_frees_when_its_lock_expires(redis_url: str, call: Any) -> None:
    # Given a concurrency limit of 1 whose only slot is held by a worker that died
    q = Queue("a", redis=redis_url)
    q.set_concurrency_limit(1)
    add(call, A, ("dead-worker-job", 0), ("next", 0))
    assert fetch(call, [A], n=5, worker="ghost")[0] == ["a:dead-worker-job"]
    assert fetch(call, [A], n=5)[0] == []  # the limit holds while its lock is valid

    # When a live worker runs with a short stalled-check interval
    async def main() -> None:
        aq = AsyncQueue("a", redis=redis_url)
        w = Worker("a", _noop, redis=redis_url, stalled_interval=0.2, lock_duration=1.0, handle_signals=False)

        async def done() -> bool:
            return (await aq.counts())["completed"] == 2

        await run_worker_until(w, done, timeout=15)
        await aq.close()

    redis.Redis.from_url(redis_url).zadd(A.active, {"dead-worker-job": 0})  # its lock has expired
    asyncio.run(main())
    # Then the stalled check freed the slot: both jobs ran, never two at once
    recs = q.job_records()
    assert {r.id: r.state for r in recs} == {"dead-worker-job": "completed", "next": "completed"}
    assert [a.outcome for a in q.get_job("dead-worker-job").attempts] == ["stalled", "completed"]
    assert max_overlap(intervals(recs)) == 1
    q.close()


def _evals(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))  # type: ignore[union-attr]


def test_idle_multi_queue_worker_blocks_and_a_rate_held_worker_does_not_spin(redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url, decode_responses=True)

    async def main() -> None:
        qa, qb = AsyncQueue("a", redis=redis_url), AsyncQueue("b", redis=redis_url)
        w = Worker(["a", "b"], _noop, redis=redis_url, policy="ordered", handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await asyncio.sleep(0.3)
        # Given an idle worker on two queues: it blocks on both markers and makes no calls for 1 s
        before = _evals(r)
        await asyncio.sleep(1.0)
        assert _evals(r) - before == 0
        # When a job arrives on the second queue, it starts within milliseconds
        job = await qb.add("t", {})
        async with asyncio.timeout(5):
            while (await qb.counts())["completed"] < 1:
                await asyncio.sleep(0.002)
        info = await qb.get_job(job.id)
        assert info.started_at is not None and info.enqueued_at is not None
        assert info.started_at - info.enqueued_at < 0.2  # blocked on b's marker, not polling
        # And with queue a held by its rate limit (2 per 1.5 s), the worker waits without fetching in between
        await qa.set_rate_limit(2, 1.5)
        await qa.add_bulk([("t", {}) for _ in range(3)])
        async with asyncio.timeout(5):
            while (await qa.counts())["completed"] < 2:
                await asyncio.sleep(0.005)
        before = _evals(r)
        async with asyncio.timeout(5):
            while (await qa.counts())["completed"] < 3:
                await asyncio.sleep(0.005)
        # a handful of calls over the 1.5 s (acknowledgements, promotions of both queues, the one wake-up
        # fetch), not a retry loop (which would make hundreds)
        assert _evals(r) - before <= 12
        recs = sorted(await qa.job_records(), key=lambda x: x.started_at or 0)
        assert 1.5 <= recs[2].started_at - recs[0].started_at < 1.8  # type: ignore[operator]
        await w.close()
        await task
        await qa.close()
        await qb.close()

    asyncio.run(main())
    r.close()


def test_worker_command_serves_several_queues(redis_url: str, tmp_path: Any) -> None:
    import os
    import signal
    import subprocess
    import sys

    from engine_helpers import ROOT

    driver = ("import argparse, sys; from qsim.cli import worker as worker_cli; p = argparse.ArgumentParser(prog='qsim'); "
              "s = p.add_subparsers(required=True); worker_cli.register(s); a = p.parse_args(sys.argv[1:]); "
              "sys.exit(a.func(a))")
    (tmp_path / "myjobs.py").write_text("async def handle(job):\n    return job.queue\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = [sys.executable, "-c", driver, "worker", "myjobs:handle", "--queue", "a", "--queue", "b",
            "--redis", redis_url]
    bad = subprocess.run([*base, "--policy", "wrr", "--weight", "a=x"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "--weight: must be QUEUE=W" in bad.stderr
    qa, qb = Queue("a", redis=redis_url), Queue("b", redis=redis_url)
    qa.add_bulk([("t", {}) for _ in range(5)])
    qb.add_bulk([("t", {}) for _ in range(5)])
    p = subprocess.Popen([*base, "--policy", "wrr", "--weight", "a=2"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: qa.counts()["completed"] + qb.counts()["completed"] == 10, timeout=20)
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()
    assert [r.returnvalue for r in qa.job_records()] == ["a"] * 5
    assert [r.returnvalue for r in qb.job_records()] == ["b"] * 5
    qa.close()
    qb.close()
