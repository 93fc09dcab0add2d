"""Kill-storm benchmark: SIGKILL workers while they run jobs, then count every execution.

N jobs go into a queue; each handler execution records itself in Redis
(``HINCRBY <queue>:runs <job> 1`` and an ``<job> <worker> <start> <end>`` entry
in a list, in one round trip, after the job's work), so duplicates are
counted exactly, and two executions of one job that overlap in time (double
starts: a job run twice at once) too.
Three worker processes drain the queue while a controller SIGKILLs a random
one every K seconds and starts a replacement at once. Only a worker that has
run a job is killed (each worker adds its id to ``<queue>:ran`` with its
executions), and never the only one: on a busy machine a replacement may take
longer than K seconds to start, and killing workers before they ran anything,
or the last one running, starved the storm of workers (no stalled check ran,
recovery waited, and the run timed out). At each kill the
controller reads Redis's clock and notes the jobs the killed worker held
(active, locked by it). At the end it prints:

* completed exactly once, completed more than once (every such job must have
  been held by a killed worker), double starts (executions of one job that
  overlap: must be 0), lost (enqueued, but neither completed, dead nor
  waiting/active: must be 0), dead (must be 0: handlers never fail);
* the recovery delay of every job a killed worker held: kill -> back in the
  waiting set (the stalled check found its expired lock), which must sit
  within lock_duration + stalled_interval; and requeue -> next start;
* throughput with kills against a run of the same jobs without kills, in the
  same run (same machine, same Redis).

Usage::

    python benchmarks/chaos.py [--jobs 100000] [--kill-every 2] [--json]
    python benchmarks/chaos.py --jobs 20000 --baseline-jobs 20000

Starts a throwaway redis-server on a free port unless ``--redis URL`` is
given (a non-local URL needs ``--i-know-this-is-not-local``). The test suite
runs a short form (tests/reliability/test_chaos.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
import redis.asyncio  # noqa: E402

from qsim.engine import Job, Queue, Worker  # noqa: E402
from qsim.engine.eventloop import run_process  # noqa: E402

__all__ = ["ChaosConfig", "run_chaos", "format_report", "main"]


@dataclass(frozen=True)
class ChaosConfig:
    """Settings of one chaos run (times in seconds)."""

    jobs: int = 100_000
    baseline_jobs: int = 20_000
    workers: int = 3
    concurrency: int = 20
    work: float = 0.01
    kill_every: float = 2.0
    lock_duration: float = 2.0
    stalled_interval: float = 1.0
    max_stalled: int = 50
    seed: int = 1
    timeout: float = 600.0
    queue: str = "chaos"


# -- the worker process ---------------------------------------------------------------
def worker_main(url: str, queue: str, wid: str, concurrency: int, work: float, lock: float, stalled: float,
                max_stalled: int) -> int:
    """Run one chaos worker until SIGTERM (or SIGKILL)."""

    async def run() -> int:
        r = redis.asyncio.Redis.from_url(url)
        runs, execs, ran = f"{queue}:runs", f"{queue}:execs", f"{queue}:ran"

        async def handler(job: Job) -> None:
            t0 = time.time()
            if work > 0:
                await asyncio.sleep(work)
            async with r.pipeline(transaction=False) as p:
                p.hincrby(runs, job.id, 1)
                p.rpush(execs, f"{job.id} {wid} {t0:.6f} {time.time():.6f}")
                p.sadd(ran, wid)
                await p.execute()

        w = Worker(queue, handler, redis=url, concurrency=concurrency, lock_duration=lock,
                   stalled_interval=stalled, max_stalled=max_stalled, keep_completed=None, shutdown_grace=10.0,
                   worker_id=wid)
        try:
            return await w.run()
        finally:
            await r.aclose()

    return run_process(run(), use_uvloop=False)  # asyncio's loop; SIGUSR1 logs what each task awaits


def _spawn(url: str, cfg: ChaosConfig, queue: str, wid: str, logdir: Path) -> subprocess.Popen[bytes]:
    args = [sys.executable, __file__, "--worker-proc", url, queue, wid, str(cfg.concurrency), str(cfg.work),
            str(cfg.lock_duration), str(cfg.stalled_interval), str(cfg.max_stalled)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(logdir / f"{wid}.log", "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)


def _stop(procs: dict[str, subprocess.Popen[bytes]], logdir: Path, log: Any) -> None:
    """SIGTERM every live worker; one that has not exited 20 s later is asked what its tasks await (SIGUSR1),
    reported with the end of its log, and killed."""
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for wid, p in procs.items():
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGUSR1)  # it logs what each of its tasks awaits (qsim.engine.eventloop)
            time.sleep(1.0)
            p.kill()
            p.wait()
            tail = (logdir / f"{wid}.log").read_text(errors="replace")[-8000:]
            log(f"  worker {wid} did not stop within 20 s of SIGTERM; the end of its log:\n{tail}")


# -- the controller ---------------------------------------------------------------------
@dataclass
class Kill:
    """One SIGKILL: Redis time, the worker, and the jobs it held (id -> lock expiry, s)."""

    at: float
    worker: str
    held: dict[str, float] = field(default_factory=dict)


def _redis_now(r: redis.Redis) -> float:
    s, us = r.time()
    return float(s) + float(us) / 1e6


def _held_by(r: redis.Redis, q: Queue, wid: str) -> dict[str, float]:
    locks = r.zrange(q.keys.active, 0, -1, withscores=True)
    if not locks:
        return {}
    p = r.pipeline(transaction=False)
    for jid, _ in locks:
        p.hmget(q.keys.job(jid), "worker", "state")
    return {jid: expiry / 1000 for (jid, expiry), (w, s) in zip(locks, p.execute()) if w == wid and s == "active"}


def _phase(url: str, cfg: ChaosConfig, queue: str, n: int, kill: bool, log: Any) -> dict[str, Any]:
    """Fill ``queue`` with ``n`` jobs, drain it with ``cfg.workers`` processes (killing some if ``kill``)."""
    r = redis.Redis.from_url(url, decode_responses=True)
    q = Queue(queue, redis=url)
    rng = random.Random(cfg.seed)
    logs = tempfile.TemporaryDirectory(prefix="qsim-chaos-")  # the workers' stderr, read when one does not stop
    logdir = Path(logs.name)
    try:
        ids = [f"j{i}" for i in range(n)]
        for i in range(0, n, 5000):
            q.add_bulk([("chaos", {"i": int(j[1:])}, {"job_id": j}) for j in ids[i:i + 5000]])
        seq = 0
        procs: dict[str, subprocess.Popen[bytes]] = {}

        def start() -> None:
            nonlocal seq
            seq += 1
            wid = f"{queue}-w{seq}"
            procs[wid] = _spawn(url, cfg, queue, wid, logdir)

        for _ in range(cfg.workers):
            start()
        kills: list[Kill] = []
        t0 = time.monotonic()
        next_kill = t0 + cfg.kill_every
        try:
            while True:
                c = q.counts()
                if c["completed"] + c["dead"] >= n:
                    break
                now = time.monotonic()
                if now - t0 > cfg.timeout:
                    log(f"  timeout after {cfg.timeout:g} s with {c}")
                    break
                for wid, p in list(procs.items()):
                    if p.poll() is not None:  # died by itself: that is a finding too
                        log(f"  worker {wid} exited on its own with code {p.returncode}; replacing it")
                        del procs[wid]
                        start()
                ran = r.smembers(f"{queue}:ran") if kill and now >= next_kill else set()
                victims = sorted(w for w in procs if w in ran)  # (a worker still starting is spared)
                if len(victims) > 1:  # (and the last one running: recovery needs one)
                    wid = rng.choice(victims)
                    at = _redis_now(r)
                    procs[wid].send_signal(signal.SIGKILL)
                    procs.pop(wid).wait()
                    start()  # the replacement starts at once
                    kills.append(Kill(at, wid, _held_by(r, q, wid)))
                    next_kill = now + cfg.kill_every
                time.sleep(0.02)
        finally:
            _stop(procs, logdir, log)
        return _analyse(r, q, ids, kills, cfg)
    finally:
        q.close()
        r.close()
        logs.cleanup()


def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))]


def _dist(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "min": min(xs, default=float("nan")), "p50": _pct(xs, 50), "p95": _pct(xs, 95),
            "max": max(xs, default=float("nan")), "mean": statistics.fmean(xs) if xs else float("nan")}


def _double_starts(execs: list[str]) -> int:
    """Jobs with two executions that overlap in time (one started before the other ended)."""
    by: dict[str, list[tuple[float, float]]] = {}
    for e in execs:
        parts = e.split()
        if len(parts) == 4:
            by.setdefault(parts[0], []).append((float(parts[2]), float(parts[3])))
    n = 0
    for spans in by.values():
        spans.sort()
        if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
            n += 1
    return n


def _analyse(r: redis.Redis, q: Queue, ids: list[str], kills: list[Kill], cfg: ChaosConfig) -> dict[str, Any]:
    recs = {rec.id: rec for rec in q.job_records()}
    runs = {k: int(v) for k, v in r.hgetall(f"{q.name}:runs").items()}
    double_starts = _double_starts(r.lrange(f"{q.name}:execs", 0, -1))
    killed = {k.worker for k in kills}
    held_at_kill = {jid for k in kills for jid in k.held}
    states: dict[str, int] = {}
    for jid in ids:
        st = recs[jid].state if jid in recs else "missing"
        states[st] = states.get(st, 0) + 1
    completed = [jid for jid in ids if jid in recs and recs[jid].state == "completed"]
    once = sum(1 for jid in completed if runs.get(jid, 0) == 1)
    multi = [jid for jid in completed if runs.get(jid, 0) > 1]
    never_ran = sum(1 for jid in completed if runs.get(jid, 0) == 0)
    dead = states.get("dead", 0)
    unfinished = sum(v for k, v in states.items() if k in ("waiting", "active", "delayed"))
    lost = len(ids) - len(completed) - dead - unfinished
    # a duplicate must have been held by a killed worker and stalled there
    unexplained = [jid for jid in multi
                   if jid not in held_at_kill
                   or not any(a.outcome == "stalled" and a.worker in killed for a in recs[jid].attempts)]
    recovery, detect, restart = [], [], []
    for k in kills:
        for jid, expiry in k.held.items():
            atts = recs[jid].attempts if jid in recs else []
            for i, a in enumerate(atts):
                if a.outcome == "stalled" and a.worker == k.worker:
                    recovery.append(a.end - k.at)
                    detect.append(a.end - expiry)
                    if i + 1 < len(atts):
                        restart.append(atts[i + 1].start - a.end)
    bound = cfg.lock_duration + cfg.stalled_interval
    starts = [rec.started_at for rec in recs.values() if rec.started_at]
    ends = [rec.finished_at for rec in recs.values() if rec.finished_at]
    span = (max(ends) - min(starts)) if starts and ends else float("nan")
    stalled_jobs = sum(1 for rec in recs.values() if rec.stalled)
    return {
        "jobs": len(ids), "kills": len(kills), "held_at_kills": len(held_at_kill),
        "completed": len(completed), "completed_once": once, "completed_more_than_once": len(multi),
        "extra_executions": sum(runs.get(j, 0) - 1 for j in multi), "double_starts": double_starts,
        "duplicates_not_held_at_a_kill": len(unexplained), "completed_without_execution": never_ran,
        "lost": lost, "dead": dead, "unfinished": unfinished, "stalled_jobs": stalled_jobs,
        "recovery_delay": _dist(recovery), "recovery_bound": bound,
        "recovery_over_bound": sum(1 for d in recovery if d > bound),
        "lock_expiry_to_requeue": _dist(detect),
        "requeue_to_restart": _dist(restart),
        "span": span, "throughput": len(completed) / span if span and span > 0 else float("nan"),
    }


def run_chaos(url: str, cfg: ChaosConfig, log: Any = print) -> dict[str, Any]:
    """A run without kills (``cfg.baseline_jobs``), then the kill storm (``cfg.jobs``); returns the figures."""
    tag = f"{cfg.queue}{os.getpid()}x{int(time.time())}"
    base: dict[str, Any] | None = None
    if cfg.baseline_jobs > 0:
        log(f"baseline: {cfg.baseline_jobs} jobs, {cfg.workers} workers, no kills ...")
        base = _phase(url, cfg, f"{tag}-base", cfg.baseline_jobs, False, log)
    log(f"chaos: {cfg.jobs} jobs, {cfg.workers} workers, SIGKILL one every {cfg.kill_every:g} s ...")
    chaos = _phase(url, cfg, f"{tag}-kill", cfg.jobs, True, log)
    ratio = chaos["throughput"] / base["throughput"] if base else float("nan")
    return {"config": asdict(cfg), "baseline": base, "chaos": chaos, "throughput_ratio": ratio}


def format_report(rep: dict[str, Any]) -> str:
    c, b, cfg = rep["chaos"], rep["baseline"], rep["config"]
    rd, rs, rx = c["recovery_delay"], c["requeue_to_restart"], c["lock_expiry_to_requeue"]
    lines = [
        f"chaos run: {c['jobs']} jobs, {cfg['workers']} workers x concurrency {cfg['concurrency']}, "
        f"{cfg['work'] * 1000:g} ms per job, SIGKILL every {cfg['kill_every']:g} s "
        f"(lock {cfg['lock_duration']:g} s, stalled check {cfg['stalled_interval']:g} s)",
        f"  kills                      {c['kills']} (jobs held by the killed workers: {c['held_at_kills']})",
        f"  completed exactly once     {c['completed_once']}",
        f"  completed more than once   {c['completed_more_than_once']} ({c['extra_executions']} extra executions; "
        f"not held at a kill: {c['duplicates_not_held_at_a_kill']})",
        f"  double starts (run twice at once) {c['double_starts']}",
        f"  lost                       {c['lost']}",
        f"  dead                       {c['dead']}",
        f"  unfinished                 {c['unfinished']}",
        f"  recovery delay (kill -> requeued), s: n={rd['n']} min={rd['min']:.3f} p50={rd['p50']:.3f} "
        f"p95={rd['p95']:.3f} max={rd['max']:.3f}; bound lock+stalled = {c['recovery_bound']:g} s, "
        f"over it: {c['recovery_over_bound']}",
        f"  of which lock expiry -> requeued, s: p50={rx['p50']:.3f} p95={rx['p95']:.3f} max={rx['max']:.3f} "
        f"(bound: stalled check {cfg['stalled_interval']:g} s)",
        f"  requeued -> restarted, s:  n={rs['n']} p50={rs['p50']:.3f} p95={rs['p95']:.3f} max={rs['max']:.3f}",
        f"  throughput with kills      {c['throughput']:.0f} jobs/s",
    ]
    if b:
        lines += [f"  throughput without kills   {b['throughput']:.0f} jobs/s ({b['jobs']} jobs; lost {b['lost']}, "
                  f"duplicates {b['completed_more_than_once']})",
                  f"  ratio with/without kills   {rep['throughput_ratio']:.2f}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    d = ChaosConfig()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=d.jobs)
    p.add_argument("--baseline-jobs", type=int, default=d.baseline_jobs, help="jobs of the run without kills")
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--concurrency", type=int, default=d.concurrency)
    p.add_argument("--work", type=float, default=d.work, help="seconds each job awaits")
    p.add_argument("--kill-every", type=float, default=d.kill_every)
    p.add_argument("--lock-duration", type=float, default=d.lock_duration)
    p.add_argument("--stalled-interval", type=float, default=d.stalled_interval)
    p.add_argument("--max-stalled", type=int, default=d.max_stalled)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--timeout", type=float, default=d.timeout)
    p.add_argument("--redis", metavar="URL", help="use this Redis (default: a throwaway redis-server)")
    p.add_argument("--i-know-this-is-not-local", action="store_true", dest="confirmed")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    p.add_argument("--snippet", action="store_true",
                   help="also write the report for the docs, as Markdown in docs/snippets/benchmarks/ (chaos-JOBS)")
    a = p.parse_args(argv)
    started = time.time()
    cfg = ChaosConfig(jobs=a.jobs, baseline_jobs=a.baseline_jobs, workers=a.workers, concurrency=a.concurrency,
                      work=a.work, kill_every=a.kill_every, lock_duration=a.lock_duration,
                      stalled_interval=a.stalled_interval, max_stalled=a.max_stalled, seed=a.seed,
                      timeout=a.timeout)
    log = (lambda s: print(s, file=sys.stderr)) if a.json else print
    if a.redis:
        from qsim.engine.safety import require_local_or_confirmed

        require_local_or_confirmed(a.redis, a.confirmed)
        rep = run_chaos(a.redis, cfg, log)
    else:
        from qsim.harness.server import RedisServer

        with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
            rep = run_chaos(server.url, cfg, log)
    print(json.dumps(rep, indent=2) if a.json else format_report(rep))
    if a.snippet:
        from benchmarks.snippet import write_snippet

        path = write_snippet(f"chaos-{a.jobs}", f"```text\n{format_report(rep)}\n```", started=started)
        print(f"wrote {path}", file=sys.stderr)
    c = rep["chaos"]
    ok = (c["lost"] == 0 and c["dead"] == 0 and c["duplicates_not_held_at_a_kill"] == 0 and c["unfinished"] == 0
          and c["double_starts"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-proc":
        a = sys.argv[2:]
        sys.exit(worker_main(a[0], a[1], a[2], int(a[3]), float(a[4]), float(a[5]), float(a[6]), int(a[7])))
    sys.exit(main())
