"""SIGTERM to every worker while 60 jobs run: grace longer than the jobs, then shorter."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import redis

from qsim.engine import EXIT_CUT_OFF, EXIT_DRAINED, Queue
from reliability_helpers import ROOT, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.chaos]

WORKER = str(ROOT / "tests" / "engine" / "worker_proc.py")  # sleeps job.data["sleep"] s, records starts


def spawn_workers(url: str, n: int, grace: float, concurrency: int = 20) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, WORKER, url, "q", "--concurrency", str(concurrency),
                              "--grace", str(grace), "--lock-duration", "2", "--stalled-interval", "1"],
                             cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]


def figures(q: Queue, total: int) -> dict[str, Any]:
    """interrupted: cut off while running (a "released" attempt); handed_back: every job released to the
    queue (events), including those fetched at the signal and handed back unstarted (no attempt logged)."""
    recs = q.job_records()
    released = [r for r in recs if any(a.outcome == "released" for a in r.attempts)]
    back = {e["job"] for e in q.events(count=10_000) if e["event"] == "released"}
    states = [r.state for r in recs]
    return {
        "interrupted": len(released),
        "handed_back": sum(1 for r in recs if r.id in back and r.state == "waiting" and r.attempts_made == 0),
        "started": len({s.split(":")[0] for s in q.client.lrange("test:started", 0, -1)}),
        "completed": states.count("completed"),
        "waiting": states.count("waiting"),
        "active": states.count("active"),
        "lost": total - sum(1 for s in states if s in ("completed", "dead", "waiting", "active", "delayed")),
    }


def kill_leftovers(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def sigterm_all(procs: list[subprocess.Popen[bytes]]) -> tuple[list[int], float]:
    t0 = time.monotonic()
    for p in procs:
        p.send_signal(signal.SIGTERM)
    codes = [p.wait(30) for p in procs]
    return codes, time.monotonic() - t0


@pytest.fixture
def q(redis_url: str) -> Any:
    queue = Queue("q", redis=redis_url)
    yield queue
    queue.close()


def test_sigterm_under_load_grace_longer_than_jobs_drains_everything(
    redis_url: str, redis_client: redis.Redis, q: Queue
) -> None:
    # Given 3 workers x 20 slots busy with 1 s jobs and 40 more waiting
    q.add_bulk([("t", {"sleep": 1.0}) for _ in range(100)])
    procs = spawn_workers(redis_url, 3, grace=10.0)
    try:
        wait_until(lambda: q.counts()["active"] >= 55, timeout=30)
        active = q.counts()["active"]
        # When every worker gets SIGTERM
        codes, took = sigterm_all(procs)
    finally:
        kill_leftovers(procs)
    f = figures(q, 100)
    print(f"\nSIGTERM, grace 10 s > 1 s jobs: {active} active at the signal; exit codes {codes} in {took:.1f} s; "
          f"interrupted {f['interrupted']}, handed back {f['handed_back']}, completed {f['completed']}, "
          f"still waiting {f['waiting']}, lost {f['lost']}")
    # Then every started job finishes, none is cut off, nothing new starts, nothing is lost. "active" at the
    # signal also counts jobs whose fetch reply was still on its way: those are handed back unstarted.
    # The workers stop when their jobs end, not when their grace does (about 1 s here; up to 6 s on a busy machine)
    assert codes == [EXIT_DRAINED] * 3 and took < 10.0
    assert f["interrupted"] == 0 and f["active"] == 0 and f["lost"] == 0
    assert f["completed"] + f["handed_back"] >= active and f["completed"] + f["waiting"] == 100
    assert f["completed"] >= 40  # most of the 56+ active jobs had started; a hand-back is the exception
    assert redis_client.llen("test:started") == f["completed"]


def test_sigterm_under_load_grace_shorter_than_jobs_hands_them_back(
    redis_url: str, redis_client: redis.Redis, q: Queue
) -> None:
    # Given 3 workers x 20 slots busy with 3 s jobs
    q.add_bulk([("t", {"sleep": 3.0}, {"job_id": f"j{i}"}) for i in range(80)])
    procs = spawn_workers(redis_url, 3, grace=0.5)
    try:
        wait_until(lambda: q.counts()["active"] >= 55, timeout=30)
        active = q.counts()["active"]
        # When every worker gets SIGTERM with a 0.5 s grace
        codes, took = sigterm_all(procs)
    finally:
        kill_leftovers(procs)
    f = figures(q, 80)
    print(f"\nSIGTERM, grace 0.5 s < 3 s jobs: {active} active at the signal; exit codes {codes} in {took:.1f} s; "
          f"interrupted {f['interrupted']}, handed back {f['handed_back']}, completed {f['completed']}, "
          f"lost {f['lost']}")
    # Then the workers stop soon with exit code 3, and every job they held is back in the queue (attempt not
    # counted): each started one cut off, those whose fetch was in flight at the signal unstarted
    # (a worker none of whose jobs had started at the signal, as on a busy machine, hands them all back unstarted
    # and exits 0: it cut nothing off)
    assert set(codes) <= {EXIT_CUT_OFF, 0} and EXIT_CUT_OFF in codes and took < 5
    assert 0 < f["interrupted"] <= 20 * codes.count(EXIT_CUT_OFF)
    assert f["interrupted"] == f["started"] and f["handed_back"] >= active >= 55
    assert f["completed"] == 0 and f["active"] == 0 and f["waiting"] == 80 and f["lost"] == 0
    # And a new worker runs the handed-back jobs to completion
    redis_client.delete("test:started")
    procs = spawn_workers(redis_url, 1, grace=10.0, concurrency=80)
    try:
        wait_until(lambda: q.counts()["completed"] == 80, timeout=30, interval=0.05)
    finally:
        sigterm_all(procs)
    recs = q.job_records()
    assert all(r.attempts_made == 1 and [a.outcome for a in r.attempts][-1] == "completed" for r in recs)
