"""Redis's CPU per job and the saturation throughput, qsim's engine beside BullMQ on Node, on one redis-server.

For each concurrency (1, 10, 100 slots in one worker process) and each run,
the systems take turns (the order reversed every run) on the same throwaway
``redis-server``, flushed before each:

1. **add**: ``--jobs`` no-op jobs added one call each (qsim: the sync
   ``Queue.add``; BullMQ: ``queue.add``, benchmarks/node/bench.js ``add``),
   or with ``--add bulk`` in batches of :data:`BULK` (qsim: ``Queue.add_bulk``,
   one script call per batch; BullMQ: ``queue.addBulk``, bench.js ``fill``:
   one pipelined script call per job);
2. **drain**: one worker process with that concurrency runs them all (qsim:
   the default install, as benchmarks/engine_throughput.py starts it; BullMQ:
   bench.js ``work``); completed jobs are kept by both.

Redis's ``INFO cpu`` (``used_cpu_sys + used_cpu_user``) and ``INFO
commandstats`` are read before and after each phase
(:mod:`qsim.calibrate.redis_probe`): their differences over the jobs are the
**Redis CPU per job** (µs) and the **commands per job** (a script's inner
commands counted, as Redis counts them). The **saturation throughput** is the
drain's jobs/s (timed from the jobs' own start and finish stamps), and the
Redis utilization there is that rate x the drain's CPU per job (the adds run
elsewhere in a deployment, at the same rate: the full figure is the rate x the
whole CPU per job). qsim / BullMQ ratios are medians of the same-run ratios.
Then ``--idle-workers`` qsim workers wait on an empty queue for 5 s (one ``block_timeout``): their
commands per second, priced at the CPU per command of the drains, are the
idle cost per worker, and the clients Redis counts while they wait, their
connections. A last paragraph divides a share of one core (the default
``--redis-ceiling``) by the median CPU per job: the jobs/s one Redis holds.

Usage: ``python benchmarks/redis_cost.py [--jobs 3000] [--runs 3] [--concurrency 1,10,100] [--add one|bulk]
[--skip-bullmq] [--snippet]``. With ``--snippet`` the table goes to docs/snippets/benchmarks/redis-cost.md
(``--add bulk``: redis-cost-bulk.md), which docs/explanation/performance.md includes. The default run takes
about two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import redis  # noqa: E402

from benchmarks.engine_throughput import spawn  # noqa: E402
from qsim.calibrate.redis_probe import IDLE_SECONDS, delta, sample, watch_idle  # noqa: E402
from qsim.engine import Queue  # noqa: E402
from qsim.spec.redis_cost import DEFAULT_CEILING  # noqa: E402

from benchmarks.peers.bullmq_node import PREFIX as BULL_PREFIX, QUEUE, stop  # noqa: E402

#: Jobs per call with ``--add bulk`` (bench.js ``fill`` adds in batches of the same size).
BULK = 1000


def _wait(done: Any, p: subprocess.Popen[Any], what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what}: the drain did not finish")
        time.sleep(0.05)


def _figures(n: int, s0: Any, s1: Any, s2: Any, rate: float) -> dict[str, float]:
    add_cpu, add_calls, _ = delta(s0, s1)
    drain_cpu, drain_calls, _ = delta(s1, s2)
    return {"add_us": add_cpu / n * 1e6, "drain_us": drain_cpu / n * 1e6, "us": (add_cpu + drain_cpu) / n * 1e6,
            "commands": (add_calls + drain_calls) / n, "add_commands": add_calls / n,
            "drain_commands": drain_calls / n, "rate": rate, "us_per_command":
            (add_cpu + drain_cpu) / max(1, add_calls + drain_calls) * 1e6}


def qsim_run(url: str, n: int, concurrency: int, bulk: bool = False,
             mark: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Add ``n`` jobs one call each (``bulk``: :data:`BULK` a call), drain them with one worker process;
    Redis's cost of each phase. ``mark`` is called at the start and the end of each phase (just before
    Redis's counters are read): benchmarks/redis_instructions.py dumps its instruction counts there."""
    client = redis.Redis.from_url(url, decode_responses=True)
    q = Queue(QUEUE, redis=url)
    try:
        client.flushall()
        q.set_retention(keep_count=None)
        mark()
        s0 = sample(client)
        if bulk:
            for i in range(0, n, BULK):
                q.add_bulk([("noop", None)] * min(BULK, n - i))
        else:
            for _ in range(n):
                q.add("noop", None)
        mark()
        s1 = sample(client)
        p = spawn(url, QUEUE, concurrency, "noop")
        try:
            _wait(lambda: client.zcard(q.keys.completed) >= n, p, "qsim")
            mark()
            s2 = sample(client)
        finally:
            stop(p)
        recs = q.job_records()
        first = min(r.started_at for r in recs if r.started_at)
        last = max(r.finished_at for r in recs if r.finished_at)
        return _figures(n, s0, s1, s2, n / (last - first))
    finally:
        q.close()
        client.close()


def bullmq_run(bq: Any, url: str, n: int, concurrency: int, bulk: bool = False,
               mark: Callable[[], None] = lambda: None) -> dict[str, float]:
    """The same on BullMQ (benchmarks/node/bench.js: ``add``, or ``fill`` when ``bulk``, then ``work``)."""
    from benchmarks.peers.bullmq_node import fields

    client = redis.Redis.from_url(url, decode_responses=True)
    cfg = {"redis": url, "queue": QUEUE, "prefix": BULL_PREFIX}
    script = str(ROOT / "benchmarks" / "node" / "bench.js")
    try:
        client.flushall()
        mark()
        s0 = sample(client)
        subprocess.run(["node", script, "fill" if bulk else "add", json.dumps({**cfg, "n": n})], check=True, env=bq._env(), timeout=300)
        mark()
        s1 = sample(client)
        p = subprocess.Popen(["node", script, "work", json.dumps({**cfg, "concurrency": concurrency,
                                                                  "handler": "noop"})],
                             stdout=subprocess.PIPE, text=True, env=bq._env())
        try:
            _wait(lambda: client.zcard(f"{BULL_PREFIX}:{QUEUE}:completed") >= n, p, "BullMQ")
            mark()
            s2 = sample(client)
        finally:
            stop(p)
        stamps = fields(client, n, "processedOn", "finishedOn")
        first = min(int(s) for s, _ in stamps)
        last = max(int(f) for _, f in stamps)
        return _figures(n, s0, s1, s2, n / ((last - first) / 1000.0))
    finally:
        client.close()


def idle_cost(url: str, workers: int, us_per_command: float,
              seconds: float = IDLE_SECONDS) -> tuple[float, float, float]:
    """qsim workers waiting on an empty queue: commands/s, Redis µs/s and client connections per worker."""
    client = redis.Redis.from_url(url, decode_responses=True)
    clients: list[int] = []

    def measure() -> Any:
        clients.append(int(client.info("clients")["connected_clients"]))
        return sample(client)

    try:
        client.flushall()
        alone = int(client.info("clients")["connected_clients"])
        before, after = asyncio.run(watch_idle(url, QUEUE, "qsim", workers, seconds, measure))
        _, calls, wall = delta(before, after)
        per_worker = calls / wall / workers
        return per_worker, per_worker * us_per_command, (max(clients) - alone) / workers
    finally:
        client.close()


def med(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def table(results: dict[int, dict[str, list[dict[str, float]]]], n: int, runs: int,
          idle: tuple[float, float, float] | None,
          bull_version: str | None, bulk: bool = False) -> str:
    """The Markdown table of the docs (medians; ratios: medians of same-run ratios)."""
    has_bull = bull_version is not None
    head = ["concurrency", "qsim jobs/s", "qsim Redis µs/job (add + drain)", "qsim commands/job",
            "qsim Redis share at saturation"]
    if has_bull:
        head += ["BullMQ jobs/s", "BullMQ Redis µs/job (add + drain)", "BullMQ commands/job",
                 "Redis µs/job qsim / BullMQ"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c, sides in results.items():
        q = sides["qsim"]
        cells = [str(c), f"{med(q, 'rate'):,.0f}", f"{med(q, 'us'):.0f} ({med(q, 'add_us'):.0f} + "
                 f"{med(q, 'drain_us'):.0f})", f"{med(q, 'commands'):.1f}",
                 f"{statistics.median(r['rate'] * r['drain_us'] / 1e6 for r in q):.0%}"]
        if has_bull:
            b = sides["bullmq"]
            ratio = statistics.median(x["us"] / y["us"] for x, y in zip(q, b))
            cells += [f"{med(b, 'rate'):,.0f}", f"{med(b, 'us'):.0f} ({med(b, 'add_us'):.0f} + "
                      f"{med(b, 'drain_us'):.0f})", f"{med(b, 'commands'):.1f}", f"{ratio:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    vs = f" and BullMQ {bull_version} (Node.js)" if has_bull else ""
    text = ("\n".join(lines) + "\n\n"
            f"qsim's engine (the default install){vs}, one worker process each, the systems taking turns on one "
            f"redis-server: {n:,} no-op jobs added {adds_how(bulk)}, then drained; medians of {runs} runs, the ratio the "
            f"median of the same-run ratios. The Redis share at saturation is the drain's jobs/s x its Redis CPU per "
            f"job (the share of one Redis core the worker side takes at that rate).")
    if has_bull:
        drains = ", ".join(f"{statistics.median(x['drain_us'] / y['drain_us'] for x, y in zip(s['qsim'], s['bullmq'])):.2f}"
                           for s in results.values())
        adds = ", ".join(f"{statistics.median(x['add_us'] / y['add_us'] for x, y in zip(s['qsim'], s['bullmq'])):.2f}"
                         for s in results.values())
        text += (f" The two phases apart (same-run ratios, concurrency {', '.join(map(str, results))}): the drain "
                 f"(what the workers cost) {drains}; the add ({add_calls(bulk)}) "
                 f"{adds}.")
    if idle is not None:
        text += (f" An idle qsim worker sends {idle[0]:.2f} commands/s (blocking pops timing out, each followed by a promotion; stalled checks), "
                 f"about {idle[1]:.0f} µs of Redis CPU per second, and holds {idle[2]:.2g} connections.")
    text += "\n\n" + holds(results, idle)
    return text + "\n"


def adds_how(bulk: bool) -> str:
    return f"in batches of {BULK:,} (qsim `add_bulk`, BullMQ `addBulk`)" if bulk else "one call each"


def add_calls(bulk: bool) -> str:
    if bulk:
        return ("qsim one script call per batch, BullMQ one script call per job, a batch's calls in one "
                "round trip")
    return "one script call and one round trip per job in both"


def holds(results: dict[int, dict[str, list[dict[str, float]]]], idle: tuple[float, float, float] | None,
          ceiling: float = DEFAULT_CEILING) -> str:
    """What one Redis core holds at the measured costs, up to ``ceiling`` of it (the plan's default)."""
    us = statistics.median(x["us"] for s in results.values() for x in s["qsim"])
    drain = statistics.median(x["drain_us"] for s in results.values() for x in s["qsim"])
    budget = ceiling * 1e6
    text = (f"One Redis core, up to {ceiling:.0%} of it (the default `--redis-ceiling`), holds about "
            f"{budget / us:,.0f} no-op jobs/s added and run at qsim's median {us:.0f} µs per job, or "
            f"{budget / drain:,.0f} jobs/s run when the adds go to another Redis ({drain:.0f} µs)")
    bull = [x["us"] for s in results.values() for x in s["bullmq"]]
    if bull:
        text += f"; at BullMQ's median {statistics.median(bull):.0f} µs, {budget / statistics.median(bull):,.0f} jobs/s"
    text += "."
    if idle is not None and idle[1] > 0:
        text += (f" Waiting workers cost {idle[1]:.0f} µs per second each: 1,000 of them take "
                 f"{1000 * idle[1] / 1e6:.1%} of the core and {1000 * idle[2]:,.0f} of Redis's 10,000 default "
                 f"`maxclients`.")
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000, help="jobs per add and drain (default 3000)")
    ap.add_argument("--runs", type=int, default=3, help="runs per concurrency and system (default 3)")
    ap.add_argument("--concurrency", default="1,10,100", help="slots of the one worker process (default 1,10,100)")
    ap.add_argument("--idle-workers", type=int, default=20, help="idle qsim workers measured (default 20; 0: none)")
    ap.add_argument("--add", choices=("one", "bulk"), default="one",
                    help=f"add the jobs one call each (default) or {BULK:,} a call (add_bulk / addBulk)")
    ap.add_argument("--skip-bullmq", action="store_true", help="qsim alone")
    ap.add_argument("--snippet", action="store_true",
                    help="write the table to docs/snippets/benchmarks/redis-cost.md (with --add bulk: "
                         "redis-cost-bulk.md; docs/explanation/performance.md)")
    a = ap.parse_args()
    started = time.time()
    concurrencies = [int(c) for c in a.concurrency.split(",")]
    from redis_server import RedisServer

    from benchmarks.peers.bullmq_node import bullmq_unless

    bq = bullmq_unless(a.skip_bullmq)
    results: dict[int, dict[str, list[dict[str, float]]]] = {c: {"qsim": [], "bullmq": []} for c in concurrencies}
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            print(f"redis-server on port {server.port}; {a.jobs} jobs per run, {a.runs} runs"
                  + (f"; BullMQ {bq.version}" if bq else ""))
            for r in range(a.runs):
                for c in concurrencies:
                    order = ["qsim", "bullmq"] if r % 2 == 0 else ["bullmq", "qsim"]
                    for system in order:
                        if system == "bullmq" and bq is None:
                            continue
                        bulk = a.add == "bulk"
                        f = qsim_run(server.url, a.jobs, c, bulk) if system == "qsim" else \
                            bullmq_run(bq, server.url, a.jobs, c, bulk)
                        results[c][system].append(f)
                        print(f"run {r + 1} concurrency {c:>3} {system:<6}: {f['rate']:8,.0f} jobs/s, Redis "
                              f"{f['us']:6.1f} µs/job (add {f['add_us']:.1f}, drain {f['drain_us']:.1f}), "
                              f"{f['commands']:.1f} commands/job", flush=True)
            idle = None
            if a.idle_workers:
                per_cmd = statistics.median(x["us_per_command"] for s in results.values() for x in s["qsim"])
                idle = idle_cost(server.url, a.idle_workers, per_cmd)
                print(f"idle: {idle[0]:.2f} commands/s per qsim worker, ~{idle[1]:.1f} µs/s of Redis CPU, "
                      f"{idle[2]:.2g} connections")
        finally:
            server.stop()
    text = table(results, a.jobs, a.runs, idle, bq.version if bq else None, a.add == "bulk")
    print("\n" + text)
    if a.snippet:
        from benchmarks.snippet import write_snippet

        print(f"wrote {write_snippet('redis-cost' + ('-bulk' if a.add == 'bulk' else ''), text, started=started)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
