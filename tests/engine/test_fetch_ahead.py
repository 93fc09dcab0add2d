"""Fetching ahead, end to end with worker processes: a held job never waits long behind running ones, never
runs with a lost lock or twice, counts no stall when it never started, respects rate limits, and goes back at
once on SIGTERM (docs/explanation/fetch-ahead.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from engine_helpers import ROOT, wait_until
from waiting import timing_allowance
from qsim.engine import EXIT_CUT_OFF, EXIT_DRAINED, Queue
from qsim.engine import protocol as P
from qsim.engine.scripts import ScriptSet, run_calls

pytestmark = pytest.mark.redis

WORKER = str(ROOT / "tests" / "engine" / "worker_proc.py")  # sleeps job.data["sleep"] s, records starts


class Workers:
    """Worker processes of one test (killed at its end)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *, concurrency: int = 10, prefetch: str = "auto", lock: float = 30.0, stalled: float = 30.0,
              grace: float = 30.0, max_stalled: int = 1, block_timeout: float = 5.0) -> subprocess.Popen[str]:
        p = subprocess.Popen([sys.executable, WORKER, self.url, "q", "--concurrency", str(concurrency),
                              "--prefetch", prefetch, "--lock-duration", str(lock), "--stalled-interval",
                              str(stalled), "--grace", str(grace), "--max-stalled", str(max_stalled),
                              "--block-timeout", str(block_timeout)],
                             cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stderr is not None:
                p.stderr.close()


@pytest.fixture
def workers(redis_url: str) -> Iterator[Workers]:
    w = Workers(redis_url)
    yield w
    w.stop()


@pytest.fixture
def q(redis_url: str) -> Iterator[Queue]:
    queue = Queue("q", redis=redis_url)
    yield queue
    queue.close()


def runs(client: redis.Redis) -> Counter[str]:
    """How often each job's handler started (test:started holds ``<id>:<attempt>:<pid>``)."""
    return Counter(s.split(":")[0] for s in client.lrange("test:started", 0, -1))


def warm(q: Queue, n: int, sleep: float) -> None:
    """Run ``n`` jobs of ``sleep`` s, so the workers know the jobs' run time."""
    done = q.counts()["completed"]
    q.add_bulk([("warm", {"sleep": sleep}) for _ in range(n)])
    wait_until(lambda: q.counts()["completed"] >= done + n, timeout=60)


def test_short_jobs_fetched_ahead_never_wait_behind_long_ones(
    workers: Workers, q: Queue, redis_client: redis.Redis
) -> None:
    # Given two workers of 10 slots, warmed on 1 ms jobs (so they fetch ahead)
    for _ in range(2):
        workers.start(concurrency=10)
    warm(q, 400, 0.001)
    # When 10 jobs of 3 s and 40 of 1 ms arrive together (one worker's first fetches take the long ones and
    # some short ones beyond its 10 slots)
    q.add_bulk([("long", {"sleep": 3.0}) for _ in range(10)] + [("short", {"sleep": 0.001}) for _ in range(40)])
    wait_until(lambda: sum(1 for r in q.job_records() if r.name == "short" and r.state == "completed") == 40,
               timeout=30)
    recs = [r for r in q.job_records() if r.name == "short"]
    waits = sorted(r.started_at - r.enqueued_at for r in recs)
    print(f"\nshort jobs behind 3 s jobs: wait p50 {waits[20]:.3f} s, max {waits[-1]:.3f} s")
    # Then no short job waited for a long one to end: each started within a second (a held job goes back
    # after a few ms, the other worker runs it; more on a busy machine, but well before the 3 s job ends),
    # none ran twice, none counted a stall or a second attempt
    assert waits[-1] < min(timing_allowance(1.0), 2.5)
    assert all(len(r.attempts) == 1 and r.stalled == 0 for r in recs)
    assert set(runs(redis_client).values()) == {1}


def test_a_hand_back_wakes_an_idle_worker(workers: Workers, q: Queue, redis_client: redis.Redis) -> None:
    # Given worker A (1 slot, 4 ahead) warmed on 1.5 s jobs (a held job may wait 6 s), running a 12 s job and
    # holding three 1 ms ones, its BLPOP open since its fetch; and worker B (4 slots) idle, blocked after A
    # (both wait up to 30 s per BLPOP, so only a push wakes them)
    workers.start(concurrency=1, prefetch="4", block_timeout=30.0)
    warm(q, 2, 1.5)
    q.add_bulk([("long", {"sleep": 12.0}, {"job_id": "long"})]
               + [("short", {"sleep": 0.001}, {"job_id": f"short-{i}"}) for i in range(3)])
    wait_until(lambda: q.counts()["active"] == 4, timeout=10)
    t0 = time.time()
    workers.start(concurrency=4, block_timeout=30.0)
    wait_until(lambda: q.counts()["active"] == 4 and len(runs(redis_client)) >= 3, timeout=10)
    # When A's hold bound passes and it hands the short jobs back (the push wakes A's own open BLPOP first)
    wait_until(lambda: all(r.state == "completed" for r in q.job_records() if r.name == "short"), timeout=20)
    recs = [r for r in q.job_records() if r.name == "short"]
    waits = sorted(r.started_at - r.enqueued_at for r in recs)
    long_start = q.get_job("long").started_at
    print(f"\nshort jobs handed back by a busy worker: started {waits[0]:.2f}..{waits[-1]:.2f} s after their add "
          f"(the long job ends {12.0 + long_start - recs[0].enqueued_at:.2f} s after it); B started "
          f"{t0 - recs[0].enqueued_at:.2f} s after it")
    # Then B takes them at once (about 6 s after their add, their hold bound), not when A's slot frees (12 s)
    assert waits[-1] < 9.0
    assert all(len(r.attempts) == 1 and r.stalled == 0 for r in recs)


def test_a_held_job_of_a_stopped_worker_runs_once_and_counts_no_stall(
    workers: Workers, q: Queue, redis_client: redis.Redis
) -> None:
    # Given a worker of 1 slot that fetches 2 ahead, warmed on 0.5 s jobs (a held job may wait 1.5 s: half its
    # lock), running a 3 s job and holding two short ones
    frozen = workers.start(concurrency=1, prefetch="2", lock=3.0, stalled=0.5, max_stalled=5)
    warm(q, 2, 0.5)
    q.add_bulk([("long", {"sleep": 3.0}, {"job_id": "long"})]
               + [("short", {"sleep": 0.01}, {"job_id": f"short-{i}"}) for i in range(2)])
    wait_until(lambda: redis_client.llen("test:started") >= 3, timeout=10)  # the warm jobs, then "long"
    held = {r.id for r in q.job_records() if r.state == "active" and r.id != "long"}
    # When the worker freezes (SIGSTOP) past its locks while another worker recovers and runs its jobs
    frozen.send_signal(signal.SIGSTOP)
    try:
        workers.start(concurrency=4, lock=3.0, stalled=0.5, max_stalled=5)
        wait_until(lambda: {r.id: r.state for r in q.job_records()}.get("short-1") == "completed", timeout=20)
    finally:
        frozen.send_signal(signal.SIGCONT)
    wait_until(lambda: q.counts()["completed"] == 5, timeout=15)
    time.sleep(1.0)  # the frozen worker, resumed, would now run what it held
    recs = {r.id: r for r in q.job_records()}
    n = runs(redis_client)
    print(f"\nheld at the freeze: {sorted(held)}; runs {dict(n)}; stalls "
          f"{ {i: recs[i].stalled for i in ('long', 'short-0', 'short-1')} }")
    # Then the short jobs, held at the freeze, ran once each and, never started there, counted no stall
    assert held == {"short-0", "short-1"}
    assert n["short-0"] == 1 and n["short-1"] == 1
    assert recs["short-0"].stalled == 0 and recs["short-1"].stalled == 0
    assert all(r.state == "completed" for r in recs.values())


def test_a_reply_read_late_never_starts_a_job_another_worker_took(
    workers: Workers, q: Queue, redis_client: redis.Redis
) -> None:
    # Given worker A (2 slots, 1 s locks) running a job that blocks A's event loop for 5 s right after the job
    # beside it ended and its slot sent a fetch (of a 100 kB job: Redis takes a moment): that fetch's reply
    # waits unread past its lock
    a = workers.start(concurrency=2, prefetch="0", lock=1.0, stalled=0.5, max_stalled=100)
    q.add_bulk([("blocker", {"block": 5.0, "after": "partner"}, {"job_id": "blocker"}),
                ("partner", {"sleep": 0.3}, {"job_id": "partner"})]
               + [("short", {"sleep": 0.005, "pad": "x" * 100_000}) for _ in range(20)])
    wait_until(lambda: redis_client.exists("test:blocked:blocker"), timeout=20)
    # When worker B recovers A's expired locks meanwhile and runs those jobs
    workers.start(concurrency=8, prefetch="0", lock=1.0, stalled=0.5, max_stalled=100)
    wait_until(lambda: q.counts()["completed"] >= 22, timeout=60)
    wait_until(lambda: f"blocker:1:{a.pid}" in redis_client.lrange("test:started", 0, -1), timeout=20)
    time.sleep(1.0)  # A, its loop running again, reads the reply
    late = []  # jobs A started after another worker had started them
    seen: dict[str, set[str]] = {}
    for entry in redis_client.lrange("test:started", 0, -1):
        jid, _, pid = entry.split(":")
        others = seen.setdefault(jid, set())
        if pid == str(a.pid) and others - {pid} and jid != "blocker":  # (A records the blocker's start after it)
            late.append(jid)
        others.add(pid)
    twice = sorted(j for j, n in runs(redis_client).items() if n > 1)
    print(f"\nA's loop blocked 5 s with a fetch reply unread: ran twice {twice}; started by A after B had {late}")
    # Then A started none of the jobs of that late reply (their locks were older than half a lock when it read
    # it): a job that ran twice ran on A before the block (at-least-once), never on A after B
    assert late == []
    assert q.counts()["completed"] == 22


def _max_in_window(times: list[float], per: float) -> int:
    times = sorted(times)
    best, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - per:
            j += 1
        best = max(best, i - j + 1)
    return best


def test_prefetch_n_respects_a_rate_limit(workers: Workers, q: Queue) -> None:
    # Given a queue limited to 30 starts in any 1 s window and a worker that fetches 16 ahead
    q.set_rate_limit(30, 1.0)
    q.add_bulk([("t", {"sleep": 0.02}) for _ in range(150)])
    workers.start(concurrency=4, prefetch="16")
    wait_until(lambda: q.counts()["completed"] == 150, timeout=30)
    starts = [a.start for r in q.job_records() for a in r.attempts]
    most = _max_in_window(starts, 1.0)
    print(f"\nprefetch=16, rate limit 30/s: at most {most} handler starts in a 1 s window")
    # Then no 1 s window holds more handler starts than the limit
    assert most <= 30


def test_a_rate_limit_switched_on_counts_the_jobs_held_before(workers: Workers, q: Queue) -> None:
    # Given two workers of 4 slots fetching 16 ahead, busy on a backlog of 20 ms jobs with no limit
    for _ in range(2):
        workers.start(concurrency=4, prefetch="16")
    q.add_bulk([("t", {"sleep": 0.02}) for _ in range(1500)])
    wait_until(lambda: q.counts()["completed"] >= 200, timeout=30)
    # When a limit of 30 starts in any 1 s window is switched on (Redis' clock)
    sec, usec = q.client.time()
    on = sec + usec / 1e6
    q.set_rate_limit(30, 1.0)
    time.sleep(3.5)
    starts = sorted(a.start for r in q.job_records() for a in r.attempts if a.start >= on)
    first = sum(1 for t in starts if t < on + 1.0)
    most = _max_in_window(starts, 1.0)
    print(f"\nrate limit 30/s switched on under prefetch=16: {first} handler starts in its first second, at most "
          f"{most} in a 1 s window after it")
    # Then the jobs held when it came count against it: no more than 30 starts in its first second
    assert first <= 30


def test_sigterm_hands_held_jobs_back_at_once(workers: Workers, q: Queue, redis_client: redis.Redis) -> None:
    # Given a worker of 1 slot fetching 3 ahead, warmed on 0.5 s jobs (it may hold a job 2 s or more), running a
    # 2 s job and holding three short ones
    p = workers.start(concurrency=1, prefetch="3", grace=10.0)
    warm(q, 2, 0.5)
    q.add_bulk([("long", {"sleep": 2.0}, {"job_id": "long"})]
               + [("short", {"sleep": 0.01}, {"job_id": f"short-{i}"}) for i in range(3)])
    # (until the long job's handler started: a job is active in Redis from its fetch, before the worker runs it)
    wait_until(lambda: runs(q.client)["long"] == 1 and (q.counts()["active"] == 4 or q.counts()["waiting"] == 3),
               timeout=10)
    held = q.counts()["active"] - 1
    # When it gets SIGTERM
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    wait_until(lambda: q.counts()["waiting"] == 3, timeout=15)
    back = time.monotonic() - t0
    code = p.wait(15)
    recs = {r.id: r for r in q.job_records()}
    print(f"\nSIGTERM with {held} jobs held: back in the queue after {back:.2f} s; exit {code}")
    # Then the held jobs are back in the queue at once, with no attempt in their log; the running job drains
    assert back < 1.0
    assert code == EXIT_DRAINED and recs["long"].state == "completed"
    assert all(recs[f"short-{i}"].attempts == [] and recs[f"short-{i}"].state == "waiting" for i in range(3))


def test_a_cut_off_counts_only_running_jobs(workers: Workers, q: Queue) -> None:
    # Given a worker of 1 slot fetching 3 ahead, warmed on 0.5 s jobs, running a 2 s job and holding three
    p = workers.start(concurrency=1, prefetch="3", grace=0.5)
    warm(q, 2, 0.5)
    q.add_bulk([("long", {"sleep": 2.0}, {"job_id": "long"})]
               + [("short", {"sleep": 0.01}, {"job_id": f"short-{i}"}) for i in range(3)])
    # (until the long job's handler started: a job is active in Redis from its fetch, before the worker runs it)
    wait_until(lambda: runs(q.client)["long"] == 1 and (q.counts()["active"] == 4 or q.counts()["waiting"] == 3),
               timeout=10)
    # When it gets SIGTERM with a grace shorter than the running job
    p.send_signal(signal.SIGTERM)
    code = p.wait(15)
    assert p.stderr is not None
    log = p.stderr.read()
    recs = {r.id: r for r in q.job_records()}
    cut = [line for line in log.splitlines() if "cutting off" in line]
    print(f"\nexit {code}; {cut}")
    # Then one job is cut off (the running one, its attempt logged as released); the held ones left no attempt
    assert code == EXIT_CUT_OFF and len(cut) == 1 and "cutting off 1 jobs" in cut[0]
    assert [a.outcome for a in recs["long"].attempts] == ["released"]
    assert all(recs[f"short-{i}"].attempts == [] for i in range(3))
    assert q.counts()["waiting"] == 4


def test_a_quiet_tenant_never_waits_behind_a_noisy_ones_backlog(workers: Workers, q: Queue) -> None:
    # Given a keyed rate limit of 5 starts/s per tenant and 5,000 jobs of one tenant waiting
    q.set_rate_limit(5, 1.0, key="tenant")
    q.add_bulk([("hook", {"tenant": "acme", "sleep": 0.001}) for _ in range(5000)])
    workers.start(concurrency=4)
    wait_until(lambda: q.counts()["completed"] >= 5, timeout=10)
    # When another tenant's job arrives
    job = q.add("hook", {"tenant": "globex", "sleep": 0.001}, job_id="quiet")
    wait_until(lambda: q.get_job("quiet").state == "completed", timeout=10)
    r = q.get_job("quiet")
    wait = r.started_at - r.enqueued_at
    print(f"\nquiet tenant behind 5,000 throttled jobs: waited {wait:.3f} s")
    # Then it starts at once
    assert job.created and wait < 1.0
