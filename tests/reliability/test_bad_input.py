"""Bad input: fuzzed payloads at ``add``, job hashes corrupted by hand, handlers that misbehave.

(Scenario TOML fuzzing lives in tests/unit/test_scenario_fuzz.py.)
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from qsim.engine import AsyncQueue, Job, Queue, Worker
from qsim.errors import PayloadError
from redis_server import RedisServer

pytestmark = pytest.mark.redis

FAST = {"lock_duration": 1.0, "stalled_interval": 0.3, "handle_signals": False}

# -- payload fuzzing ------------------------------------------------------------------------
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                      st.text(max_size=20))
valid_json = st.recursive(json_leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                                          st.dictionaries(st.text(max_size=8), c, max_size=4)),
                          max_leaves=20)


class Thing:
    pass


bad_leaf = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.binary(max_size=8),
    st.builds(bytearray, st.binary(max_size=4)),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
    st.frozensets(st.integers(), max_size=3),
    st.sets(st.integers(), max_size=3),
    st.builds(Thing),
    st.dictionaries(st.one_of(st.integers(), st.none(), st.booleans(), st.floats(allow_nan=False),
                              st.tuples(st.integers())), valid_json, min_size=1, max_size=3),
)


def _embed(c: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # a container holding at least one bad value among valid siblings, at any depth
    return st.one_of(
        st.tuples(c, st.lists(valid_json, max_size=3), st.integers(0, 3)).map(
            lambda t: [*t[1][: t[2]], t[0], *t[1][t[2]:]]),
        st.tuples(st.text(max_size=8), c, st.dictionaries(st.text(max_size=8), valid_json, max_size=3)).map(
            lambda t: {**t[2], t[0]: t[1]}),
    )


bad_payload = st.recursive(bad_leaf, _embed, max_leaves=8)


@pytest.fixture(scope="module")
def fuzz_queue(redis_server: RedisServer) -> Iterator[tuple[Queue, redis.Redis]]:
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    r.flushall()
    q = Queue("fuzz", redis=redis_server.url, max_payload=4096, warn_payload=4096)
    yield q, r
    q.close()
    r.close()


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=bad_payload, bulk=st.booleans())
def test_fuzzed_bad_payloads_raise_payload_error_and_write_nothing(
    fuzz_queue: tuple[Queue, redis.Redis], data: Any, bulk: bool
) -> None:
    q, r = fuzz_queue
    with pytest.raises(PayloadError):
        if bulk:
            q.add_bulk([("ok", {"fine": 1}), ("bad", data)])
        else:
            q.add("bad", data)
    assert r.dbsize() == 0


@pytest.mark.parametrize("depth", [150, 1_000, 100_000])
def test_deep_nesting_is_a_payload_error(fuzz_queue: tuple[Queue, redis.Redis], depth: int) -> None:
    q, r = fuzz_queue
    for make in (lambda x: [x], lambda x: {"k": x}):
        x: Any = 1
        for _ in range(depth):
            x = make(x)
        with pytest.raises(PayloadError, match="nested"):
            q.add("deep", x)
    assert r.dbsize() == 0


def test_oversized_payloads_are_refused(fuzz_queue: tuple[Queue, redis.Redis]) -> None:
    q, r = fuzz_queue
    for data in ("x" * 5000, ["é" * 700], {"k": list(range(2000))}):  # "é" encodes as 6 bytes: \u00e9
        with pytest.raises(PayloadError, match="over the 4096-byte limit"):
            q.add("big", data)
    assert r.dbsize() == 0


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=valid_json)
def test_fuzzed_valid_payloads_round_trip_exactly(fuzz_queue: tuple[Queue, redis.Redis], data: Any) -> None:
    q, _ = fuzz_queue
    try:
        job = q.add("ok", data)
    except PayloadError as e:  # only a size refusal is acceptable for valid JSON
        assert "byte limit" in str(e)
        return
    assert q.get_job(job.id).data == data


# -- job hashes corrupted by hand -------------------------------------------------------------
async def _until(cond: Any, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await cond():
            await asyncio.sleep(0.02)


# -- names that Redis cannot be sent ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["job_id", "name"])
def test_ids_and_names_utf8_cannot_encode_are_refused_and_nothing_is_written(
    fuzz_queue: tuple[Queue, redis.Redis], kind: str
) -> None:
    q, r = fuzz_queue
    before = r.dbsize()
    # Given two ids (or names) that differ only in a lone surrogate (os.fsdecode of bytes that are not UTF-8)
    for bad in ("order-\udcff", "order-\udcfe"):
        opts = {"job_id": bad} if kind == "job_id" else {}
        # When each is added, alone or in bulk, Then the add is refused with the reason, and nothing is written
        with pytest.raises(ValueError, match=f"{kind}.*lone surrogate"):
            q.add(bad if kind == "name" else "t", {}, **opts)
        with pytest.raises(ValueError, match="lone surrogate"):
            q.add_bulk([("t", {}, {"job_id": "fine-1"}), (bad if kind == "name" else "t", {}, opts)])
    assert r.dbsize() == before


def test_queue_names_are_checked_like_ids(redis_url: str) -> None:
    # A queue name UTF-8 cannot encode, or longer than 256 characters, is refused by producers and workers
    for bad, why in (("q-\udcff", "lone surrogate"), ("q" * 257, "at most 256 characters")):
        with pytest.raises(ValueError, match=why):
            Queue(bad, redis=redis_url)
        with pytest.raises(ValueError, match=why):
            Worker(bad, _noop, redis=redis_url)
    Queue("q" * 256, redis=redis_url).close()


async def _noop(job: Job) -> None:
    return None



@pytest.mark.parametrize(
    "field, value, error",
    [
        ("attempts_made", "lots", "attempts_made"),
        ("max_attempts", "three", "max_attempts"),
        ("timeout", "soon", "timeout"),
        ("backoff", '{"kind": "sideways"', "backoff"),
        ("data", "{'python': 'repr'}", "not valid JSON"),
        ("data", "[" * 100_000, "not valid JSON"),
        ("data", "\udcff\x00binary", "not valid JSON"),
    ],
    ids=["attempts_made", "max_attempts", "timeout", "backoff", "python-repr", "deep", "binary"],
)
def test_corrupt_field_sends_the_job_to_the_dlq_and_the_worker_keeps_going(
    redis_url: str, redis_client: redis.Redis, field: str, value: str, error: str
) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add_bulk([("t", {"i": i}, {"job_id": f"g{i}"}) for i in range(5)])
        await q.add("t", {"i": 99}, job_id="bad", attempts=3)
        await q.add_bulk([("t", {"i": i}, {"job_id": f"h{i}"}) for i in range(5)])
        raw = value.encode("utf-8", "surrogateescape")  # the last case writes bytes that are not UTF-8
        redis_client.hset(q.keys.job("bad"), field, raw)

        async def handler(job: Job) -> int:
            return int(job.data["i"])

        w = Worker("q", handler, redis=redis_url, concurrency=4, batch_size=4, **FAST)
        task = asyncio.ensure_future(w.run())

        async def settled() -> bool:
            c = await q.counts()
            return c["completed"] == 10 and c["dead"] == 1

        await _until(settled)
        # the worker is still running and takes new work
        await q.add("t", {"i": 7}, job_id="after")
        await _until(lambda: _state(q, "after", "completed"))
        assert not task.done()
        assert await w.close() == 0
        (dead,) = await q.dead()
        assert dead.id == "bad" and dead.state == "dead"
        assert dead.error is not None and dead.error.startswith("PayloadError") and error in dead.error
        assert dead.stalled == 0  # sent to the DLQ at once, not after lock expiries
        for jid in [f"g{i}" for i in range(5)] + [f"h{i}" for i in range(5)]:
            assert (await q.get_job(jid)).attempts_made == 1
        await q.close()

    asyncio.run(main())


async def _state(q: AsyncQueue, jid: str, state: str) -> bool:
    return bool((await q.get_job(jid)).state == state)


def test_corrupt_numbers_do_not_break_stalled_recovery_or_retries(
    redis_url: str, redis_client: redis.Redis
) -> None:
    # Given jobs locked by a worker that died (its lock expires), one with corrupt numbers in its hash
    q = Queue("q", redis=redis_url)
    q.add_bulk([("t", {}, {"job_id": "good"}), ("t", {}, {"job_id": "bad"})])
    for jid in ("good", "bad"):  # as fetch leaves them, with a lock that expired long ago
        redis_client.zrem(q.keys.wait, jid)
        redis_client.zadd(q.keys.active, {jid: 1})
        redis_client.hset(q.keys.job(jid), mapping={"state": "active", "token": "ghost:1", "worker": "ghost",
                                                     "attempt_started": f"{time.time():.6f}"})
    assert q.counts()["active"] == 2
    redis_client.hset(q.keys.job("bad"), mapping={"priority": "urgent", "stalled": "x", "attempts_made": "?"})

    # When a live worker's stalled check runs
    async def main() -> None:
        aq = AsyncQueue("q", redis=redis_url)

        async def handler(job: Job) -> str:
            return "ran"

        w = Worker("q", handler, redis=redis_url, max_stalled=3, **FAST)
        task = asyncio.ensure_future(w.run())

        async def settled() -> bool:
            c = await aq.counts()
            return c["completed"] + c["dead"] == 2

        await _until(settled)
        assert not task.done()
        await w.close()
        await aq.close()

    asyncio.run(main())
    # Then the good job is put back and completed, and the corrupt one is not stuck
    good, bad = q.get_job("good"), q.get_job("bad")
    assert good.state == "completed" and good.stalled == 1
    assert bad.state in ("completed", "dead")
    q.close()


# -- handlers that misbehave --------------------------------------------------------------------
class Custom(BaseException):
    pass


def test_handlers_raising_base_exceptions_fail_the_attempt_and_the_worker_keeps_running(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        kinds = ["keyboard", "exit", "exit_code", "generator", "custom", "ok"]
        for k in kinds:
            await q.add(k, {}, job_id=k, attempts=2)

        async def handler(job: Job) -> str:
            if job.name == "keyboard":
                raise KeyboardInterrupt("ctrl-c from a handler")
            if job.name == "exit":
                sys.exit("handler gave up")
            if job.name == "exit_code":
                sys.exit(3)
            if job.name == "generator":
                raise GeneratorExit()
            if job.name == "custom":
                raise Custom("odd")
            return "fine"

        w = Worker("q", handler, redis=redis_url, concurrency=2, **FAST)
        task = asyncio.ensure_future(w.run())

        async def settled() -> bool:
            c = await q.counts()
            return c["dead"] == 5 and c["completed"] == 1

        await _until(settled)
        await q.add("t", {}, job_id="after")
        await _until(lambda: _state(q, "after", "completed"))
        assert not task.done()
        assert await w.close() == 0
        errors = {j.id: j.error for j in await q.dead()}
        assert errors == {
            "keyboard": "KeyboardInterrupt: ctrl-c from a handler",
            "exit": "SystemExit: handler gave up",
            "exit_code": "SystemExit: 3",
            "generator": "GeneratorExit: ",
            "custom": "Custom: odd",
        }
        for jid in errors:
            info = await q.get_job(jid)
            assert info.attempts_made == 2 and info.stalled == 0
            assert [a.outcome for a in info.attempts] == ["failed", "failed"]
        await q.close()

    asyncio.run(main())
    assert "KeyboardInterrupt: ctrl-c from a handler" in caplog.text


def test_handlers_that_hang_past_their_timeout_are_cut_off(redis_url: str) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        await q.add("forever", {}, job_id="forever", timeout=0.3, attempts=2)
        await q.add("slow_io", {}, job_id="slow_io", timeout=0.3)
        await q.add("ok", {}, job_id="ok")

        async def handler(job: Job) -> str:
            if job.name == "forever":
                await asyncio.Event().wait()
            if job.name == "slow_io":
                await asyncio.to_thread(time.sleep, 1.0)  # a thread cannot be stopped, the attempt can
            return "done"

        w = Worker("q", handler, redis=redis_url, concurrency=3, **FAST)
        task = asyncio.ensure_future(w.run())

        async def settled() -> bool:
            c = await q.counts()
            return c["dead"] == 2 and c["completed"] == 1

        t0 = time.monotonic()
        await _until(settled)
        assert time.monotonic() - t0 < 3
        assert not task.done()
        await w.close()
        for jid, attempts in (("forever", 2), ("slow_io", 1)):
            info = await q.get_job(jid)
            assert info.error == "TimeoutError: attempt timed out after 0.3 s"
            assert info.attempts_made == attempts
            assert all(0.28 <= a.end - a.start < 0.8 for a in info.attempts)
        await q.close()

    asyncio.run(main())


@pytest.mark.parametrize("queues", [["q"], ["q", "r"]], ids=["one-queue", "two-queues-priority"])
@pytest.mark.parametrize("kind", ["string", "list"])
def test_a_job_key_of_another_type_is_dead_lettered_and_no_other_job_is_lost(
    redis_url: str, redis_client: redis.Redis, queues: list[str], kind: str
) -> None:
    # Given a batch of jobs where one job's key was overwritten by hand with a string or a list
    qs = [Queue(name, redis=redis_url) for name in queues]
    for q in qs:
        q.add_bulk([("t", {"i": i}, {"job_id": f"{q.name}{i}"}) for i in range(8)])
    bad = qs[0].keys.job("q2")
    redis_client.delete(bad)
    if kind == "string":
        redis_client.set(bad, "overwritten")
    else:
        redis_client.rpush(bad, "a", "b")

    async def main() -> None:
        async def handler(job: Job) -> int:
            return int(job.data["i"])

        w = Worker(queues, handler, redis=redis_url, concurrency=8, batch_size=8, **FAST)
        task = asyncio.ensure_future(w.run())
        deadline = time.monotonic() + 10
        while sum(q.counts()["completed"] + q.counts()["dead"] for q in qs) < 8 * len(qs):
            assert time.monotonic() < deadline, [q.counts() for q in qs]
            await asyncio.sleep(0.02)
        assert not task.done()
        await w.close()

    asyncio.run(main())
    # Then that job is in the DLQ with a clear error, its value kept aside, and every other job completed
    (dead,) = qs[0].dead()
    assert dead.id == "q2" and dead.error is not None and f"held a {kind}, not a hash" in dead.error
    assert redis_client.type(bad + ":corrupt") == kind
    assert sum(q.counts()["completed"] for q in qs) == 8 * len(qs) - 1
    assert all(r.stalled == 0 for q in qs for r in q.job_records())  # nothing was dropped and recovered late
    assert qs[0].purge_dead() == 1
    for q in qs:
        q.close()
