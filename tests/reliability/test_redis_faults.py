"""Redis itself fails under running workers: a crash-restart (AOF, appendfsync always), a long pause, and
memory full under ``maxmemory-policy noeviction``.

Workers are real processes (``benchmarks/chaos.py --worker-proc``: each
execution is counted in Redis); a producer thread keeps adding jobs the
whole time and remembers which adds Redis acknowledged.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from qsim.engine import Backoff, Queue
from qsim.errors import EngineError, HarnessError, RedisUnavailable
from redis_server import RedisServer, free_port
from reliability_helpers import ROOT, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.chaos]

CHAOS = str(ROOT / "benchmarks" / "chaos.py")
LOGS: dict[int, Path] = {}  # each worker process's log, by pid


def start_workers(url: str, n: int, logdir: Path, *, work: float, concurrency: int, lock: float, stalled: float,
                  max_stalled: int = 5) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = []
    for i in range(n):
        with open(logdir / f"worker{i}.log", "wb") as log:  # the child keeps its own copy of the descriptor
            procs.append(subprocess.Popen([sys.executable, CHAOS, "--worker-proc", url, "q", f"w{i}", str(concurrency),
                                           str(work), str(lock), str(stalled), str(max_stalled)], cwd=ROOT, env=env,
                                          stdout=subprocess.DEVNULL, stderr=log))
        LOGS[procs[-1].pid] = logdir / f"worker{i}.log"
    return procs


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(20))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGUSR1)  # it logs what each of its tasks awaits (qsim.engine.eventloop)
            time.sleep(1.0)
            p.kill()
            codes.append(p.wait())
            log = LOGS.get(p.pid)
            print(f"worker {p.args[5]} did not stop within 20 s of SIGTERM; the end of its log:\n"
                  + (log.read_text(errors="replace")[-8000:] if log is not None else "(none)"))
    return codes


class Producer(threading.Thread):
    """Adds ``n`` jobs at ~``rate``/s; an add that fails is retried (same job id) until Redis acknowledges it."""

    def __init__(self, url: str, n: int, rate: float, prefill: int = 0) -> None:
        super().__init__(daemon=True)
        self.q = Queue("q", redis=url)
        self.n, self.rate, self.prefill = n, rate, prefill
        opts = {"attempts": 20, "backoff": Backoff.fixed(0.2)}
        self.acked = [e.id for e in self.q.add_bulk([("t", {"i": i}, {"job_id": f"p{i}", **opts})
                                                     for i in range(prefill)])]
        self.refused = 0
        self.stop = threading.Event()

    def run(self) -> None:
        for i in range(self.prefill, self.n):
            if self.stop.is_set():
                break
            jid = f"p{i}"
            while True:
                try:
                    self.q.add("t", {"i": i}, job_id=jid, attempts=20, backoff=Backoff.fixed(0.2))
                    self.acked.append(jid)
                    break
                except RedisUnavailable:
                    self.refused += 1
                    time.sleep(0.05)
            time.sleep(1 / self.rate)
        self.q.close()


def outcome(url: str, ids: list[str]) -> dict[str, Any]:
    q = Queue("q", redis=url)
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        recs = {x.id: x for x in q.job_records()}
        runs = {k: int(v) for k, v in r.hgetall("q:runs").items()}
    finally:
        q.close()
        r.close()
    states = [recs[j].state if j in recs else "missing" for j in ids]
    return {
        "recs": recs, "runs": runs,
        "completed": states.count("completed"), "dead": states.count("dead"),
        "lost": sum(1 for s in states if s not in ("completed", "dead", "waiting", "active", "delayed")),
        "duplicates": sorted(j for j in ids if runs.get(j, 0) > 1),
        "failed_attempts": sum(sum(1 for a in recs[j].attempts if a.outcome == "failed") for j in ids if j in recs),
    }


def all_done(url: str, n: int) -> bool:
    try:
        q = Queue("q", redis=url)
        try:
            c = q.counts()
        finally:
            q.close()
    except RedisUnavailable:
        return False
    return c["completed"] + c["dead"] >= n


def test_redis_crash_restart_with_aof_loses_no_acknowledged_add(tmp_path: Path) -> None:
    server = RedisServer(tmp_path / "aof", extra_args=["--appendonly", "yes", "--appendfsync", "always"]).start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # Given three workers and a producer adding jobs at ~150/s
        procs = start_workers(server.url, 3, tmp_path, work=0.02, concurrency=10, lock=2.0, stalled=1.0)
        prod = Producer(server.url, 100_000, 150)
        prod.start()
        r = redis.Redis.from_url(server.url, decode_responses=True)
        # (every worker has run a job: a worker that cannot reach Redis when it starts exits with code 1)
        wait_until(lambda: {e.split()[1] for e in r.lrange("q:execs", 0, -1)} == {"w0", "w1", "w2"}, timeout=30)
        r.close()
        n0 = len(prod.acked)
        wait_until(lambda: len(prod.acked) >= n0 + 100, timeout=30)
        # When redis-server is SIGKILLed mid-run and restarted on the same port 1 s later
        server.kill()
        down_at = len(prod.acked)
        time.sleep(1.0)
        server.start()
        wait_until(lambda: len(prod.acked) >= down_at + 150, timeout=30)
        prod.stop.set()
        prod.join(30)
        assert not prod.is_alive()
        total = len(prod.acked)
        # Then the workers reconnect by themselves (none exited) and every acknowledged add completes
        wait_until(lambda: all_done(server.url, total), timeout=60, interval=0.1)
        assert [p.poll() for p in procs] == [None, None, None]
        o = outcome(server.url, prod.acked)
        print(f"\nredis crash-restart: {len(prod.acked)} adds acknowledged ({down_at} before the crash, "
              f"{prod.refused} refused while down and retried), completed {o['completed']}, dead {o['dead']}, "
              f"lost {o['lost']}, run twice {len(o['duplicates'])}, failed attempts {o['failed_attempts']}")
        assert prod.refused > 0
        assert o["completed"] == total and o["lost"] == 0 and o["dead"] == 0
        assert all(o["runs"].get(j, 0) >= 1 for j in prod.acked)
        assert stop_workers(procs) == [0, 0, 0]
    finally:
        stop_workers(procs)
        server.stop()


def test_redis_paused_longer_than_the_lock(own_redis: RedisServer, tmp_path: Path) -> None:
    url = own_redis.url
    procs: list[subprocess.Popen[bytes]] = []
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        # Given three workers running 0.3 s jobs with a 1 s lock, and a producer adding 400 jobs
        procs = start_workers(url, 3, tmp_path, work=0.3, concurrency=10, lock=1.0, stalled=0.5)
        prod = Producer(url, 400, 100, prefill=100)
        prod.start()
        wait_until(lambda: r.zcard("qsim:{q}:active") >= 25, timeout=30)
        # When Redis is frozen (SIGSTOP) for 2.5 s, longer than the lock, then resumed
        held = set(r.zrange("qsim:{q}:active", 0, -1))
        assert own_redis.proc is not None
        os.kill(own_redis.proc.pid, signal.SIGSTOP)
        time.sleep(2.5)
        os.kill(own_redis.proc.pid, signal.SIGCONT)
        prod.join(60)
        # Then the workers carry on by themselves and every acknowledged add completes
        wait_until(lambda: all_done(url, 400), timeout=60, interval=0.1)
        assert [p.poll() for p in procs] == [None, None, None]
        o = outcome(url, prod.acked)
        assert len(prod.acked) == 400 and o["completed"] == 400 and o["lost"] == 0 and o["dead"] == 0
        # and the report says what happened to the jobs active at the pause (``held``: the ones fetched between
        # that snapshot and the SIGSTOP, a few on a busy machine, are not in it)
        recs, runs = o["recs"], o["runs"]
        stalled = sorted(j for j in held if recs[j].stalled)
        kept = sorted(j for j in held if not recs[j].stalled)
        print(f"\nredis paused 2.5 s (lock 1 s): {len(held)} jobs active at the pause, all completed; "
              f"{len(kept)} kept by their worker (its renewal or completion reached Redis first), "
              f"{len(stalled)} put back by a stalled check and run again "
              f"({sum(1 for j in stalled if runs.get(j, 0) > 1)} of them executed twice); "
              f"jobs executed twice overall: {len(o['duplicates'])}, stalled overall: "
              f"{sum(1 for j in prod.acked if recs[j].stalled)}")
        # and each job ran once, plus once per lock that expired (a stall: the pause, or a worker starved of CPU
        # for longer than half a lock) and per failed attempt (a handler's own write cut short by the pause): every
        # execution is one attempt in the job's log, the last one its completion
        for j in prod.acked:
            outcomes = [a.outcome for a in recs[j].attempts]
            assert outcomes[-1] == "completed" and set(outcomes[:-1]) <= {"stalled", "failed"}, (j, outcomes)
            assert outcomes.count("stalled") == recs[j].stalled, (j, outcomes, recs[j].stalled)
            assert 1 <= runs.get(j, 0) <= len(outcomes), f"job {j} ran {runs.get(j, 0)} times, its log: {outcomes}"
        assert stop_workers(procs) == [0, 0, 0]
    finally:
        r.close()
        if own_redis.proc is not None:
            os.kill(own_redis.proc.pid, signal.SIGCONT)
        stop_workers(procs)


def test_a_server_that_never_answers_is_not_left_running(tmp_path: Path) -> None:
    # Given a redis-server that starts but never answers where the helper waits for it
    elsewhere = free_port()
    server = RedisServer(tmp_path / "mute", extra_args=["--port", str(elsewhere)])
    # When start() gives up
    with pytest.raises(HarnessError, match="did not start"):
        server.start(timeout=1.0)
    # Then no process is left behind (it used to keep running, orphaned, after the test)
    assert server.proc is None
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=elsewhere, socket_connect_timeout=0.2, retry=None).ping()


def test_redis_at_its_maxmemory_with_noeviction_loses_and_repeats_nothing(tmp_path: Path, redis_url: str) -> None:
    # Given a Redis with maxmemory 5 MB and noeviction, and two workers (max_stalled 1, a 0.6 s lock renewed every
    # 0.3 s) recording each handler start in another Redis
    full = RedisServer(tmp_path / "full", extra_args=["--maxmemory", "5mb", "--maxmemory-policy", "noeviction"]).start()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rec = redis.Redis.from_url(redis_url, decode_responses=True)
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = []
    for log in logs:
        with open(log, "wb") as err:  # the child keeps its own copy of the descriptor
            procs.append(subprocess.Popen([sys.executable, str(ROOT / "tests" / "engine" / "worker_proc.py"), full.url,
                                           "q", "--concurrency", "20", "--lock-duration", "0.6", "--stalled-interval",
                                           "0.3", "--record-url", redis_url], cwd=ROOT, env=env,
                                          stdout=subprocess.DEVNULL, stderr=err))
    q = Queue("q", redis=full.url)
    r = redis.Redis.from_url(full.url, decode_responses=True)
    try:
        # When a producer adds jobs of ~1 KB (one in ten runs 1 s, longer than the lock) until Redis refuses one,
        # then goes on adding for 3 s more (5 locks: the workers renew and complete at the limit). How many adds
        # fit depends on how fast the workers complete meanwhile (a busy machine: fewer), so it adds until the
        # first refusal, however many adds that takes (bounded: 5,000 completed jobs of 1 KB hold more than 5 MB).
        acked, refused, errors = [], [], set()
        first_refusal = None
        while first_refusal is None or time.monotonic() - first_refusal < 3.0:
            assert len(acked) < 5_000, f"no add refused after {len(acked)} jobs of 1 KB in a Redis of 5 MB"
            jid = f"p{len(acked) + len(refused)}"
            try:
                q.add("t", {"pad": "x" * 900, "sleep": 1.0 if len(acked) % 10 == 0 else 0.01}, job_id=jid)
                acked.append(jid)
            except EngineError as e:
                refused.append(jid)
                errors.add(str(e).split(":")[0])
                first_refusal = first_refusal or time.monotonic()
                time.sleep(0.01)
            time.sleep(0.002)
        used = r.info("memory")["used_memory"]
        wait_until(lambda: all_done(full.url, len(acked)), timeout=60, interval=0.1)
        recs = {x.id: x for x in q.job_records()}
        runs = Counter(s.split(":")[0] for s in rec.lrange("test:started", 0, -1))
        text = "".join(log.read_text() for log in logs)
        print(f"\nnoeviction at 5 MB: {len(acked)} adds acknowledged, {len(refused)} refused ({errors}); "
              f"used {used / 2**20:.1f} MB; completed {sum(x.state == 'completed' for x in recs.values())}, "
              f"dead {sum(x.state == 'dead' for x in recs.values())}, stalled "
              f"{sum(1 for x in recs.values() if x.stalled)}, run twice {sum(1 for n in runs.values() if n > 1)}")
        # Then adds past the limit are refused with the reason, writing nothing; every acknowledged job
        # completes once (the workers' renewals and completions go on at the limit), none stalls or dies
        assert refused and errors == {"Redis refused the write (add on queue 'q')"}
        assert not any(j in recs for j in refused)
        assert all(recs[j].state == "completed" for j in acked)
        assert all(x.stalled == 0 for x in recs.values()) and set(runs.values()) == {1}
        assert [p.poll() for p in procs] == [None, None]
        assert "could not renew" not in text and "refused" not in text
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        q.close()
        r.close()
        rec.close()
        full.stop()


def test_a_refused_completion_is_sent_again_and_the_rest_of_its_batch_is_used(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    import qsim.engine.pipeline as pipeline_mod
    from qsim.engine import AsyncQueue, Job, Worker

    real = pipeline_mod.run_calls_async
    refusals = [3]

    async def refuse_completions(client: Any, scripts: Any, calls: Any, **kw: Any) -> list[Any]:
        # Redis refuses the batch's completions (as at its maxmemory): they are not run, an OOM error comes back
        if refusals[0] <= 0 or not any(c.script == "complete" for c in calls):
            return list(await real(client, scripts, calls, **kw))
        refusals[0] -= 1
        sent = [c for c in calls if c.script != "complete"]
        replies = iter(await real(client, scripts, sent, **kw) if sent else [])
        return [redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'")
                if c.script == "complete" else next(replies) for c in calls]

    async def main() -> None:
        q = AsyncQueue("q", redis=redis_url)
        ran: list[str] = []

        async def handler(job: Job) -> None:
            ran.append(job.id)

        monkeypatch.setattr(pipeline_mod, "run_calls_async", refuse_completions)
        # Given a worker whose first three batches with completions are refused for memory
        w = Worker("q", handler, redis=redis_url, concurrency=4, handle_signals=False)
        task = asyncio.ensure_future(w.run())
        await q.add_bulk([("t", {}) for _ in range(20)])
        for _ in range(500):
            if (await q.counts())["completed"] == 20:
                break
            await asyncio.sleep(0.01)
        await w.close()
        await task
        recs = await q.job_records()
        await q.close()
        # Then the refused completions were sent again: every job completed, each handler ran once
        assert refusals == [0] and sorted(ran) == sorted(r.id for r in recs) and len(ran) == 20
        assert all(r.state == "completed" and len(r.attempts) == 1 for r in recs)

    with caplog.at_level("WARNING", logger="qsim.engine.pipeline"):
        asyncio.run(main())
    assert "sending them again" in caplog.text


def test_a_worker_told_to_stop_while_redis_is_frozen_still_exits(own_redis: RedisServer, tmp_path: Path) -> None:
    url = own_redis.url
    procs: list[subprocess.Popen[bytes]] = []
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        # Given a worker running 0.3 s jobs (grace 10 s), busy with the first of 60 jobs
        procs = start_workers(url, 1, tmp_path, work=0.3, concurrency=10, lock=1.0, stalled=0.5)
        prod = Producer(url, 60, 1000, prefill=60)  # (all added up front: the thread is not started)
        wait_until(lambda: r.zcard("qsim:{q}:active") >= 5, timeout=30)
        # When Redis freezes (SIGSTOP) and the worker gets SIGTERM: its results cannot be sent
        assert own_redis.proc is not None
        os.kill(own_redis.proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        procs[0].send_signal(signal.SIGTERM)
        # Then it exits anyway, within its grace and the final flush's bound (10 s each), saying it cut off
        try:
            code = procs[0].wait(35)
        except subprocess.TimeoutExpired:
            os.kill(own_redis.proc.pid, signal.SIGCONT)
            procs[0].send_signal(signal.SIGUSR1)  # its tasks' stacks, into its log
            time.sleep(1.0)
            pytest.fail("the worker did not exit with Redis frozen:\n"
                        + (tmp_path / "worker0.log").read_text(errors="replace")[-6000:])
        took = time.monotonic() - t0
        assert code == 3, (tmp_path / "worker0.log").read_text(errors="replace")[-3000:]
        # and once Redis is back, a new worker finishes every job: the unsent results were not lost
        os.kill(own_redis.proc.pid, signal.SIGCONT)
        (tmp_path / "w2").mkdir()
        procs += start_workers(url, 1, tmp_path / "w2", work=0.3, concurrency=10, lock=1.0, stalled=0.5)
        wait_until(lambda: all_done(url, 60), timeout=60, interval=0.1)
        o = outcome(url, prod.acked)
        print(f"\nworker SIGTERM'd with Redis frozen: exited after {took:.1f} s (code {code}); "
              f"afterwards completed {o['completed']}, lost {o['lost']}, run twice {len(o['duplicates'])}")
        assert o["completed"] == 60 and o["lost"] == 0 and o["dead"] == 0
    finally:
        r.close()
        if own_redis.proc is not None:
            os.kill(own_redis.proc.pid, signal.SIGCONT)
        stop_workers(procs)
