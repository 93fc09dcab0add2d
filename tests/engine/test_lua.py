"""The Lua scripts called directly (through the pure call builders), one state change each."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from qsim.engine import protocol as P
from qsim.engine.jobinfo import JobInfo, attempt_log
from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import SCRIPT_NAMES, Call, ScriptSet, lua_source, run_calls

pytestmark = pytest.mark.redis

K = QueueKeys("q")


@pytest.fixture
def call(redis_client: redis.Redis) -> Any:
    scripts = ScriptSet(redis_client)

    def run(c: Call) -> Any:
        return run_calls(redis_client, scripts, [c])[0]

    return run


def spec(jid: str = "", name: str = "t", prio: int = 0, delay_ms: int = 0, attempts: int = 1) -> P.JobSpec:
    return P.JobSpec(jid, name, '{"x":1}', prio, delay_ms, attempts, "", 0.0)


def fetch(call: Any, n: int = 10, lock_ms: int = 30000) -> list[P.Fetched]:
    return P.parse_fetch(call(P.fetch_call(K, n, lock_ms, "w1", "tok")))


def test_every_script_has_a_header_listing_keys_argv_and_returns() -> None:
    for name in SCRIPT_NAMES:
        head = lua_source(name).split("]]", 1)[0]
        assert head.startswith(f"--[[ {name}:"), name
        assert "KEYS[1]" in head and "ARGV[1]" in head and "Returns" in head, name


def test_every_script_brings_the_library_definitions_it_uses_and_only_those() -> None:
    import re

    from qsim.engine.scripts import LUA_INCLUDES, _definitions, _lua_file

    library = {n for inc in LUA_INCLUDES for names, _ in _definitions(_lua_file(inc)) for n in names}
    for name in SCRIPT_NAMES:
        src = lua_source(name)
        defined = {n.strip() for m in re.findall(r"^\s*local (?:function )?(\w+(?:\s*,\s*\w+)*)", src, re.M)
                   for n in m.split(",")}
        code = "\n".join(line.split("--", 1)[0] for line in src.splitlines())  # comments may name anything
        used = set(re.findall(r"\w+", code)) & library
        # Then every library name the code uses is defined in it (Redis would fail the call on a missing
        # one), and no library function it never calls is made on each call
        assert used <= defined, (name, used - defined)
        assert {n for n in defined & library if n.startswith("qsim_")} <= used, name


def test_a_new_jobs_hash_leaves_out_the_fields_at_their_default(call: Any, redis_client: redis.Redis) -> None:
    from qsim.engine.jobinfo import JobInfo

    # Given a plain job and one with every option away from its default
    call(P.add_call(K, [spec("plain"), P.JobSpec("full", "t", "1", 3, 50, 4, '{"kind":"fixed"}', 2.5)]))
    plain, full = (redis_client.hgetall(K.job(j)) for j in ("plain", "full"))
    # Then the plain job's hash holds only what differs from a default (and its priority, which workers of
    # earlier versions look for: a rolling deploy runs both), the other's holds every option
    assert set(plain) == {"name", "data", "priority", "max_attempts", "enqueued_at", "state"}
    assert {k: full[k] for k in ("priority", "backoff", "timeout", "delay")} == {
        "priority": "3", "backoff": '{"kind":"fixed"}', "timeout": "2.5", "delay": "0.050"}
    # and a reader sees the defaults
    info = JobInfo.from_hash("q", "plain", plain)
    assert (info.priority, info.attempts_made, info.stalled, info.timeout, info.backoff) == (0, 0, 0, 0.0, "")


def test_add_then_fetch_in_priority_order_fifo_within_a_level(call: Any, redis_client: redis.Redis) -> None:
    # Given jobs of priorities 5, 1, 5, 1, 0 added in that order
    ids = P.parse_add(call(P.add_call(K, [spec("a", prio=5), spec("b", prio=1), spec("c", prio=5),
                                            spec("d", prio=1), spec("e", prio=0)])))
    assert ids == [("a", True, ""), ("b", True, ""), ("c", True, ""), ("d", True, ""), ("e", True, "")]
    # When one worker fetches them all
    got = fetch(call)
    # Then lower priority first, FIFO within a level, each locked with its own token
    assert [g.id for g in got] == ["e", "b", "d", "a", "c"]
    assert len({g.token for g in got}) == 5
    assert redis_client.zcard(K.active) == 5 and redis_client.zcard(K.wait) == 0
    h = redis_client.hgetall(K.job("e"))
    assert h["state"] == "active" and h["worker"] == "w1" and h["token"] == got[0].token
    assert float(h["started_at"]) >= float(h["enqueued_at"]) > time.time() - 60


def test_add_dedups_by_id_and_generates_ids(call: Any, redis_client: redis.Redis) -> None:
    first = P.parse_add(call(P.add_call(K, [spec("same"), spec(""), spec("")])))
    again = P.parse_add(call(P.add_call(K, [spec("same", name="other")])))
    assert first[0] == ("same", True, "") and again == [("same", False, "t")]
    assert first[1][0] != first[2][0]
    assert redis_client.hget(K.job("same"), "name") == "t"
    assert redis_client.zcard(K.wait) == 3


def test_fetch_takes_at_most_n_and_respects_pause(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec() for _ in range(5)]))
    redis_client.hset(K.meta, "paused", "1")
    assert fetch(call) == []
    redis_client.hdel(K.meta, "paused")
    assert len(fetch(call, n=3)) == 3
    assert redis_client.zcard(K.wait) == 2
    assert redis_client.llen(K.marker) == 1  # others are told jobs remain


def test_delayed_job_is_promoted_when_due(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("later", delay_ms=300)]))
    left = call(P.promote_call(K))
    assert 200 <= left <= 300 and fetch(call) == []
    time.sleep(0.32)
    assert call(P.promote_call(K)) == -1
    assert [g.id for g in fetch(call)] == ["later"]


def test_an_idle_check_re_arms_the_marker_only_when_jobs_wait(call: Any, redis_client: redis.Redis) -> None:
    # Given an empty queue: an idle check (promote with rearm) pushes no marker
    assert call(P.promote_call(K, rearm=True)) == -1
    assert redis_client.llen(K.marker) == 0
    # When a job waits whose wake-up was taken (the marker popped by a worker that died)
    call(P.add_call(K, [spec("a")]))
    redis_client.delete(K.marker)
    # Then a plain promotion leaves the marker alone, an idle check pushes it once, and not again while it is there
    call(P.promote_call(K))
    assert redis_client.llen(K.marker) == 0
    call(P.promote_call(K, rearm=True))
    call(P.promote_call(K, rearm=True))
    assert redis_client.llen(K.marker) == 1


def test_complete_checks_the_token_and_is_idempotent(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a"), spec("b")]))
    a, b = fetch(call)
    codes = call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, '{"ok":1}'), (b.id, "stolen", "null"),
                                                  ("nope", "x", "null")]))
    assert codes == [1, -1, -2]
    assert call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, '{"ok":1}')])) == [0]
    h = redis_client.hgetall(K.job("a"))
    assert h["state"] == "completed" and h["returnvalue"] == '{"ok":1}' and h["attempts_made"] == "1"
    # (a completed attempt is not written to the log: it is attempt_started, finished_at, worker; readers add it)
    assert "log" not in h and attempt_log(h) == f"{h['attempt_started']},{h['finished_at']},completed,w1;"
    assert [x.outcome for x in JobInfo.from_hash("q", "a", h).attempts] == ["completed"]
    assert redis_client.zcard(K.completed) == 1 and redis_client.zscore(K.active, "b") is not None
    ev = redis_client.xrange(K.events)
    assert [e[1]["event"] for e in ev] == ["completed"]


def test_a_null_result_is_not_stored_and_reads_as_none(call: Any, redis_client: redis.Redis) -> None:
    # Given two jobs: a's handler returned nothing (JSON null), b's returned 0
    call(P.add_call(K, [spec("a"), spec("b")]))
    a, b = fetch(call)
    assert call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, "null"), (b.id, b.token, "0")])) == [1, 1]
    # Then a's hash gains no returnvalue field (a field costs Redis on every later read and write of the hash)
    # and a reader takes it as null; b's 0 is kept
    ha, hb = (redis_client.hgetall(K.job(x)) for x in "ab")
    assert "returnvalue" not in ha and JobInfo.from_hash("q", "a", ha).returnvalue is None
    assert hb["returnvalue"] == "0" and JobInfo.from_hash("q", "b", hb).returnvalue == 0


def test_a_held_retry_moves_its_attempts_start_and_keeps_its_first(call: Any, redis_client: redis.Redis) -> None:
    # Given a job whose first attempt failed (retried at once) and which was fetched again
    call(P.add_call(K, [spec("a", attempts=2)]))
    (a,) = fetch(call)
    assert call(P.fail_call(K, 100, [(a.id, a.token, "E: x", "", 0, "failed", 0)])) == [1]
    first = redis_client.hget(K.job("a"), "started_at")
    (a,) = fetch(call)
    again = float(redis_client.hget(K.job("a"), "attempt_started"))
    time.sleep(0.02)
    # When its second attempt completes after waiting 10 ms in the worker for a slot
    assert call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, "1", 10_000)])) == [1]
    # Then that attempt's start moves on by the wait, and the job's first start stays the first attempt's
    h = redis_client.hgetall(K.job("a"))
    assert h["started_at"] == first and float(h["attempt_started"]) == pytest.approx(again + 0.01, abs=1e-6)
    assert float(first) < again


def test_a_held_jobs_start_moves_on_by_its_hold_never_past_now(call: Any, redis_client: redis.Redis) -> None:
    # Given three jobs fetched at once; b and c then waited 40 ms and an hour in the worker for a slot
    call(P.add_call(K, [spec("a"), spec("b"), spec("c", attempts=2)]))
    a, b, c = fetch(call)
    fetched = float(redis_client.hget(K.job("a"), "started_at"))
    time.sleep(0.06)
    # When their results come with their holds
    assert call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, "1"), (b.id, b.token, "1", 40_000)])) == [1, 1]
    assert call(P.fail_call(K, 100, [(c.id, c.token, "E: x", "", 0, "failed", 3_600_000_000)])) == [1]
    # Then a's start is the fetch; b's is 40 ms later (first start and the attempt log alike); c's is capped
    # at its end (a hold longer than the attempt is a clock error, never a start after the end)
    ha, hb, hc = (redis_client.hgetall(K.job(x)) for x in "abc")
    assert float(ha["started_at"]) == float(ha["attempt_started"]) == fetched
    assert float(hb["started_at"]) == float(hb["attempt_started"]) == pytest.approx(fetched + 0.04, abs=1e-6)
    assert attempt_log(hb).startswith(hb["started_at"] + ",")
    start, end = hc["log"].split(",")[:2]
    assert start == end == hc["attempt_started"] == hc["started_at"] and float(end) > fetched + 0.05


def test_complete_trims_completed_jobs_to_keep_count(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec(f"j{i}") for i in range(5)]))
    got = fetch(call)
    call(P.complete_call(K, 100, 2, -1, [(g.id, g.token, "null") for g in got]))
    assert redis_client.zrange(K.completed, 0, -1) == ["j3", "j4"]
    assert not redis_client.exists(K.job("j0")) and redis_client.exists(K.job("j4"))


def test_fail_retries_delays_then_dead(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a", attempts=3)]))
    (a,) = fetch(call)
    assert call(P.fail_call(K, 100, [(a.id, a.token, "E: one", "tb1", 0)])) == [1]
    (a,) = fetch(call)
    assert a.attempts_made == "1"
    assert call(P.fail_call(K, 100, [(a.id, a.token, "E: two", "tb2", 200)])) == [2]
    assert redis_client.zscore(K.delayed, "a") is not None and fetch(call) == []
    time.sleep(0.22)
    call(P.promote_call(K))
    (a,) = fetch(call)
    assert call(P.fail_call(K, 100, [(a.id, a.token, "E: three", "tb3", 0)])) == [3]
    assert call(P.fail_call(K, 100, [(a.id, a.token, "E: three", "tb3", 0)])) == [0]
    h = redis_client.hgetall(K.job("a"))
    assert h["state"] == "dead" and h["error"] == "E: three" and h["traceback"] == "tb3"
    assert h["attempts_made"] == "3" and h["log"].count(",failed,") == 3
    assert redis_client.zrange(K.dead, 0, -1) == ["a"]
    events = [e[1]["event"] for e in redis_client.xrange(K.events)]
    assert events == ["failed", "retrying", "failed", "retrying", "failed", "dead"]


def test_unrecoverable_failure_skips_retries(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a", attempts=5)]))
    (a,) = fetch(call)
    assert call(P.fail_call(K, 100, [(a.id, a.token, "Fatal", "", -1)])) == [3]
    assert redis_client.hget(K.job("a"), "attempts_made") == "1"


def test_extend_lock_renews_only_held_locks(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a"), spec("b")]))
    a, b = fetch(call, lock_ms=1000)
    before = redis_client.zscore(K.active, "a")
    lost = call(P.extend_lock_call(K, 60000, [(a.id, a.token), (b.id, "wrong")]))
    assert lost == ["b"]
    assert redis_client.zscore(K.active, "a") > before + 50000  # type: ignore[operator]


def test_a_job_fetched_ahead_and_never_started_goes_back_without_a_stall(call: Any,
                                                                       redis_client: redis.Redis) -> None:
    # Given a fetch of three jobs of which the worker starts one at once (the other two held in the worker)
    call(P.add_call(K, [spec("a"), spec("b"), spec("c")]))
    a, b, c = P.parse_fetch(call(P.fetch_call(K, 3, 50, "w1", "tok", at_once=1)))
    assert [redis_client.hget(K.job(j), "held") for j in "abc"] == [None, "1", "1"]
    # and b started later (its notice, with the next completions, cleared the mark; a stale token changes nothing)
    call(P.add_call(K, [spec("d")]))
    (d,) = fetch(call)
    assert call(P.complete_call(K, 100, -1, -1, [(d.id, d.token, "null")], [("b", b.token), ("c", "stale")])) == [1]
    assert [redis_client.hget(K.job(j), "held") for j in "abc"] == [None, None, "1"]
    # When the worker dies and a stalled check finds the three locks expired
    time.sleep(0.08)
    requeued, dead, unstarted = call(P.recover_stalled_call(K, 100, 0))
    # Then the two that started stalled (max_stalled 0: to the DLQ); c, never started, is back at the front
    # without a stall, an attempt or its first-start time
    assert sorted(dead) == ["a", "b"] and requeued == [] and unstarted == ["c"]
    h = redis_client.hgetall(K.job("c"))
    assert h["state"] == "waiting" and h.get("stalled", "0") == "0" and "log" not in h and "started_at" not in h
    assert "held" not in h and "token" not in h
    assert redis_client.zrange(K.wait, 0, -1) == ["c"]


def test_completing_or_handing_back_a_held_job_clears_its_mark(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a"), spec("b")]))
    a, b = P.parse_fetch(call(P.fetch_call(K, 2, 30000, "w1", "tok", at_once=0)))
    assert call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, "null", 500)])) == [1]
    assert call(P.release_call(K, 100, [(b.id, b.token, False)])) == 1
    assert redis_client.hget(K.job("a"), "held") is None and redis_client.hget(K.job("b"), "held") is None


def test_recover_stalled_requeues_then_kills_and_refuses_the_old_token(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a")]))
    (a,) = fetch(call, lock_ms=50)
    time.sleep(0.08)
    assert call(P.recover_stalled_call(K, 100, 1)) == [["a"], [], []]
    h = redis_client.hgetall(K.job("a"))
    assert h["state"] == "waiting" and h["stalled"] == "1" and "token" not in h and h.get("attempts_made", "0") == "0"
    assert call(P.complete_call(K, 100, -1, -1, [(a.id, a.token, "null")])) == [-1]
    (a2,) = fetch(call, lock_ms=50)
    time.sleep(0.08)
    assert call(P.recover_stalled_call(K, 100, 1)) == [[], ["a"], []]
    h = redis_client.hgetall(K.job("a"))
    assert h["state"] == "dead" and "stalled 2 times" in h["error"]
    assert h["log"].count(",stalled,w1;") == 2


def test_release_hands_jobs_back_without_counting_an_attempt(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a")]))
    (a,) = fetch(call)
    assert call(P.release_call(K, 100, [(a.id, "wrong")])) == 0
    assert call(P.release_call(K, 100, [(a.id, a.token)])) == 1
    h = redis_client.hgetall(K.job("a"))
    assert h["state"] == "waiting" and h.get("attempts_made", "0") == "0" and ",released," in h["log"]
    assert redis_client.zcard(K.active) == 0 and [g.id for g in fetch(call)] == ["a"]


def test_retry_dead_and_purge_dead(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec(f"d{i}") for i in range(3)]))
    for g in fetch(call):
        call(P.fail_call(K, 100, [(g.id, g.token, "E", "", -1)]))
    assert call(P.retry_dead_call(K, 100, ["d1", "zz"])) == ["d1"]
    assert redis_client.hget(K.job("d1"), "attempts_made") == "0"
    assert redis_client.zrange(K.wait, 0, -1) == ["d1"]
    assert call(P.purge_dead_call(K)) == 2
    assert redis_client.zcard(K.dead) == 0 and not redis_client.exists(K.job("d0"))


def test_progress_needs_the_lock(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a")]))
    (a,) = fetch(call)
    assert call(P.progress_call(K, 100, "a", a.token, "0.5")) == 1
    assert call(P.progress_call(K, 100, "a", "wrong", "0.9")) == -1
    assert redis_client.hget(K.job("a"), "progress") == "0.5"


def test_scripts_survive_script_flush(redis_client: redis.Redis) -> None:
    scripts = ScriptSet(redis_client)
    redis_client.script_flush()
    replies = run_calls(redis_client, scripts, [P.add_call(K, [spec("a")]), P.promote_call(K)])
    assert replies == [["a", 1], -1]


def test_park_frees_a_limited_slot_and_wakes_an_idle_worker(call: Any, redis_client: redis.Redis) -> None:
    from qsim.engine import limiter

    # Given a queue limited to one active job: a parent runs, another job waits, idle workers block on
    # the marker, which the fetch at the limit deleted
    for c in limiter.op_set_concurrency_limit(K, 1).calls:
        call(c)
    call(P.add_call(K, [spec("parent"), spec("other")]))
    (p,) = fetch(call)
    assert p.id == "parent" and redis_client.llen(K.marker) == 0
    redis_client.hset(K.job("parent"), "pending_children", 1)  # (a child it added still runs)
    # When the parent parks in waiting-children
    assert call(P.park_call(K, 100, "parent", p.token)) == 1
    # Then the slot it freed wakes a waiting worker, which takes the other job
    assert redis_client.llen(K.marker) == 1
    assert [f.id for f in fetch(call)] == ["other"]


def test_release_of_a_job_never_started_leaves_no_trace_of_its_fetch(call: Any, redis_client: redis.Redis) -> None:
    call(P.add_call(K, [spec("a"), spec("b")]))
    got = {f.id: f for f in fetch(call)}
    # a was cut off (its handler ran), b was fetched ahead and never started
    assert call(P.release_call(K, 100, [("a", got["a"].token, True), ("b", got["b"].token, False)])) == 2
    a, b = redis_client.hgetall(K.job("a")), redis_client.hgetall(K.job("b"))
    assert a["log"].endswith(",released,w1;") and "started_at" in a
    assert "log" not in b and "started_at" not in b and b["state"] == "waiting"
    # b's next fetch is its first start
    again = {f.id: f for f in fetch(call)}
    assert again["b"].wait != "" and again["a"].wait == ""
