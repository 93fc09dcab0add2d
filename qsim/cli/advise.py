"""``qsim advise``: how many workers a running queue needs for its SLOs, from its last window of jobs.

::

    qsim advise --redis URL --queue NAME --slo "p95_wait<=2" [--window 15m] [--from qsim|bullmq]
                [--redis-ceiling U] [--redis-cpu-per-job US] [--watch S] [--json]

Read-only on the Redis it reads (the :mod:`qsim.calibrate` sources). The logic
is :mod:`qsim.advise`; this module parses, prints and, with ``--watch``,
repeats (a line with a timestamp whenever the recommendation or a key figure
changes; Ctrl-C ends it with exit 0). Exit 2 on bad input (an SLO, a window,
no jobs in the window, a queue that is not there, an ``--out`` whose folder is
missing, a Redis URL that is malformed or cannot be reached), 1 on other failures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from qsim.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    EXIT_OK,
    Progress,
    add_redis_flags,
    err,
    finite,
    nonneg_float,
    pos_float,
    pos_int,
    print_json,
    redis_url,
    repeated,
    resolve_redis_url,
    seed_int,
)
from qsim.cli.plan import confidence_arg, replications_arg
from qsim.errors import ScenarioError, UsageError
from qsim.results.outpath import out_file

__all__ = ["register", "cmd_advise"]


def _bad(message: str) -> int:
    err("advise", message)
    return EXIT_BAD_INPUT


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return dict(window=args.window, source=args.source, prefix=args.prefix, group=args.group,
                min_jobs=args.min_jobs, max_jobs=args.max_jobs, concurrency=args.concurrency,
                max_workers=args.max_workers, replications=args.replications, confidence=args.confidence,
                search=args.search, jobs_per_run=args.jobs_per_run, seed=args.seed, processes=args.processes,
                pre_stop=args.pre_stop, redis_ceiling=args.redis_ceiling, redis_cpu_per_job_us=args.redis_cpu_per_job)


def _check(args: argparse.Namespace) -> str | None:
    from qsim.advise import parse_window
    from qsim.advise.core import parse_slos

    if args.group and args.source != "qsim":
        return "--group applies only to --from qsim (the engine's queue groups)"
    if twice := repeated(args.queue, "--queue"):
        return twice
    if args.watch is None and args.metrics_port is not None:
        return "--metrics-port needs --watch S (it serves the advice while watching)"
    try:
        parse_slos(args.slo)
        parse_window(args.window)
        if args.out is not None:  # before anything is read: nothing is written for a path that cannot be
            out_file(args.out, "--out")
    except (ScenarioError, UsageError) as e:
        return str(e)
    return None


def _once(args: argparse.Namespace, url: str) -> int:
    from qsim.advise import advise

    progress = Progress("advise")
    try:
        advice = advise(url, args.queue, args.slo, progress=progress, **_options(args))
    finally:
        progress.close()
    if args.out:
        advice.write(args.out, option="--out")
    if args.json:
        print_json(advice.as_json(args.out) if args.out else advice.as_json())
    else:
        print(repr(advice))
        if args.out:
            print(f"\nwrote {args.out}; the same plan offline: {advice.plan_command(args.out)}")
    return EXIT_OK


def _watch(args: argparse.Namespace, url: str) -> int:
    from qsim.advise import Advice, LatestAdvice, changes, watch
    from qsim.advise.live import AdviceCollector
    from qsim.advise.result import stamp

    latest = LatestAdvice(args.queue)
    server = None
    if args.metrics_port is not None:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry()
        registry.register(AdviceCollector(latest))
        if args.source == "bullmq":  # BullMQ's workers export nothing: the queue's own gauges come from here
            from qsim.bullmq.gauges import BullMQCollector
            from qsim.bullmq.options import DEFAULT_PREFIX

            registry.register(BullMQCollector(url, args.queue, args.prefix or DEFAULT_PREFIX))
        try:
            server, _ = start_http_server(args.metrics_port, registry=registry)
        except OSError as e:
            err("advise", f"cannot serve metrics on port {args.metrics_port}: {e}")
            return EXIT_FAILURE
        print(f"qsim advise: metrics on http://0.0.0.0:{args.metrics_port}/metrics", file=sys.stderr)
    shown: Any = None
    try:
        for item in watch(url, args.queue, args.slo, every=args.watch, **_options(args)):
            latest.update(item)
            what = changes(shown, item)
            if not what:
                continue
            shown = item
            if args.out and isinstance(item, Advice):
                item.write(args.out, option="--out")
            if args.json:
                full = item.as_json(args.out) if args.out and isinstance(item, Advice) else item.as_json()
                doc = {k: v for k, v in full.items() if k != "scenario"}
                doc["time"] = stamp(time.time())
                doc["changed"] = what
                if args.out and isinstance(item, Advice):
                    doc["out"] = args.out
                print(json.dumps(finite(doc), allow_nan=False), flush=True)
            else:
                extra = f"  [{', '.join(what)}]" if what != ["first"] else ""
                print(f"{stamp(time.time())}  {item.line()}{extra}", flush=True)
                if isinstance(item, Advice) and what == ["first"]:
                    print(f"  shutdown: {item.shutdown}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    return EXIT_OK


def cmd_advise(args: argparse.Namespace) -> int:
    """Advise the worker count of a running queue (once, or with --watch every S seconds)."""
    problem = _check(args)
    if problem:
        return _bad(problem)
    url = resolve_redis_url(args.redis)
    # errors go to qsim.cli.main: exit 2 for bad input (a window without jobs, Redis unreachable), else 1
    return _watch(args, url) if args.watch is not None else _once(args, url)


def register(sub: Any) -> None:
    """Add ``advise`` to the qsim command."""
    p = sub.add_parser(
        "advise", help="how many workers a running queue needs for its SLOs, from its last window of jobs",
        description="Calibrate a scenario from the jobs a running queue enqueued in the last --window (read-only "
                    "on Redis, as qsim calibrate) and plan the least workers, at the pool's concurrency, whose "
                    "confidence interval meets every --slo. Prints the recommendation with the measured arrival "
                    "rate, service fit, utilization and current worker count, and the share of one Redis core the "
                    "recommendation implies (a warning above --redis-ceiling). An SLO no worker count can meet "
                    "(the queue's rate or concurrency limit, or no count up to --max-workers) is said in words. "
                    "--watch S repeats every S seconds and prints a line only when something changes.",
        epilog="Exit codes: 0 success (and Ctrl-C ending --watch), 2 bad input (an SLO, a window, no jobs in the "
               "window, a missing queue, an --out whose folder is missing, a Redis URL that is malformed or cannot "
               "be reached), 1 other failures.")
    p.add_argument("--redis", type=redis_url, metavar="URL", help="the Redis to read (default $REDIS_URL, then "
                                                  "redis://127.0.0.1:6379/0); never written to")
    p.add_argument("--queue", action="append", required=True, metavar="NAME",
                   help="the queue (repeat for the queues one pool serves together)")
    p.add_argument("--slo", action="append", required=True, metavar="EXPR",
                   help="objective like p95_wait<=2 or p99_latency<5 (repeatable; the metrics of qsim plan)")
    p.add_argument("--window", default="15m", metavar="W",
                   help="the jobs enqueued in the last W: 90s, 15m, 2h, 1h30m, or seconds (default 15m)")
    p.add_argument("--from", dest="source", choices=("qsim", "bullmq"), default="qsim",
                   help="where the jobs are: qsim (the engine's Redis, default) or bullmq (a BullMQ Redis)")
    p.add_argument("--prefix", help="key prefix (default: qsim for --from qsim, bull for --from bullmq)")
    p.add_argument("--group", help="--from qsim: the queues' group (hash tag), when they were created with one")
    p.add_argument("--concurrency", type=pos_int, metavar="C",
                   help="jobs per worker to plan for (default: the most one worker was seen running at once)")
    p.add_argument("--max-workers", type=pos_int, default=500, metavar="N",
                   help="the most workers to consider (default 500)")
    p.add_argument("--replications", type=replications_arg, default="auto", metavar="R|auto",
                   help="model runs per worker count (default auto: 5, up to 40 where an interval straddles the SLO)")
    p.add_argument("--confidence", type=confidence_arg, default=0.95, metavar="C",
                   help="of the intervals the SLO must hold for (default 0.95)")
    p.add_argument("--search", choices=("grid", "auto"), default="auto",
                   help="auto: bisection over the worker counts (default); grid: every count")
    p.add_argument("--jobs-per-run", type=pos_int, default=10_000, metavar="N",
                   help="jobs per model run, which sets its simulated length (default 10000)")
    p.add_argument("--seed", type=seed_int, default=0, help="replication r uses SEED + r (default 0)")
    p.add_argument("--processes", type=pos_int, metavar="N", help="parallel model runs (default: every core; with --watch 1)")
    p.add_argument("--min-jobs", type=pos_int, default=30, metavar="N",
                   help="a job type with fewer jobs in the window is an error (default 30)")
    p.add_argument("--max-jobs", type=pos_int, default=200_000, metavar="N",
                   help="read at most N jobs, the most recently finished first (default 200000)")
    p.add_argument("--pre-stop", type=nonneg_float, default=0.0, metavar="S",
                   help="seconds a Kubernetes preStop hook takes, for the advised terminationGracePeriodSeconds")
    add_redis_flags(p)
    p.add_argument("--watch", type=pos_float, metavar="S",
                   help="repeat every S seconds; print a timestamped line when the advice or a key figure changes")
    p.add_argument("--metrics-port", type=pos_int, metavar="P",
                   help="with --watch: serve qsim_recommended_workers and friends on http://0.0.0.0:P/metrics "
                        "(--from bullmq: also the queue's qsim_bullmq_jobs and oldest waiting age)")
    p.add_argument("--out", metavar="FILE.toml",
                   help="write the planned scenario (offline: qsim plan FILE.toml with the printed arguments); "
                        "with --watch, that of each advice printed; its folder must exist")
    p.add_argument("--json", action="store_true",
                   help='print {"recommended_workers": N or null, "concurrency": C, "reason": ..., ...}; with '
                        "--watch one JSON line per change")
    p.set_defaults(func=cmd_advise)
