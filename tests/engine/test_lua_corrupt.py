"""A job key overwritten with another type: every script that reads job hashes moves that job to the
DLQ and the ``corrupt`` set and carries on with the rest of its batch (no script aborts)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from qsim.engine import protocol as P
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call, ScriptSet, run_calls

pytestmark = pytest.mark.redis

K = QueueKeys("q")
IDS = ("a", "b", "c")


@pytest.fixture
def call(redis_client: redis.Redis) -> Any:
    scripts = ScriptSet(redis_client)

    def run(c: Call) -> Any:
        return run_calls(redis_client, scripts, [c])[0]

    return run


def add(call: Any, delay_ms: int = 0) -> None:
    call(P.add_call(K, [P.JobSpec(j, "t", "{}", 0, delay_ms, 1, "", 0.0) for j in IDS]))


def fetch(call: Any, lock_ms: int = 30000) -> dict[str, P.Fetched]:
    return {f.id: f for f in P.parse_fetch(call(P.fetch_call(K, 10, lock_ms, "w", "t")))}


def break_key(r: redis.Redis, jid: str = "b", kind: str = "string") -> None:
    r.delete(K.job(jid))
    if kind == "string":
        r.set(K.job(jid), "overwritten")
    else:
        r.rpush(K.job(jid), "x", "y")


def assert_corrupt(r: redis.Redis, jid: str = "b", kind: str = "string") -> None:
    assert r.zscore(K.dead, jid) is not None
    assert r.sismember(K.corrupt, jid)
    assert r.type(K.job(jid) + ":corrupt") == kind
    h = r.hgetall(K.job(jid))
    assert h["state"] == "dead" and f"held a {kind}, not a hash" in h["error"], h
    for s in (K.wait, K.active, K.delayed, K.waiting_children):
        assert r.zscore(s, jid) is None, s
    assert any(e[1]["event"] == "dead" and e[1]["job"] == jid for e in r.xrange(K.events))


@pytest.mark.parametrize("kind", ["string", "list"])
def test_extend_lock_renews_the_others(call: Any, redis_client: redis.Redis, kind: str) -> None:
    add(call)
    got = fetch(call, lock_ms=1000)
    before = {j: redis_client.zscore(K.active, j) for j in IDS}
    break_key(redis_client, kind=kind)
    time.sleep(0.01)
    lost = call(P.extend_lock_call(K, 60000, [(j, got[j].token) for j in IDS]))
    assert lost == ["b"]
    for j in ("a", "c"):
        assert redis_client.zscore(K.active, j) > before[j] + 50_000  # type: ignore[operator]
    assert_corrupt(redis_client, kind=kind)


def test_recover_stalled_requeues_the_others_and_loses_nothing(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    fetch(call, lock_ms=1)
    break_key(redis_client)
    time.sleep(0.01)
    requeued, dead, _ = call(P.recover_stalled_call(K, 100, 5))
    assert requeued == ["a", "c"] and dead == ["b"]
    assert redis_client.zcard(K.wait) == 2 and redis_client.zcard(K.active) == 0
    assert_corrupt(redis_client)


def test_complete_acks_the_rest_of_the_batch(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    got = fetch(call)
    break_key(redis_client)
    codes = call(P.complete_call(K, 100, -1, -1, [(j, got[j].token, "1") for j in IDS]))
    assert codes == [1, -3, 1]
    assert redis_client.zcard(K.completed) == 2
    assert_corrupt(redis_client)


def test_fail_records_the_rest_of_the_batch(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    got = fetch(call)
    break_key(redis_client)
    codes = call(P.fail_call(K, 100, [(j, got[j].token, "E: x", "", 0) for j in IDS]))
    assert codes == [3, -3, 3]
    assert redis_client.zcard(K.dead) == 3
    assert_corrupt(redis_client)


def test_release_hands_back_the_others(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    got = fetch(call)
    break_key(redis_client)
    assert call(P.release_call(K, 100, [(j, got[j].token) for j in IDS])) == 2
    assert redis_client.zrange(K.wait, 0, -1) == ["a", "c"]
    assert_corrupt(redis_client)


def test_promote_moves_the_others(call: Any, redis_client: redis.Redis) -> None:
    add(call, delay_ms=1)
    break_key(redis_client)
    time.sleep(0.01)
    assert call(P.promote_call(K)) == -1
    assert redis_client.zrange(K.wait, 0, -1) == ["a", "c"] and redis_client.zcard(K.delayed) == 0
    assert_corrupt(redis_client)


def test_retry_dead_moves_the_others_and_keeps_the_corrupt_one_dead(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    got = fetch(call)
    call(P.fail_call(K, 100, [(j, got[j].token, "E: x", "", -1) for j in IDS]))
    break_key(redis_client)
    assert call(P.retry_dead_call(K, 100, ())) == ["a", "c"]
    assert_corrupt(redis_client)
    # and a second retry leaves it in the DLQ (a corrupt job cannot run), nothing is lost
    assert call(P.retry_dead_call(K, 100, ["b"])) == [] and redis_client.zscore(K.dead, "b") is not None
    # purging it removes its kept-aside value and its corrupt mark too
    assert call(P.purge_dead_call(K)) == 1
    assert redis_client.exists(K.job("b"), K.job("b") + ":corrupt") == 0 and not redis_client.sismember(K.corrupt, "b")


def test_progress_and_park_refuse_and_dead_letter_it(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    got = fetch(call)
    break_key(redis_client)
    assert call(P.progress_call(K, 100, "b", got["b"].token, "0.5")) == -1
    assert_corrupt(redis_client)
    break_key(redis_client, "c", "list")
    assert call(P.park_call(K, 100, "c", got["c"].token)) == -1
    assert_corrupt(redis_client, "c", "list")


def test_fetch_and_queue_stats_go_on(call: Any, redis_client: redis.Redis) -> None:
    add(call)
    break_key(redis_client, "a")
    stats = call(Call("queue_stats", (K.wait, K.delayed, K.active, K.waiting_children, K.dead), (K.job_prefix, 32)))
    assert stats[:5] == [3, 0, 0, 0, 0]
    assert sorted(fetch(call)) == ["b", "c"]
    assert_corrupt(redis_client, "a")
