"""Worker CPU per job: what one worker process spends on each no-op job, with and without Redis.

Two figures, each the median of several runs of one worker process draining N
no-op jobs (concurrency 10 by default):

* **with Redis**: a throwaway redis-server, the jobs added first; the worker's
  own CPU time (user + sys, from just before ``run()`` to its end) per job.
  This is the cost the engine_throughput drain pays, redis-py's encoding and
  parsing of the batches included;
* **without Redis**: the worker's pipeline talks to a stand-in that answers
  every batch at once (fetch replies built in Python, every completion
  accepted), so only the worker's own Python remains: the part a change to
  the pipeline, the executor or ``Job`` moves. Much less noisy than the first.

``--against DIR`` runs the same measurements, interleaved, on another
checkout (e.g. ``git worktree add /tmp/base main``) and prints the ratio:
how a change moves the per-job cost, on a shared, noisy machine.

Where the time goes per no-op job (2-core shared VM, Python 3.11, redis-py 8.1,
concurrency 10, ~5 jobs per round trip):

* **without Redis, ~19-22 us/job**: shares from cProfile with a CPU timer
  over 40,000 jobs on the stand-in: starting a task per job
  (``ensure_future``) ~21%; the event loop's own scheduling (``_run_once``,
  callbacks, futures) ~35%; decoding (the fetch reply's JSON and building the
  ``Job``) ~12%; building the batches (the complete and fetch calls, the
  outbox) ~12%; the pipeline loop and handing replies out ~11%; the
  handler's own run and its result to the outbox ~7%; events ~1% (no
  callback registered); metrics nothing unless ``WorkerMetrics`` is attached
  (plain counts, ~2 us/job).
* **with Redis, ~55-60 us/job** without hiredis: the rest is the round trip's
  client side, ~170 us of CPU per round trip (its packing ~14 us; reading and
  parsing the replies through redis-py's connection and asyncio's streams
  most of the rest; a bare PING round trip on asyncio streams costs ~13 us).
  A lean channel of its own for the batches (EVALSHA packed by hand, replies
  read with the connection's parser) was tried: in one process, alternating,
  58 vs 71 us/job and ~150 vs ~225 us of CPU per 2-call round trip; but in
  separate worker processes against the previous tree no difference beyond
  this machine's noise (56.4 vs 57.8, 57.8 vs 56.4, 67.8 vs 59.5, 74.9 vs
  75.2, 59.3 vs 63.1 us/job in five sessions), so redis-py's pipeline stays
  (STYLE: its script objects handle EVALSHA). hiredis and uvloop are
  measured by ``engine_throughput.py``.

Since then (prefetch="auto" and batch_size 16, more jobs per round trip):
batches of 16 instead of 8 measured 43.6 against 50.7 us/job with Redis
(``--against`` a tree with 8, 5 interleaved runs), without Redis 16.5 against
17.1; fetching ahead itself hardly moves the CPU per job (43.2 against 44.4
us/job): its gain in jobs/s comes from the worker no longer idling while its
batches are on their way.

``--no-hiredis`` runs the worker processes as if hiredis were not installed
(the default install: redis-py parses replies in Python); by default they
use whatever is installed.

Usage: ``python benchmarks/worker_cpu.py [--jobs 20000] [--runs 5] [--against DIR] [--no-hiredis]``
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Runs in the worker process (PYTHONPATH = the checkout measured). Prints CPU seconds.
_WITH_REDIS = r'''
import asyncio, resource, sys
from qsim.engine import Worker

async def noop(job):
    return None

w = Worker("bench", noop, redis=sys.argv[1], concurrency=int(sys.argv[2]), keep_completed=None)
r0 = resource.getrusage(resource.RUSAGE_SELF)
asyncio.run(w.run())
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
'''

_WITHOUT_REDIS = r'''
import asyncio, importlib, json, sys, time
import qsim.engine.maintenance as maintenance
import qsim.engine.worker as worker_mod
from qsim.engine import Worker

N, CONCURRENCY = int(sys.argv[1]), int(sys.argv[2])
try:  # where the worker sends its batches (qsim.engine.worker before the pipeline had its own module)
    sender = importlib.import_module("qsim.engine.pipeline")
except ImportError:
    sender = worker_mod
state = {"next": 0, "acked": 0}

class Script:
    sha = "0" * 40

class StandIn:
    def register_script(self, src):
        return Script()
    async def ping(self):
        return True
    async def info(self, section=None):
        return {"maxmemory_policy": "noeviction"}
    async def blpop(self, keys, timeout=0):
        await asyncio.sleep(timeout)
    async def aclose(self):
        pass

async def batch(client, scripts, calls, **kw):
    out = []
    for c in calls:
        if c.script == "complete":  # per job: id, token, result[, µs held] (the hold is sent since prefetch="auto")
            if isinstance(c.args[4], int):  # start notices first (count, then id/token pairs) since issue 25
                n = (len(c.args) - 5 - 2 * c.args[4]) // 4
            else:
                n = (len(c.args) - 4) // (4 if len(c.args) > 7 and isinstance(c.args[7], int) else 3)
            state["acked"] += n
            out.append([1] * n)
        elif c.script == "fetch":
            jobs = []
            for i in range(int(c.args[0])):
                if state["next"] >= N:
                    break
                state["next"] += 1
                jobs.append([str(state["next"]), f"{c.args[3]}:{i}", "noop", "null", "0", "1", "", "0", "1", "0.001"])
            out.append(json.dumps([[-1, 0], *jobs]))  # no rate wait, no limits (older trees read the 0 as no queue)
        elif c.script == "promote":
            out.append(-1)
        else:
            out.append(0)
    await asyncio.sleep(0)  # a round trip yields to the loop once
    return out

async def side(client, scripts, calls):
    return [[[], []] if c.script == "recover_stalled" else [] for c in calls]

worker_mod.connect_async = lambda *a, **k: StandIn()
sender.run_calls_async = batch
maintenance.run_calls_async = side

async def noop(job):
    return None

async def main():
    w = Worker("bench", noop, redis="redis://stand-in", concurrency=CONCURRENCY, handle_signals=False)
    task = asyncio.ensure_future(w.run())
    t0 = time.process_time()
    while state["acked"] < N:
        await asyncio.sleep(0.005)
    cpu = time.process_time() - t0
    await w.close()
    await task
    return cpu

print(asyncio.run(main()))
'''


#: Prepended to the worker snippets by ``--no-hiredis``: redis-py then finds no hiredis to import.
_NO_HIREDIS = "import sys; sys.modules['hiredis'] = None\n"


def with_redis(root: Path, url: str, n: int, concurrency: int, prelude: str = "") -> float:
    """Microseconds of worker CPU per job, draining ``n`` jobs from a real Redis."""
    from qsim.engine import Queue

    q = Queue("bench", redis=url)
    q.client.flushall()
    q.set_retention(keep_count=None)
    q.add_bulk([("noop", None) for _ in range(n)])
    p = subprocess.Popen([sys.executable, "-c", prelude + _WITH_REDIS, url, str(concurrency)],
                         env=dict(os.environ, PYTHONPATH=str(root)), stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while q.counts()["completed"] < n:
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not drain the queue")
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=60)
        q.close()
    return float(out.decode().split()[-1]) / n * 1e6


def without_redis(root: Path, n: int, concurrency: int, prelude: str = "") -> float:
    """Microseconds of worker CPU per job with a stand-in for Redis (the worker's own Python only)."""
    out = subprocess.run([sys.executable, "-c", prelude + _WITHOUT_REDIS, str(n), str(concurrency)], check=True,
                         env=dict(os.environ, PYTHONPATH=str(root)), stdout=subprocess.PIPE, timeout=300).stdout
    return float(out.decode().split()[-1]) / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--against", type=Path, help="another checkout to compare with (its root folder)")
    ap.add_argument("--no-hiredis", action="store_true", help="worker processes as if hiredis were not installed")
    a = ap.parse_args()
    if a.against is not None and not (a.against / "qsim" / "engine").is_dir():
        ap.error(f"--against must be a qsim checkout (a folder with qsim/engine), got {str(a.against)!r}")
    trees = {"this": ROOT, **({"against": a.against.resolve()} if a.against else {})}
    from qsim.harness.server import RedisServer

    figures: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            print(f"{a.jobs} no-op jobs per run, 1 worker process, concurrency {a.concurrency}, median of {a.runs} "
                  f"runs (interleaved); hiredis {'off' if a.no_hiredis else 'as installed'}")
            for i in range(a.runs):
                order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
                for label, root in order:
                    prelude = _NO_HIREDIS if a.no_hiredis else ""
                    figures.setdefault((label, "with Redis"), []).append(
                        with_redis(root, server.url, a.jobs, a.concurrency, prelude))
                    figures.setdefault((label, "without Redis"), []).append(
                        without_redis(root, a.jobs * 2, a.concurrency, prelude))
        finally:
            server.stop()
    for what in ("with Redis", "without Redis"):
        line = f"worker CPU per job, {what + ':':<15}"
        for label in trees:
            xs = figures[(label, what)]
            line += f"  {label} {statistics.median(xs):6.1f} us (min {min(xs):.1f})"
        if a.against is not None:
            ratio = statistics.median(figures[("this", what)]) / statistics.median(figures[("against", what)])
            line += f"  this/against {ratio:.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
