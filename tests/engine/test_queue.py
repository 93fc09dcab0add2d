"""The producers (sync Queue, asyncio AsyncQueue): validation, payloads, admin operations."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest
import redis

import qsim.engine as engine
from qsim.engine import AsyncQueue, Backoff, Queue
from qsim.engine.keys import QueueKeys
from qsim.errors import JobNotFound, PayloadError, RedisUnavailable

pytestmark = pytest.mark.redis


def test_public_api_is_declared() -> None:
    for name in engine.__all__:
        assert hasattr(engine, name), name
    assert {"Queue", "AsyncQueue", "Worker", "Backoff"} <= set(engine.__all__)


def test_keys_share_one_hash_tag() -> None:
    k = QueueKeys("orders", "pfx")
    keys = [k.wait, k.delayed, k.active, k.completed, k.dead, k.meta, k.marker, k.events, k.seq, k.job("1")]
    assert all(key.startswith("pfx:{orders}:") for key in keys)
    with pytest.raises(ValueError, match="'a{b'"):
        QueueKeys("a{b")


def test_add_stores_the_job_and_dedups(queue: Queue) -> None:
    e1 = queue.add("cut", {"order_id": 17}, priority=2, attempts=3, job_id="order-17",
                   backoff=Backoff.exponential(1.0, max=60, jitter=0.1), timeout=30.0)
    e2 = queue.add("cut", {"order_id": 99}, job_id="order-17")
    assert e1.created and not e2.created and e1.id == e2.id == "order-17"
    job = queue.get_job("order-17")
    assert job.data == {"order_id": 17} and job.priority == 2 and job.max_attempts == 3
    assert job.state == "waiting" and job.timeout == 30.0 and job.enqueued_at is not None
    assert Backoff.from_json(job.backoff) == Backoff.exponential(1.0, max=60, jitter=0.1)
    assert queue.counts() == {"waiting": 1, "active": 0, "delayed": 0, "completed": 0, "dead": 0,
                              "waiting_children": 0}
    with pytest.raises(JobNotFound, match="nope"):
        queue.get_job("nope")


def test_add_bulk_one_call_and_delay(queue: Queue) -> None:
    out = queue.add_bulk([("a", {"i": i}) for i in range(2500)] + [("b", None, {"delay": 5.0})])
    assert len(out) == 2501 and len({e.id for e in out}) == 2501
    assert queue.counts()["waiting"] == 2500 and queue.counts()["delayed"] == 1
    with pytest.raises(ValueError, match="add_bulk"):
        queue.add_bulk(["oops"])


@pytest.mark.parametrize(
    "data, match",
    [
        ({"x": math.nan}, "not plain JSON"),
        ({"x": math.inf}, "not plain JSON"),
        ({"x": b"raw"}, "bytes is not JSON"),
        ({1: "int key"}, "keys must be str"),
        ({"x": object()}, "object is not JSON"),
        ({"x": {1, 2}}, "set is not JSON"),
    ],
)
def test_non_json_payloads_are_refused_and_nothing_written(
    queue: Queue, redis_client: redis.Redis, data: object, match: str
) -> None:
    with pytest.raises(PayloadError, match=match):
        queue.add("t", data)
    assert redis_client.dbsize() == 0


def test_payload_size_limits(redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    q = Queue("q", redis=redis_url, max_payload=4096)
    with caplog.at_level(logging.WARNING, logger="qsim.engine.payload"):
        q.add("t", {"blob": "x" * 2000})
    assert "2011 bytes" in caplog.text
    with pytest.raises(PayloadError, match="over the 4096-byte limit"):
        q.add("t", {"blob": "x" * 5000})
    assert q.counts()["waiting"] == 1
    q.close()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"priority": -1}, "priority must be an int in"),
        ({"attempts": 0}, "attempts must be an int >= 1, got 0"),
        ({"delay": -2}, "delay must be a finite number of seconds >= 0, got -2"),
        ({"timeout": -1}, "timeout must be a finite number of seconds >= 0"),
        ({"job_id": "a;b"}, "job_id must be"),
        ({"delay": math.inf}, "delay must be a finite number of seconds >= 0, got inf"),
        ({"timeout": math.inf}, "timeout must be a finite number of seconds >= 0"),
        ({"timeout": math.nan}, "timeout must be a finite number of seconds >= 0"),
    ],
)
def test_bad_options_name_the_bad_value(queue: Queue, kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        queue.add("t", {}, **kwargs)  # type: ignore[arg-type]


def test_bad_constructor_config_is_refused(redis_url: str) -> None:
    with pytest.raises(ValueError, match="max_payload must be an int >= 1, got 0"):
        Queue("q", redis=redis_url, max_payload=0)
    with pytest.raises(ValueError, match="redact must be a sequence"):
        Queue("q", redis=redis_url, redact="password")
    with pytest.raises(ValueError, match="jitter must be in"):
        Backoff.exponential(1, jitter=2)


def test_backoff_delays() -> None:
    b = Backoff.exponential(1.0, max=5.0)
    assert [b.delay_for(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert Backoff.fixed(0.5).delay_for(7) == 0.5
    j = Backoff.fixed(1.0, jitter=0.5)
    assert all(0.5 <= j.delay_for(1) <= 1.0 for _ in range(100))


def test_pause_resume(queue: Queue, redis_client: redis.Redis) -> None:
    queue.pause()
    assert queue.is_paused()
    queue.resume()
    assert not queue.is_paused() and redis_client.llen(queue.keys.marker) == 1


def test_redis_unreachable_is_a_clear_error() -> None:
    from tests_redis_port import unused_url  # type: ignore[import-not-found]

    q = Queue("q", redis=unused_url())
    with pytest.raises(RedisUnavailable, match="Redis unavailable"):
        q.counts()


def test_async_queue_shares_the_operations(redis_url: str, redis_client: redis.Redis) -> None:
    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        e = await q.add("t", {"a": 1}, job_id="x")
        again = await q.add("t", {"a": 2}, job_id="x")
        bulk = await q.add_bulk([("t", {"i": i}) for i in range(10)])
        assert e.created and not again.created and len(bulk) == 10
        assert (await q.counts())["waiting"] == 11
        assert (await q.get_job("x")).data == {"a": 1}
        assert len(await q.job_records()) == 11
        await q.close()

    asyncio.run(main())
    assert redis_client.zcard(QueueKeys("q").wait) == 11


def test_generated_ids_and_user_ids_never_share_a_job(queue: Queue) -> None:
    # Given a job added without an id (ids are generated as 1, 2, ...)
    auto = queue.add("auto", {"n": 1})
    assert auto.id == "1" and auto.created
    # Then a user id of that form is refused, naming it, and the generated job is untouched
    for bad in ("1", "2", "007"):
        with pytest.raises(ValueError, match=f"job_id must not be all digits.*got '{bad}'"):
            queue.add("mine", {"n": 2}, job_id=bad)
    with pytest.raises(ValueError, match="all digits"):
        queue.add_bulk([("mine", {}, {"job_id": "3"})])
    assert queue.get_job("1").name == "auto" and queue.counts()["waiting"] == 1
    # while ids that merely contain digits are fine
    assert queue.add("mine", {}, job_id="1a").created and queue.add("mine", {}, job_id="order-1").created


def test_an_add_of_an_existing_id_describes_the_stored_job(redis_url: str, queue: Queue) -> None:
    from qsim.engine import FlowProducer

    queue.add("first", {"v": 1}, job_id="x")
    again = queue.add("second", {"v": 2}, job_id="x")
    assert again == engine.EnqueuedJob("x", "first", "q", False)
    bulk = queue.add_bulk([("third", {}, {"job_id": "x"}), ("new", {}, {"job_id": "y"})])
    assert [(e.id, e.name, e.created) for e in bulk] == [("x", "first", False), ("y", "new", True)]

    async def main() -> None:
        aq = AsyncQueue("q", redis=redis_url)
        assert (await aq.add("fourth", {}, job_id="x")).name == "first"
        async with FlowProducer(redis=redis_url) as flows:
            f = await flows.add(parent=("q", "parent", {}, {"job_id": "y"}), children=[("q", "c", {})])
            assert not f.created and f.parent.name == "new"
        await aq.close()

    asyncio.run(main())
    assert queue.get_job("x").data == {"v": 1}


@pytest.mark.parametrize("field, value", [
    ("name", "n" * 257), ("name", "x" * 5_000_000), ("job_id", "i" * 257),
], ids=["name-257", "name-5MB", "job_id-257"])
def test_job_name_and_id_have_a_size_limit(queue: Queue, redis_client: redis.Redis, field: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{'job name' if field == 'name' else 'job_id'} must be at most 256 "
                                         f"characters, got {len(value)}"):
        if field == "name":
            queue.add(value, {})
        else:
            queue.add("t", {}, job_id=value)
    assert redis_client.dbsize() == 0
    assert queue.add("n" * 256, {}, job_id="i" * 256).created  # the limit itself is fine


def test_ids_and_keys_utf8_cannot_encode_are_a_clear_error(redis_url: str, queue: Queue) -> None:
    # Given a queue with a job, and text holding a lone surrogate (a non-UTF-8 shell argument, os.fsdecode)
    from qsim.errors import UnencodableText

    queue.add("t", {}, job_id="j1")
    before = sorted(queue.client.keys("*"))
    bad = "job-\udcff"
    # When it is a job id to read or retry, or the payload field that keys a rate limit
    calls = {"get_job": lambda: queue.get_job(bad), "retry_dead": lambda: queue.retry_dead("j1", bad),
             "set_rate_limit": lambda: queue.set_rate_limit(5, 1.0, key=bad)}
    for what, call in calls.items():
        with pytest.raises(UnencodableText) as e:
            call()
        # Then each raises a ValueError naming the value (not a bare UnicodeEncodeError), and writes nothing
        assert isinstance(e.value, ValueError) and "job-" in str(e.value) and "\\udcff" in str(e.value), what
    assert sorted(queue.client.keys("*")) == before and queue.limits()["rate_limit"] is None
