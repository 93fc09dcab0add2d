"""Keyed rate limits: the key value is stored at add time (as text), never decoded from payloads
inside a script; distinct values never share a window; a throttled key does not starve others."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis

from qsim.engine import Queue
from qsim.engine import protocol as P
from qsim.engine.flow import SyncFlowProducer
from qsim.engine.scripts import Call, ScriptSet, lua_source, run_calls

pytestmark = pytest.mark.redis


@pytest.fixture
def call(redis_client: redis.Redis) -> Any:
    scripts = ScriptSet(redis_client)

    def run(c: Call) -> Any:
        return run_calls(redis_client, scripts, [c])[0]

    return run


def fetch(call: Any, q: Queue, n: int = 10) -> list[str]:
    return [f.id for f in P.parse_fetch(call(P.fetch_call(q.keys, n, 30000, "w", "t")))]


def test_numeric_key_values_never_share_a_window(call: Any, redis_url: str) -> None:
    q = Queue("q", redis=redis_url)
    q.set_rate_limit(1, 10.0, key="tenant")
    # Given two tenants whose ids differ only beyond a double's precision, and ints vs floats
    for jid, tenant in [("big1", 1234567890123456789), ("big2", 1234567890123499999), ("big1b", 1234567890123456789),
                        ("one", 1), ("one-float", 1.0), ("text", "1234567890123456789")]:
        q.add("t", {"tenant": tenant}, job_id=jid)
    # Then each distinct value has its own window (one start each); a repeat waits (1.0 is the number 1,
    # and a string holds the same text as the number)
    assert fetch(call, q) == ["big1", "big2", "one"]
    assert q.get_job("big1").state == "active" and q.get_job("big1b").state == "waiting"
    q.close()


def test_a_throttled_tenant_with_big_payloads_neither_slows_fetch_nor_starves_another(
    call: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    q = Queue("q", redis=redis_url, max_payload=600_000, warn_payload=600_000)
    q.set_rate_limit(1, 60.0, key="tenant")
    # Given one job of tenant a started (its window is full for a minute), then 64 waiting 500 KB jobs
    # of a, 200 small ones of a, and one job of tenant b at the back
    q.add("t", {"tenant": "a"}, job_id="a-first")
    assert fetch(call, q, 1) == ["a-first"]
    blob = "x" * 500_000
    q.add_bulk([("t", {"tenant": "a", "blob": blob}, {"job_id": f"big{i}"}) for i in range(64)])
    q.add_bulk([("t", {"tenant": "a"}, {"job_id": f"small{i}"}) for i in range(200)])
    q.add("t", {"tenant": "b"}, job_id="b")
    # When a worker fetches
    old = redis_client.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    redis_client.config_set("slowlog-log-slower-than", 0)
    redis_client.slowlog_reset()
    try:
        got = fetch(call, q, 1)
        entries = [e for e in redis_client.slowlog_get(128) if "EVALSHA" in str(e.get("command", "")).upper()]
    finally:
        redis_client.config_set("slowlog-log-slower-than", old)
    # Then tenant b's job starts, and the fetch took little time inside Redis (no payload decoded)
    assert got == ["b"]
    assert entries and max(e["duration"] for e in entries) < 20_000, entries  # microseconds
    q.close()


def test_the_key_value_is_taken_at_add_time_whatever_the_payload_later_says(
    call: Any, redis_url: str, redis_client: redis.Redis
) -> None:
    # Given a producer made before the queue got its key (it knows of no key yet)
    early = Queue("q", redis=redis_url)
    early.add("t", {"tenant": "x"}, job_id="before")
    admin = Queue("q", redis=redis_url)
    admin.set_rate_limit(1, 10.0, key="tenant")
    # When it adds jobs after the key was set (the add script tells it the key, it re-reads the value)
    early.add_bulk([("t", {"tenant": "x"}, {"job_id": "x1"}), ("t", {"tenant": "x"}, {"job_id": "x2"}),
                    ("t", {"tenant": 7}, {"job_id": "n7"})])
    with SyncFlowProducer(redis=redis_url) as flows:
        flows.add(parent=("p", "parent", {}, {"job_id": "par"}),
                  children=[("q", "c", {"tenant": "y"}, {"job_id": "y1"})])
    # Then each job holds its key value, as text, in a field of its own
    assert {j: redis_client.hget(admin.keys.job(j), "rkey") for j in ("before", "x1", "x2", "n7", "y1")} == \
        {"before": None, "x1": "x", "x2": "x", "n7": "7", "y1": "y"}
    # and fetch follows the stored value, not the payload (rewritten here by hand)
    redis_client.hset(admin.keys.job("x2"), "data", json.dumps({"tenant": "other"}))
    assert fetch(call, admin) == ["before", "x1", "n7", "y1"]
    early.close()
    admin.close()


def test_no_script_decodes_a_payload() -> None:
    from qsim.engine.scripts import SCRIPT_NAMES

    for name in SCRIPT_NAMES:
        assert "cjson.decode" not in lua_source(name), name


def test_children_added_by_a_handler_carry_their_key_value(redis_url: str, redis_client: redis.Redis) -> None:
    import asyncio

    from engine_helpers import run_worker_until
    from qsim.engine import AsyncQueue, Job, Worker

    async def main() -> None:
        kids = AsyncQueue("kids", redis=redis_url)
        await kids.set_rate_limit(5, 1.0, key="tenant")
        top = AsyncQueue("top", redis=redis_url)
        await top.add("split", {}, job_id="p")

        async def handler(job: Job) -> None:
            await job.add_children([("kids", "c", {"tenant": t}, {"job_id": f"c-{t}"}) for t in ("a", "b")])
            await job.add_children([("kids", "c", {"tenant": 12345678901234567890}, {"job_id": "c-n"})])

        w = Worker("top", handler, redis=redis_url, handle_signals=False)

        async def done() -> bool:
            return (await top.counts())["completed"] == 1

        await run_worker_until(w, done)
        assert {j: redis_client.hget(kids.keys.job(j), "rkey") for j in ("c-a", "c-b", "c-n")} == \
            {"c-a": "a", "c-b": "b", "c-n": "12345678901234567890"}
        await kids.close()
        await top.close()

    asyncio.run(main())


def test_a_worker_waiting_on_a_throttled_tenant_starts_another_tenants_new_job_at_once(redis_url: str) -> None:
    # Given a worker whose queue holds only jobs of tenant a, whose window (1 start per 30 s) is full
    import asyncio

    from engine_helpers import run_worker_until
    from qsim.engine import AsyncQueue, Job, Worker

    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.set_rate_limit(1, 30.0, key="tenant")
        await q.add_bulk([("t", {"tenant": "a"}, {"job_id": f"a{i}"}) for i in range(3)])
        started: dict[str, float] = {}

        async def handler(job: Job) -> None:
            started[job.id] = asyncio.get_running_loop().time()

        w = Worker("q", handler, redis=redis_url, concurrency=4, lock_duration=5.0, stalled_interval=5.0,
                   handle_signals=False)
        added_at: list[float] = []

        async def add_b_then_done() -> bool:
            if "a0" in started and not added_at:
                await asyncio.sleep(0.3)  # the worker now waits for a's window (up to 30 s)
                added_at.append(asyncio.get_running_loop().time())
                await q.add("t", {"tenant": "b"}, job_id="b0")
            return "b0" in started

        await run_worker_until(w, add_b_then_done, timeout=10.0)
        # When tenant b adds a job, Then it starts at once: the worker woke for it (its key has room)
        assert started["b0"] - added_at[0] < 0.5
        assert "a1" not in started  # and a's next job still waits for its window
        await q.close()

    asyncio.run(main())


def test_a_keyed_window_that_reopens_starts_the_next_job_on_time_and_other_keys_at_once(redis_url: str) -> None:
    # Given one tenant's 9 jobs under a keyed limit of 1 start per 0.3 s, and a worker with free slots
    # (it waits for the key's window while listening for other keys' jobs: a BLPOP whose timeout Redis
    # ends on its own clock tick, up to 100 ms late), and jobs of new tenants added every 0.11 s meanwhile
    import asyncio

    from engine_helpers import run_worker_until
    from qsim.engine import AsyncQueue, Job, Worker

    per, jobs, others = 0.3, 9, 12

    async def main() -> tuple[list[float], dict[str, float], dict[str, float]]:
        q = AsyncQueue("q", redis=redis_url)
        await q.set_rate_limit(1, per, key="tenant")
        await q.add_bulk([("t", {"tenant": "a"}, {"job_id": f"a{i}"}) for i in range(jobs)])
        started: list[float] = []
        other_started: dict[str, float] = {}
        added: dict[str, float] = {}

        async def handler(job: Job) -> None:
            now = asyncio.get_running_loop().time()
            if job.id.startswith("a"):
                started.append(now)
            else:
                other_started[job.id] = now

        async def add_others() -> None:
            await asyncio.sleep(0.05)
            for i in range(others):
                await asyncio.sleep(0.11)
                added[f"b{i}"] = asyncio.get_running_loop().time()
                await q.add("t", {"tenant": f"b{i}"}, job_id=f"b{i}")

        w = Worker("q", handler, redis=redis_url, concurrency=4, handle_signals=False)
        adding = asyncio.ensure_future(add_others())

        async def done() -> bool:
            return len(started) == jobs and len(other_started) == others

        await run_worker_until(w, done, timeout=10.0)
        await adding
        # the tenant's starts on Redis's clock (the fetch script's, where the limit is kept): a busy event loop
        # that runs one handler late would otherwise make the next gap look short
        infos = {i.id: i for i in await q.job_records()}
        await q.close()
        return sorted(float(infos[f"a{i}"].started_at or 0.0) for i in range(jobs)), added, other_started

    started, added, other_started = asyncio.run(main())
    # When each window reopens, Then the next job starts within a few ms of it, not on Redis's next tick
    lags = [b - a - per for a, b in zip(started, started[1:])]
    assert min(lags) > -0.001, lags  # never early: the limit holds
    assert sum(lags) / len(lags) < 0.02, lags
    # and a job of a tenant with room starts at once, whenever it comes
    waits = sorted(other_started[j] - added[j] for j in added)
    assert waits[-2] < 0.05, waits


# -- per-key lanes ------------------------------------------------------------------------------------------
def lanes_match_the_wait_set(r: redis.Redis, q: Queue) -> None:
    """Every waiting job is in its key's lane with its wait score; every non-empty lane is indexed once."""
    k = q.keys
    wait = dict(r.zrange(k.wait, 0, -1, withscores=True))
    lanes: dict[str, dict[str, float]] = {}
    for jid, score in wait.items():
        lanes.setdefault(r.hget(k.job(jid), "rkey") or "", {})[jid] = score
    for value, members in lanes.items():
        assert dict(r.zrange(k.lane(value), 0, -1, withscores=True)) == members, value
    opened, shut = set(r.zrange(k.lanes, 0, -1)), set(r.zrange(k.lanes_shut, 0, -1))
    assert opened | shut == set(lanes) and not opened & shut
    for value in opened:
        assert r.zscore(k.lanes, value) == min(lanes[value].values()), value


def commands_of(r: redis.Redis, fn: Any) -> tuple[Any, int]:
    """``fn()``'s result and how many commands Redis ran for it (scripts' own commands included)."""
    def total() -> int:
        return sum(int(v["calls"]) for k, v in r.info("commandstats").items())
    before = total()
    out = fn()
    return out, total() - before - 1  # (the INFO of the first reading)


@pytest.mark.parametrize("backlog", [50, 5000])
def test_a_tenants_backlog_of_any_size_never_delays_another_and_costs_a_fetch_the_same(
    call: Any, redis_url: str, redis_client: redis.Redis, backlog: int
) -> None:
    q = Queue("q", redis=redis_url)
    q.set_rate_limit(5, 60.0, key="tenant")
    # Given tenant a's window full and its backlog waiting ahead of tenants b and c
    q.add_bulk([("t", {"tenant": "a"}, {"job_id": f"a{i}"}) for i in range(backlog)])
    assert fetch(call, q, 5) == [f"a{i}" for i in range(5)]
    q.add_bulk([("t", {"tenant": "b"}, {"job_id": "b0"}), ("t", {"tenant": "c"}, {"job_id": "c0"}),
                ("t", {"tenant": "b"}, {"job_id": "b1"})])
    lanes_match_the_wait_set(redis_client, q)
    # When a worker fetches, Then b's and c's jobs start, in the queue's order, whatever a's backlog
    got, cost = commands_of(redis_client, lambda: fetch(call, q, 10))
    assert got == ["b0", "c0", "b1"]
    print(f"\nbacklog {backlog}: {cost} commands for the fetch")
    assert cost < 120
    lanes_match_the_wait_set(redis_client, q)
    # and a's lane is shut until its window has room again
    assert redis_client.zrange(q.keys.lanes_shut, 0, -1) == ["a"] and redis_client.zcard(q.keys.lanes) == 0
    q.close()


def test_lanes_follow_every_way_into_the_wait_set(call: Any, redis_url: str, redis_client: redis.Redis) -> None:
    from qsim.engine import Backoff

    q = Queue("q", redis=redis_url)
    # Given jobs waiting before the key was set (no value: the "" lane), then a keyed limit
    q.add("t", {"tenant": "a"}, job_id="early")
    q.set_rate_limit(100, 1.0, key="tenant")
    q.add_bulk([("t", {"tenant": t}, {"job_id": f"{t}{i}", "priority": i % 2, "attempts": 2,
                                      "backoff": Backoff.fixed(0.0)}) for i in range(3) for t in "ab"])
    q.add("t", {"tenant": "c"}, job_id="later", delay=0.05)
    # When the first fetch builds the lanes and takes some jobs
    got = fetch(call, q, 3)
    assert got == ["early", "a0", "b0"]  # priority 0 first, in the queue's order across lanes
    lanes_match_the_wait_set(redis_client, q)
    s = ScriptSet(redis_client)
    tok = {j: redis_client.hget(q.keys.job(j), "token") for j in got}
    # and they come back every way there is: a failed attempt retried at once, a hand-back, a stalled check
    run_calls(redis_client, s, [P.fail_call(q.keys, 100, [("a0", tok["a0"], "E", "", 0)])])
    run_calls(redis_client, s, [P.release_call(q.keys, 100, [("b0", tok["b0"], False)])])
    redis_client.zadd(q.keys.active, {"early": 0})
    run_calls(redis_client, s, [P.recover_stalled_call(q.keys, 100, 5)])
    # and a delayed job is promoted
    time.sleep(0.06)
    run_calls(redis_client, s, [P.promote_call(q.keys)])
    # Then every job is in its lane, scored as in the wait set
    lanes_match_the_wait_set(redis_client, q)
    assert redis_client.zscore(q.keys.lane("c"), "later") is not None
    # and dead-lettered then retried jobs too
    got = fetch(call, q, 1)
    redis_client.hset(q.keys.job(got[0]), "max_attempts", 1)
    run_calls(redis_client, s, [P.fail_call(q.keys, 100, [(got[0], redis_client.hget(q.keys.job(got[0]), "token"),
                                                          "E", "", -1)])])
    assert q.get_job(got[0]).state == "dead"
    q.retry_dead(got[0])
    assert q.get_job(got[0]).state == "waiting"
    # and children of a flow, and its parent once they are done
    with SyncFlowProducer(redis=redis_url) as flows:
        flows.add(parent=("q", "parent", {"tenant": "p"}, {"job_id": "par"}),
                  children=[("q", "c", {"tenant": "k"}, {"job_id": "kid"})])
    lanes_match_the_wait_set(redis_client, q)
    assert redis_client.zscore(q.keys.lane("k"), "kid") is not None
    while "kid" not in (got := fetch(call, q, 1)):
        pass
    run_calls(redis_client, s, [P.complete_call(q.keys, 100, -1, -1, [("kid", redis_client.hget(q.keys.job("kid"),
                                                                                                 "token"), "1")])])
    assert q.get_job("par").state == "waiting"
    lanes_match_the_wait_set(redis_client, q)
    q.close()


def test_a_new_key_rebuilds_the_lanes_and_no_key_drops_them(call: Any, redis_url: str,
                                                             redis_client: redis.Redis) -> None:
    q = Queue("q", redis=redis_url)
    q.set_rate_limit(1, 60.0, key="tenant")
    q.add_bulk([("t", {"tenant": t, "region": r}, {"job_id": f"{t}{r}"}) for t in "ab" for r in "xy"])
    assert fetch(call, q, 10) == ["ax", "bx"]
    # When the key changes (jobs keep the value they were added under: rebuilt lanes follow the stored values)
    q.set_rate_limit(1, 60.0, key="region")
    assert redis_client.zcard(q.keys.lanes) == redis_client.zcard(q.keys.lanes_shut) == 0
    assert redis_client.hget(q.keys.meta, "lanes") is None
    fetch(call, q, 10)
    lanes_match_the_wait_set(redis_client, q)
    # When the limit goes, the lanes go (and the fetch takes the rest in the queue's order)
    q.set_rate_limit(None)
    assert not redis_client.keys(q.keys.base + "lane*")
    assert set(fetch(call, q, 10)) | {"ax", "bx"} == {"ax", "ay", "bx", "by"}
    q.close()


def test_a_higher_max_reopens_shut_lanes_at_once(call: Any, redis_url: str, redis_client: redis.Redis) -> None:
    q = Queue("q", redis=redis_url)
    q.set_rate_limit(1, 60.0, key="tenant")
    q.add_bulk([("t", {"tenant": "a"}, {"job_id": f"a{i}"}) for i in range(3)])
    assert fetch(call, q, 10) == ["a0"]
    q.set_rate_limit(3, 60.0, key="tenant")
    assert fetch(call, q, 10) == ["a1", "a2"]
    q.close()


def test_with_aging_an_old_job_of_one_lane_goes_before_a_new_better_one_of_another(call: Any, redis_url: str) -> None:
    q = Queue("q", redis=redis_url)
    q.set_rate_limit(10, 1.0, key="tenant")
    q.set_aging(0.05)  # one level per 50 ms of waiting
    # Given an old job of priority 5 (waited 0.4 s: 8 levels gained) and a new one of priority 0
    q.add("t", {"tenant": "a"}, job_id="old", priority=5)
    time.sleep(0.4)
    q.add("t", {"tenant": "b"}, job_id="new", priority=0)
    # Then the old one's effective priority (5 - 8) goes first
    assert fetch(call, q, 1) == ["old"]
    q.close()
