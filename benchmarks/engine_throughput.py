"""Engine throughput benchmark: prints its figures; not part of the test run.

Starts a throwaway redis-server on a free port (never touches 6379), then in
the same run measures:

* enqueue rate: ``Queue.add`` one at a time, and ``add_bulk`` in batches;
* drain of N no-op jobs by one worker process (concurrency 10 and 50) and by
  two processes, median of several runs, with the ratio to a naive worker
  that makes one round trip per job per state change (fetch 1, ack 1);
* pickup latency on an idle queue (from the middle of the producer's add call,
  when the job reached Redis near enough, to the handler's start, both on this
  machine's clock; p50/p95/p99);
* I/O-bound jobs (each awaits 10 ms, concurrency 50) against the ideal rate,
  with the worker's default (``prefetch="auto"``: fetching ahead for short
  jobs) and with ``prefetch=0``, next to what bare asyncio tasks reach (no
  Redis);
* BullMQ on Node.js, when ``node`` is on PATH (the pinned bullmq 5.x, installed
  with npm into ``~/.cache/qsim/node`` by tests/bullmq_node.py on first use;
  driven by benchmarks/node/bench.js through benchmarks/peers/bullmq_node.py):
  the no-op drain (concurrency 10), the I/O-bound drain (5,000 x 10 ms,
  concurrency 50) and the pickup latency, side by side with qsim on the same
  redis-server, the systems taking turns (order reversed each run), median of
  the runs, with qsim/BullMQ ratios. BullMQ's jobs are added with ``addBulk``
  before its worker starts and timed by their own stamps (first
  ``processedOn`` to last ``finishedOn``), as qsim's by its Redis-clock stamps.
  qsim runs there with each accelerator of the ``fast`` extra on and off:
  the default install (no hiredis, asyncio's loop), +hiredis, +uvloop, both
  (hiredis is hidden from a worker process with ``QSIM_BENCH_NO_HIREDIS=1``,
  uvloop with ``QSIM_NO_UVLOOP=1``). ``--only-bullmq`` runs this table alone;
* when the peer queues are installed (``pip install .[bench]``: huey, dramatiq,
  BullMQ for Python, SAQ; see benchmarks/peers/) the same drain on each (one
  worker process, concurrency 10, its own normal worker) and qsim's ratio.

Where the I/O-bound gap goes (measured on a 2-core box, cProfile, timing the
worker's round trips and Redis INFO commandstats): a 10 ms ``asyncio.sleep``
itself takes ~10.4-10.6 ms in a busy loop, so bare asyncio tops out at ~92-94%
of 5,000/s. With ``prefetch=0`` a slot that frees is refilled only by a round
trip (ack + fetch in one pipeline, ~1 ms here, of which ~0.26 ms is the two
scripts in Redis), and it often waits for one of the ``max_inflight`` batches
already in flight first: ~1.5-2 round trips, ~2 ms per 12.5 ms cycle, so
80-84%. Bigger batches or more batches in flight do not help (the wait is
latency, not capacity; the worker uses ~1/3 of a core). Fetching ahead (the
default, ``prefetch="auto"``, see qsim/engine/pipeline.py) holds a few
locked jobs in the process so a freed slot starts one at once: 96-98% of the
asyncio limit. The no-op drain gains the same way: the worker no longer idles
while its batches are on their way (1.5-1.7x its ``prefetch=0`` rate). The
cost: a later, higher-priority job waits behind the few held (about a round
trip); a held job's recorded start is still its handler's start.

Drain rates use Redis-clock job timestamps: first attempt start to last
finish, so process start-up is not counted.

Measured on a shared 2-core VM (Python 3.11, redis-py 8.1, Redis 7, Node 20,
bullmq 5.81.5; quiet but for this run), 50,000 no-op jobs per drain, median of
5 runs, each ratio the median of the same-run ratios (``--only-bullmq --runs 5
--jobs 50000``):

    system                       no-op c10  ratio    I/O c50  ratio  of asyncio  pickup p50 / p95
    BullMQ (Node)                   17,908      -      3,981      -        84%   0.66 / 1.37 ms
    qsim, default install           26,538  1.55x      4,602  1.15x        97%   0.48 / 0.69 ms
    qsim, default, prefetch=0       12,893  0.76x      3,687  0.92x        77%   0.44 / 0.67 ms
    qsim +hiredis                   29,085  1.72x      4,615  1.15x        97%   0.43 / 0.63 ms
    qsim +uvloop                    28,917  1.63x      4,759  1.19x       100%   0.47 / 0.67 ms
    qsim +hiredis +uvloop (fast)    27,550  1.54x      4,794  1.19x       101%   0.45 / 0.59 ms

What each change bought (same command, earlier trees, same session): before
fetching ahead and with batches of 8, the default install was 0.94x / 1.03x /
0.70 vs 0.70 ms against BullMQ (the "prefetch=0" row is that worker but for
batch_size); fetching ahead (``prefetch="auto"``) lifted the no-op drain to
1.23-1.53x and the I/O drain to 1.14-1.15x (96-98% of asyncio); batches of 16
cut the worker's CPU per no-op job by ~14% (worker_cpu.py) and gave 1.48x;
the lone probe fetch after a wake-up took pickup p50 from 0.76 to 0.60 ms
(alternating A/B, 6 runs each) and below BullMQ's. Single runs vary a lot on
this machine (BullMQ's no-op drain 12k-19k jobs/s across the session, qsim's
default 14k-31k): read the ratios as medians of paired runs, not constants.

Usage: ``python benchmarks/engine_throughput.py [--jobs 20000] [--runs 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Set to 1 in a worker process's environment to run it as if hiredis were not installed
#: (redis-py then parses replies in Python). Must act before redis is first imported.
NO_HIREDIS_ENV = "QSIM_BENCH_NO_HIREDIS"
if os.environ.get(NO_HIREDIS_ENV) == "1":
    sys.modules["hiredis"] = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from qsim.engine import Job, Queue, Worker  # noqa: E402
from qsim.engine import protocol as P  # noqa: E402
from qsim.engine.eventloop import NO_UVLOOP_ENV, run_process  # noqa: E402
from qsim.engine.keys import QueueKeys  # noqa: E402
from qsim.engine.scripts import ScriptSet, run_calls_async  # noqa: E402


# -- worker processes -------------------------------------------------------------
async def _noop(job: Job) -> None:
    return None


async def _io10(job: Job) -> None:
    await asyncio.sleep(0.01)


async def _stamp(job: Job) -> float:
    return time.time()


HANDLERS = {"noop": _noop, "io10": _io10, "stamp": _stamp}


async def naive_worker(url: str, queue: str, concurrency: int) -> int:
    """One round trip per step: fetch one job, run it, acknowledge it, repeat."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url, decode_responses=True)
    scripts = ScriptSet(client)
    k = QueueKeys(queue)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    seq = [0]

    async def slot(i: int) -> None:
        while not stop.is_set():
            seq[0] += 1
            reply = (await run_calls_async(client, scripts, [P.fetch_call(k, 1, 30000, "naive", f"n{seq[0]}")]))[0]
            got = P.parse_fetch(reply)
            if not got:
                await client.blpop([k.marker], timeout=0.05)
                continue
            f = got[0]
            await _noop(Job(f.id, f.name, None, 1, queue, 1, 0, None, f.token))
            await run_calls_async(client, scripts, [P.complete_call(k, 10000, -1, -1, [(f.id, f.token, "null")])])

    await asyncio.gather(*(slot(i) for i in range(concurrency)))
    await client.aclose()
    return 0


#: A handler name with this suffix runs in a worker with ``prefetch=0`` (fetching only for free slots)
#: instead of the default ``prefetch="auto"``: what fetching ahead buys.
NO_AHEAD = "+prefetch0"


def worker_main(url: str, queue: str, concurrency: int, handler: str) -> int:
    """A worker process, run as ``qsim worker`` runs one (on uvloop when installed, unless QSIM_NO_UVLOOP=1)."""
    if handler == "naive":
        return run_process(naive_worker(url, queue, concurrency))
    prefetch: int | str = 0 if handler.endswith(NO_AHEAD) else "auto"
    w = Worker(queue, HANDLERS[handler.removesuffix(NO_AHEAD)], redis=url, concurrency=concurrency,
               keep_completed=None, prefetch=prefetch)
    return run_process(w.run())


#: The accelerators of the ``fast`` extra, each turned on or off in the worker processes' environment.
#: "default install" is a worker without either (what ``pip install qsim`` gives).
ACCELERATORS: dict[str, dict[str, str]] = {
    "default install": {NO_HIREDIS_ENV: "1", NO_UVLOOP_ENV: "1"},
    "+hiredis": {NO_UVLOOP_ENV: "1"},
    "+uvloop": {NO_HIREDIS_ENV: "1"},
    "+hiredis +uvloop (fast)": {},
}
DEFAULT = ACCELERATORS["default install"]
#: The default install with fetching ahead turned off (``prefetch=0``), in the BullMQ table.
NO_AHEAD_ROW = "default install, prefetch=0"


def accelerators_installed() -> dict[str, bool]:
    import importlib.util

    return {name: importlib.util.find_spec(name) is not None for name in ("hiredis", "uvloop")}


def spawn(url: str, queue: str, concurrency: int, handler: str,
          accel: dict[str, str] = DEFAULT) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in (NO_HIREDIS_ENV, NO_UVLOOP_ENV)}
    return subprocess.Popen([sys.executable, __file__, "--worker-proc", url, queue, str(concurrency), handler],
                            env={**env, **accel, "PYTHONPATH": str(ROOT)})


# -- measurements -------------------------------------------------------------------
def drain(url: str, n: int, concurrency: int, procs: int = 1, handler: str = "noop", limits: bool = False,
          accel: dict[str, str] = DEFAULT) -> float:
    """Jobs/s of ``procs`` worker processes draining ``n`` pre-filled jobs (``limits``: a concurrency
    limit and a rate limit set high enough not to bind, so only the cost of checking them shows)."""
    q = Queue("bench", redis=url)
    q.client.flushall()
    q.set_retention(keep_count=None)
    if limits:
        q.set_concurrency_limit(1000)
        q.set_rate_limit(10**6, 1.0)
    q.add_bulk([("noop", None) for _ in range(n)])
    ps = [spawn(url, "bench", concurrency, handler, accel) for _ in range(procs)]
    try:
        deadline = time.monotonic() + 300
        while q.counts()["completed"] < n:
            if time.monotonic() > deadline or any(p.poll() is not None for p in ps):
                raise RuntimeError("drain did not finish")
            time.sleep(0.05)
    finally:
        for p in ps:
            p.send_signal(signal.SIGTERM)
        for p in ps:
            p.wait(30)
    recs = q.job_records()
    first = min(r.started_at for r in recs if r.started_at)
    last = max(r.finished_at for r in recs if r.finished_at)
    q.close()
    return n / (last - first)


def enqueue_rates(url: str, n: int) -> tuple[float, float]:
    q = Queue("enq", redis=url)
    q.client.flushall()
    t0 = time.perf_counter()
    for i in range(n):
        q.add("t", {"i": i})
    single = n / (time.perf_counter() - t0)
    jobs = [("t", {"i": i}) for i in range(n * 4)]
    t0 = time.perf_counter()
    for i in range(0, len(jobs), 1000):
        q.add_bulk(jobs[i : i + 1000])
    bulk = len(jobs) / (time.perf_counter() - t0)
    q.close()
    return single, bulk


def pickup_latency(url: str, n: int = 300, accel: dict[str, str] = DEFAULT) -> list[float]:
    q = Queue("pick", redis=url)
    q.client.flushall()
    q.set_retention(keep_count=None)
    p = spawn(url, "pick", 10, "stamp", accel)
    try:
        time.sleep(1.5)  # let the worker start and go idle
        added = {}
        for i in range(n):
            t0 = time.time()
            q.add("t", None, job_id=f"p{i}")
            added[f"p{i}"] = (t0 + time.time()) / 2  # the middle of the add call, as on BullMQ's side
            time.sleep(0.005)
        while q.counts()["completed"] < n:
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(30)
    lat = sorted((r.returnvalue - added[r.id]) * 1000 for r in q.job_records())  # type: ignore[operator]
    q.close()
    return lat


async def asyncio_ceiling(n: int = 5000, concurrency: int = 50) -> float:
    """Jobs/s of ``concurrency`` bare asyncio tasks each awaiting 10 ms, ``n`` in all: what the
    event loop alone allows the I/O-bound run (``asyncio.sleep`` wakes late by the loop's timer
    resolution and the time the other 49 tasks take to be run)."""
    left = [n]

    async def slot() -> None:
        while left[0] > 0:
            left[0] -= 1
            await asyncio.sleep(0.01)

    t0 = time.perf_counter()
    await asyncio.gather(*(slot() for _ in range(concurrency)))
    return n / (time.perf_counter() - t0)


def peer_table(url: str, n: int, runs: int, qsim_rate: float) -> None:
    """The same drain (``n`` no-op jobs enqueued first, one worker process, concurrency 10) on each
    installed peer, median of ``runs``; prints system, jobs/s and qsim's ratio to it."""
    import benchmarks.peers as peers

    print(f"\nsame drain on peers ({n} no-op jobs, 1 worker process, concurrency 10, median of {runs}):")
    print(f"  {'system':<18} {'jobs/s':>10}   qsim/peer")
    print(f"  {'qsim':<18} {qsim_rate:10,.0f}   1.0x")
    for label, module, pip_name in peers.PEERS:
        if peers.load(module) is None:
            print(f"  {label:<18} {'-':>10}   not installed (pip install .[bench], or pip install {pip_name})")
            continue
        try:
            rates = [peers.drain(label, module, url, n, 10) for _ in range(runs)]
        except Exception as e:  # noqa: BLE001 - a peer's failure is reported, the benchmark goes on
            print(f"  {label:<18} {'-':>10}   failed: {e}")
            continue
        med = statistics.median(rates)
        print(f"  {label:<18} {med:10,.0f}   {qsim_rate / med:.1f}x   (runs: {', '.join(f'{r:,.0f}' for r in rates)})")
    for label, why in peers.SKIPPED:
        print(f"  {label:<18} {'-':>10}   {why}")


def bullmq_table(url: str, n: int, runs: int, ceiling: float) -> str | None:
    """qsim with each accelerator setting against BullMQ on Node, on the same redis-server: the no-op
    drain (``n`` jobs, concurrency 10), the I/O-bound drain (5,000 x 10 ms, concurrency 50) and the
    pickup latency on an idle queue; the systems take turns (order reversed every run), median of ``runs``."""
    from benchmarks.peers import bullmq_node as bn

    why = bn.node_missing()
    if why:
        print(f"\nBullMQ (Node) skipped: {why}.")
        return None
    bq = bn.BullMQ("5")
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    have = accelerators_installed()
    systems: list[tuple[str, dict[str, str] | None]] = [("BullMQ (Node)", None)]
    missing: list[tuple[str, dict[str, str] | None]] = []
    for label, accel in ACCELERATORS.items():
        needs = [m for m in ("hiredis", "uvloop") if m in label and not have[m]]
        (missing if needs else systems).append((label, accel))
    systems.insert(2, (NO_AHEAD_ROW, DEFAULT))
    figures: dict[str, dict[str, list[float]]] = {label: {} for label, _ in systems}
    for r in range(runs):
        for label, env in systems if r % 2 == 0 else systems[::-1]:
            f = figures[label]
            if env is None:
                noop, io = bn.drain(bq, url, n, 10), bn.drain(bq, url, 5000, 50, "io10")
                lat = bn.pickup_latency(bq, url)
            else:
                how = NO_AHEAD if label == NO_AHEAD_ROW else ""
                noop = drain(url, n, 10, handler="noop" + how, accel=env)
                io = drain(url, 5000, 50, 1, "io10" + how, accel=env)
                lat = pickup_latency(url, accel=env)
            for key, x in (("noop", noop), ("io", io), ("p50", pct(lat, 50)), ("p95", pct(lat, 95))):
                f.setdefault(key, []).append(x)
    med = {label: {k: statistics.median(xs) for k, xs in f.items()} for label, f in figures.items()}
    b = med["BullMQ (Node)"]
    bf = figures["BullMQ (Node)"]

    def paired(f: dict[str, list[float]], key: str) -> float:
        """The median over runs of this system's figure / BullMQ's in the same run (the machine's speed
        drifts between runs on a shared VM; a run's two figures are minutes apart at most)."""
        return statistics.median(x / y for x, y in zip(f[key], bf[key]))

    print(f"\nqsim against BullMQ (Node {node}, bullmq {bq.version}), same redis-server, one worker process each, "
          f"taking turns, median of {runs}:")
    print(f"  {'system':<26} {'no-op c10':>10} {'ratio':>6}   {'I/O c50':>8} {'ratio':>6} {'of asyncio':>10}"
          f"   pickup p50 / p95")
    for label, m in med.items():
        vs_noop = f"{paired(figures[label], 'noop'):.2f}x" if m is not b else "-"
        vs_io = f"{paired(figures[label], 'io'):.2f}x" if m is not b else "-"
        print(f"  {label:<26} {m['noop']:10,.0f} {vs_noop:>6}   {m['io']:8,.0f} {vs_io:>6} {m['io'] / ceiling:10.0%}"
              f"   {m['p50']:.2f} / {m['p95']:.2f} ms")
    for label, _ in missing:
        print(f"  {label:<26} not installed: pip install qsim[fast] (or hiredis / uvloop)")
    print("  runs (no-op / I/O jobs/s / pickup p50 ms):")
    for label, f in figures.items():
        print(f"    {label:<24} {', '.join(f'{x:,.0f}' for x in f['noop'])}  /  {', '.join(f'{x:,.0f}' for x in f['io'])}"
              f"  /  {', '.join(f'{x:.2f}' for x in f['p50'])}")
    print(f"  (ratio: the median over the runs of qsim / BullMQ in the same run; 'of asyncio': of {ceiling:,.0f} jobs/s, "
          f"50 bare asyncio tasks awaiting 10 ms; pickup: from the middle of the producer's add call to the handler's "
          f"start)")
    return markdown_table(figures, ceiling, n, runs, f"Node {node}, bullmq {bq.version}")


def markdown_table(figures: dict[str, dict[str, list[float]]], ceiling: float, n: int, runs: int,
                   versions: str) -> str:
    """The BullMQ table for the docs: per system the median figures, and every ratio the median over the runs
    of the two systems' figures in the same run (never a ratio of the two medians)."""
    base = figures["BullMQ (Node)"]

    def paired(f: dict[str, list[float]], key: str, den: list[float] | None = None) -> float:
        return statistics.median(x / y for x, y in zip(f[key], den if den is not None else base[key]))

    rows = ["| | no-op drain, concurrency 10 | I/O-bound 10 ms, concurrency 50 | pickup p50 / p95 |",
            "|---|---|---|---|"]
    for label, f in figures.items():
        m = {k: statistics.median(xs) for k, xs in f.items()}
        of_asyncio = paired(f, "io", [ceiling] * len(f["io"]))
        if f is base:
            noop, io = f"{m['noop']:,.0f} jobs/s", f"{m['io']:,.0f} jobs/s ({of_asyncio:.0%} of bare asyncio)"
        else:
            noop = f"{m['noop']:,.0f} ({paired(f, 'noop'):.2f}x)"
            io = f"{m['io']:,.0f} ({paired(f, 'io'):.2f}x; {of_asyncio:.0%})"
        name = label.replace("prefetch=0", "`prefetch=0`")
        rows.append(f"| {name} | {noop} | {io} | {m['p50']:.2f} / {m['p95']:.2f} ms |")
    runs_noop = "; ".join(f"{label} {', '.join(f'{x:,.0f}' for x in f['noop'])}" for label, f in figures.items())
    return ("\n".join(rows) + "\n\n"
            f"{versions}; {n:,} jobs per no-op drain, 5,000 per I/O-bound drain; one worker process each, the systems "
            f"taking turns on one redis-server, median of {runs} runs. Every ratio (x) is the median of the {runs} "
            f"same-run ratios qsim / BullMQ; the percentage is the median of the same-run I/O-bound rates over bare "
            f"asyncio's {ceiling:,.0f} jobs/s (50 tasks awaiting 10 ms, no Redis). No-op drain per run, jobs/s: "
            f"{runs_noop}.\n")


def snippet(table: str | None, a: argparse.Namespace, started: float) -> None:
    """With ``--snippet``, write the BullMQ table where docs/explanation/performance.md includes it."""
    if a.snippet and table is not None:
        from benchmarks.snippet import write_snippet

        print(f"wrote {write_snippet(f'engine-vs-bullmq-{a.jobs}', table, started=started)}")


def pct(xs: list[float], p: float) -> float:
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--skip-peers", action="store_true", help="do not run the Python peer queues (bench extra)")
    ap.add_argument("--skip-bullmq", action="store_true", help="do not run BullMQ (Node)")
    ap.add_argument("--only-bullmq", action="store_true",
                    help="only the table against BullMQ (Node), with each accelerator setting")
    ap.add_argument("--snippet", action="store_true",
                    help="also write the BullMQ table for the docs, as Markdown in docs/snippets/benchmarks/ "
                         "(engine-vs-bullmq-JOBS)")
    a = ap.parse_args()
    started = time.time()
    from redis_server import RedisServer

    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            url = server.url
            have = ", ".join(f"{m} {'installed' if ok else 'not installed'}" for m, ok in accelerators_installed().items())
            print(f"redis-server on port {server.port}; {a.jobs} jobs per drain, median of {a.runs} runs; "
                  f"qsim workers as installed by default (no hiredis, asyncio's loop) unless a row says otherwise "
                  f"({have})")
            if a.only_bullmq:
                ceiling = statistics.median(asyncio.run(asyncio_ceiling()) for _ in range(a.runs))
                snippet(bullmq_table(url, a.jobs, a.runs, ceiling), a, started)
                return 0
            single, bulk = enqueue_rates(url, 5000)
            print(f"enqueue, one at a time (sync Queue.add):   {single:10,.0f} jobs/s")
            print(f"enqueue, add_bulk batches of 1000:        {bulk:10,.0f} jobs/s")
            rows = []
            for label, conc, procs, handler, limits in [
                ("qsim, 1 process, concurrency 10", 10, 1, "noop", False),
                ("qsim, same, with concurrency + rate limit", 10, 1, "noop", True),
                ("qsim, 1 process, concurrency 50", 50, 1, "noop", False),
                ("qsim, 2 processes, concurrency 50", 50, 2, "noop", False),
                ("naive (1 round trip/step), concurrency 10", 10, 1, "naive", False),
            ]:
                rates = [drain(url, a.jobs, conc, procs, handler, limits) for _ in range(a.runs)]
                med = statistics.median(rates)
                rows.append((label, med))
                print(f"drain {label:<44} {med:10,.0f} jobs/s  (runs: {', '.join(f'{r:,.0f}' for r in rates)})")
            naive = rows[-1][1]
            print(f"ratio qsim (1 process, concurrency 10) / naive: {rows[0][1] / naive:.1f}x")
            lat = pickup_latency(url)
            print(f"pickup latency on an idle queue: p50 {pct(lat, 50):.2f} ms, p95 {pct(lat, 95):.2f} ms, "
                  f"p99 {pct(lat, 99):.2f} ms")
            io = statistics.median(drain(url, 5000, 50, 1, "io10") for _ in range(a.runs))
            print(f"I/O-bound (10 ms each, concurrency 50, 5000 jobs): {io:,.0f} jobs/s = {io / 5000:.0%} of ideal 5,000/s")
            io0 = statistics.median(drain(url, 5000, 50, 1, "io10" + NO_AHEAD) for _ in range(a.runs))
            print(f"  same, Worker(prefetch=0):                          {io0:,.0f} jobs/s = {io0 / 5000:.0%} of ideal")
            ceiling = statistics.median(asyncio.run(asyncio_ceiling()) for _ in range(a.runs))
            print(f"  asyncio alone (50 tasks awaiting 10 ms, no Redis): {ceiling:,.0f} jobs/s = {ceiling / 5000:.0%}; "
                  f"qsim reaches {io / ceiling:.0%} of that ({io0 / ceiling:.0%} with prefetch=0)")
            if not a.skip_bullmq:
                snippet(bullmq_table(url, a.jobs, a.runs, ceiling), a, started)
            if not a.skip_peers:
                peer_table(url, a.jobs, a.runs, rows[0][1])
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-proc":
        sys.exit(worker_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    sys.exit(main())
