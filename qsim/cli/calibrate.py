"""``qsim calibrate``: from a real queue's measured jobs to a Scenario TOML that reproduces them.

::

    qsim calibrate --from qsim|bullmq --redis URL --queue NAME [--queue ...] [--prefix P] [--since T] [--until T]
                   [--out FILE.toml] [--plots DIR] [--json]
    qsim calibrate --from csv FILE [--drop-bad-rows] [--out FILE.toml] [--json]
    qsim calibrate --probe [--redis URL] [--json]
    qsim calibrate --probe --concurrency N [--workers W] [--loads 0.1,0.4,0.7,0.9] [--probe-service S] [--json]

Reading is read-only (``--from qsim|bullmq`` never writes to the Redis it
reads; ``--redis`` defaults to ``$REDIS_URL``, then ``redis://127.0.0.1:6379/0``).
The probe also measures Redis's own CPU per job and per waiting worker (``INFO
cpu``/``commandstats`` around a short add-and-drain; :mod:`qsim.calibrate.redis_probe`),
which ``--out`` writes as ``[engine] redis_cpu_per_job_us`` and
``redis_idle_us_per_worker`` for ``qsim plan`` and ``qsim autoscale``.
The probe writes keys of its own and deletes them: like ``qsim run`` it
refuses a Redis that is not on this machine unless confirmed, and without
``--redis``/``$REDIS_URL`` starts a throwaway ``redis-server``. Exit 2 on bad
input (an empty window, a missing queue, too few jobs, a bad CSV, an output
path whose folder is missing or not writable, a Redis URL that is malformed or
cannot be reached), checked before anything is read: nothing is written then.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from qsim.cli.common import (EXIT_BAD_INPUT, EXIT_OK, Progress, err, pos_float, pos_int, print_json, redis_url,
                              repeated, resolve_redis_url)
from qsim.errors import UsageError
from qsim.results.outpath import out_dir, out_file

__all__ = ["register", "cmd_calibrate"]

SOURCES = ("qsim", "bullmq", "csv")

logger = logging.getLogger(__name__)


def _bad(message: str) -> int:
    err("calibrate", message)
    return EXIT_BAD_INPUT


def _check(args: argparse.Namespace) -> str | None:
    """The first problem with the arguments, in one sentence (None: fine)."""
    if args.source is None and not args.probe:
        return "give --from qsim|bullmq|csv (measured jobs) or --probe (the engine's overhead)"
    if args.source == "csv":
        if not args.file:
            return "--from csv needs the CSV file: qsim calibrate --from csv FILE"
        if args.queue:
            return "--queue does not apply to --from csv (the CSV's queue column names the queues)"
    elif args.file:
        return f"a FILE ({args.file}) is read only with --from csv"
    if args.source in ("qsim", "bullmq") and not args.queue:
        return f"--from {args.source} needs --queue NAME (repeat it for several queues)"
    if twice := repeated(args.queue, "--queue"):
        return twice
    if args.group and args.source != "qsim":
        return "--group applies only to --from qsim (the engine's queue groups)"
    if args.drop_bad_rows and args.source != "csv":
        return "--drop-bad-rows applies only to --from csv (the Redis sources' records are read as they are)"
    if args.source is None and (args.out or args.plots or args.queue):
        return "--out, --plots and --queue need --from (the probe alone prints the overhead)"
    loaded = args.concurrency is not None
    if not args.probe and (loaded or args.workers is not None or args.loads is not None
                           or args.probe_service is not None):
        return "--concurrency, --workers, --loads and --probe-service shape the probe: they need --probe"
    if not loaded and (args.workers is not None or args.loads is not None):
        return "--workers and --loads need --concurrency N (the probe under load, at your pools' shape)"
    try:  # before anything is read or run: nothing is created for a path that cannot be written
        if args.out is not None:
            out_file(args.out, "--out")
        if args.plots is not None:
            out_dir(args.plots, "--plots")
    except UsageError as e:
        return str(e)
    return None


def _probe(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    import redis

    from qsim.calibrate.probe import DEFAULT_LOADS, SERVICE, probe
    from qsim.calibrate.redis_probe import probe_redis_cost
    from qsim.cli.run import redis_for

    options: dict[str, Any] = {"service": args.probe_service or SERVICE}
    if args.concurrency is not None:  # under load, at the user's pools' shape
        options.update(concurrency=args.concurrency, workers=args.workers or 1, loads=args.loads or DEFAULT_LOADS)
    with redis_for(args) as url:
        progress = Progress("probe the engine's overhead")
        try:
            overhead = probe(url, progress=progress, **options)
        finally:
            progress.close()
        try:  # Redis's own CPU per job, for plan and autoscale
            return replace(overhead, redis=probe_redis_cost(url))
        except redis.ResponseError as e:  # e.g. an ACL user without INFO: the overheads stand alone
            logger.warning("could not measure Redis's CPU per job (INFO cpu/commandstats refused: %s); plan and "
                           "autoscale will use qsim's default", e)
            return overhead


def _calibrate(args: argparse.Namespace, overhead: Any) -> Any:
    import qsim.calibrate as cal

    options: dict[str, Any] = dict(since=args.since, until=args.until, service=args.service, arrivals=args.arrivals,
                                   min_jobs=args.min_jobs, overhead=overhead, name=args.name)
    if args.source == "csv":
        return cal.from_csv(args.file, drop_bad_rows=args.drop_bad_rows, **options)
    url = resolve_redis_url(args.redis)
    read = cal.from_redis if args.source == "qsim" else cal.from_bullmq
    extra: dict[str, Any] = {"group": args.group} if args.source == "qsim" else {}
    prefix = args.prefix or ("qsim" if args.source == "qsim" else "bull")
    progress = Progress(f"read jobs from {args.source}")
    try:
        return read(url, args.queue, prefix=prefix, max_jobs=args.max_jobs, progress=progress, **extra, **options)
    finally:
        progress.close()


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Calibrate a scenario from measured jobs, or probe the engine's overhead."""
    problem = _check(args)
    if problem:
        return _bad(problem)
    overhead = _probe(args) if args.probe else None
    if args.source is None:
        assert overhead is not None  # _check: --probe without --from
        if args.json:
            print_json({"overhead": overhead.as_dict()})
        else:
            print(_probe_text(overhead))
        return EXIT_OK
    result = _calibrate(args, overhead)  # bad input (CalibrationError, UsageError): exit 2 in qsim.cli.main
    scenario = result.write(args.out, option="--out") if args.out else None
    plots = result.plots(args.plots, option="--plots") if args.plots else []
    if args.json:
        print_json(result.as_json(scenario))
    else:
        print(repr(result))
        if args.out:
            print(f"\nwrote {args.out}")
        for p in plots:
            print(f"wrote {p}")
        if not args.out:
            print("\n(--out FILE.toml writes the scenario; --json prints it)", file=sys.stderr)
    return EXIT_OK


def _probe_text(overhead: Any) -> str:
    """The probe's result as the lines of an ``[engine]`` table."""
    lines = _overhead_text(overhead)
    r = overhead.redis
    if r is not None:
        d = r.detail
        lines += (f"\nredis_cpu_per_job_us = {r.cpu_per_job_us:.2f}   # Redis CPU per job: add {d['add_us']:.1f} "
                  f"+ fetch and completion {d['drain_us']:.1f} µs, {d['commands_per_job']:.1f} commands"
                  f"\nredis_idle_us_per_worker = {r.idle_us_per_worker:.3f}   # Redis CPU per second of a waiting "
                  f"worker ({d['idle_commands_per_worker_s']:.2f} commands/s)")
    return lines


def _overhead_text(overhead: Any) -> str:
    d = overhead.as_dict()
    if overhead.by_load:
        rows = ", ".join(f"[{u:.3f}, {f:.6f}, {a:.6f}]" for u, f, a in overhead.by_load)
        return (f"overhead_by_load = [{rows}]\n# [utilization, fetch_overhead, ack_overhead] measured {d['source']}, "
                f"handler {d['handler'] * 1e3:g} ms; the model reads the row of the load it simulates\n# {d['note']}")
    return (f"fetch_overhead = {d['fetch_overhead']:.6f}   # mean pickup, ms: {d['pickup_mean'] * 1e3:.3f}\n"
            f"ack_overhead   = {d['ack_overhead']:.6f}   # in-slot beyond the handler, ms: "
            f"{d['in_slot_mean'] * 1e3:.3f}, less fetch_overhead; {d['n']} jobs at light load "
            f"({d['utilization']:.0%} busy)")


def _loads(text: str) -> tuple[float, ...]:
    """argparse type of ``--loads``: utilizations in (0, 1], comma-separated."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be utilizations in (0, 1] such as 0.1,0.4,0.7,0.9, got {text!r}") \
            from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise argparse.ArgumentTypeError(f"must be utilizations in (0, 1] such as 0.1,0.4,0.7,0.9, got {text!r}")
    return values


def _when(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def register(sub: Any) -> None:
    """Add ``calibrate`` to the qsim command."""
    p = sub.add_parser(
        "calibrate", help="fit a scenario to a real queue's measured jobs (qsim, BullMQ or CSV); probe overhead",
        description="Read measured jobs (the qsim engine's Redis, a BullMQ Redis, or a CSV with one row per job) "
                    "and write a Scenario TOML that reproduces them: arrivals, service times, failures, pools and "
                    "limits per job type, each with the sample size and fit statistic it came from. --probe "
                    "measures the engine's own per-job overhead on a Redis instead (or as well).",
        epilog="Exit codes: 0 success, 2 bad input (an empty window, a missing queue, too few jobs, a bad CSV, an "
               "output path whose folder is missing, a Redis URL that is malformed or cannot be reached), "
               "1 other failures.")
    p.add_argument("file", nargs="?", metavar="FILE", help="with --from csv: the CSV file (one row per job)")
    p.add_argument("--from", dest="source", choices=SOURCES,
                   help="where the measured jobs are: qsim (the engine's Redis), bullmq (a BullMQ Redis) or csv")
    p.add_argument("--redis", type=redis_url, metavar="URL", help="the Redis to read (default $REDIS_URL, then "
                                                  "redis://127.0.0.1:6379/0); for --probe alone: the Redis to probe "
                                                  "(default $REDIS_URL, else a throwaway redis-server)")
    p.add_argument("--queue", action="append", default=[], metavar="NAME", help="a queue to read (repeat for several)")
    p.add_argument("--prefix", help="key prefix (default: qsim for --from qsim, bull for --from bullmq)")
    p.add_argument("--group", help="--from qsim: the queues' group (hash tag), when they were created with one")
    p.add_argument("--since", type=_when, metavar="T", help="only jobs enqueued at or after T: Unix seconds "
                   "(for csv: the file's clock), an ISO date-time (UTC unless it says), or a duration back from now "
                   "such as 90s, 15m, 2h, 1d (for csv: back from the last enqueue)")
    p.add_argument("--until", type=_when, metavar="T", help="only jobs enqueued before T (same forms as --since)")
    p.add_argument("--max-jobs", type=pos_int, default=200_000, metavar="N",
                   help="read at most N jobs, the most recently finished first (default 200000)")
    p.add_argument("--service", choices=("fit", "empirical"), default="fit",
                   help="fit: exponential, gamma or lognormal by maximum likelihood, best by KS (default); "
                        "empirical: write the measured run times as a CSV beside the TOML")
    p.add_argument("--arrivals", choices=("fit", "trace"), default="fit",
                   help="fit: poisson, profile (a rate that changed: steps, linear or daily, by BIC), burst "
                        "(arrivals that coincide) or constant, by the tests of qsim/calibrate/arrivals.py (default); "
                        "trace: write the measured enqueue times as a CSV beside the TOML")
    p.add_argument("--drop-bad-rows", action="store_true",
                   help="--from csv: leave out impossible rows (finished before started, started before enqueued, "
                        "a time that is not finite, negative counts) and say how many; without it the first one "
                        "is an error naming its line")
    p.add_argument("--min-jobs", type=pos_int, default=30, metavar="N",
                   help="a job type with fewer jobs in the window is an error (default 30)")
    p.add_argument("--name", default="calibrated", help="the scenario's name (default: calibrated)")
    p.add_argument("--out", metavar="FILE.toml", help="write the scenario TOML (commented; CSVs beside it); its "
                   "folder must exist")
    p.add_argument("--plots", metavar="DIR", help="write one PNG per job type: service CDF, arrivals per minute "
                   "against the fitted rate or rate profile (DIR is created if missing; its parent must exist)")
    p.add_argument("--probe", action="store_true",
                   help="run a short probe on the engine (keys of its own, deleted afterwards) and fit [engine] "
                        "fetch_overhead and ack_overhead: at light load, or with --concurrency at your pools' shape "
                        "over several loads (overhead_by_load); then Redis's own CPU per job and per waiting worker "
                        "(redis_cpu_per_job_us, redis_idle_us_per_worker: what plan and autoscale price Redis at); "
                        "with --from, use them for the calibration")
    p.add_argument("--concurrency", type=pos_int, metavar="N",
                   help="--probe under load: jobs at once per worker, as in your pools; the probe steps through "
                        "--loads and writes [engine] overhead_by_load (the model reads the row of its load)")
    p.add_argument("--workers", type=pos_int, metavar="W", help="--probe under load: worker processes (default 1)")
    p.add_argument("--loads", type=_loads, metavar="U,U,...",
                   help=f"--probe under load: the utilizations to step through (default "
                        f"{','.join(map(str, (0.1, 0.4, 0.7, 0.9)))}; {3:g} s each)")
    p.add_argument("--probe-service", type=pos_float, metavar="S",
                   help="the probe handler's time in seconds (default 0.01); near your jobs' mean service time "
                        "the probe's jobs per second at a load are yours")
    p.add_argument("--i-know-this-is-not-local", action="store_true",
                   help="allow --probe on a Redis that is not on this machine (the probe adds and deletes keys)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON document: {"scenario": {...}, "fits": {TYPE: {...}}, "overhead": {...}}')
    p.set_defaults(func=cmd_calibrate)
