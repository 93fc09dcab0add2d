"""``qsim run`` and ``qsim compare``: a scenario on the real engine, and beside the model.

Redis: ``--redis URL``, else ``$REDIS_URL``, else a throwaway ``redis-server``
that qsim starts on a free port for the length of the command (nothing
existing is touched). A Redis that is not on this machine is refused unless
``--i-know-this-is-not-local`` is given: a run adds and deletes many keys.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qsim.cli.common import (EXIT_FAILURE, EXIT_OK, Progress, load_scenario, nonneg_float, nonneg_int, pos_int,
                              print_json, redis_url, resolve_redis_url)
from qsim.cli.output import format_check, format_comparison, format_summary, write_outputs
from qsim.outpath import out_dir

__all__ = ["register", "redis_for", "cmd_run", "cmd_compare"]


@contextlib.contextmanager
def redis_for(args: argparse.Namespace) -> Iterator[str]:
    """The Redis URL to run against, starting a throwaway server when none is given.

    Raises:
        UsageError: the URL (``--redis`` or ``$REDIS_URL``) is malformed, or not local and not confirmed.
    """
    url = resolve_redis_url(args.redis) if args.redis or os.environ.get("REDIS_URL") else None
    if url:
        from qsim.safety import require_local_or_confirmed

        require_local_or_confirmed(url, args.i_know_this_is_not_local)
        yield url
        return
    from qsim.harness.server import RedisServer

    with tempfile.TemporaryDirectory(prefix="qsim-redis-") as tmp, RedisServer(Path(tmp)) as server:
        yield server.url


def _engine(args: argparse.Namespace, scenario: Any, url: str) -> Any:
    from qsim.harness.run import run_scenario

    progress = Progress(f"run {scenario.name} on the engine")
    try:
        return run_scenario(scenario, url, seed=args.seed, max_jobs=args.jobs, drain_timeout=args.drain_timeout,
                            progress=progress, keep=args.keep)
    finally:
        progress.close()


def cmd_run(args: argparse.Namespace) -> int:
    """Run a scenario on the engine and print the measured Summary."""
    from qsim.harness.run import check_supported

    scenario = load_scenario(args.scenario)
    check_supported(scenario)  # bad input is refused before any process starts
    if args.out is not None:
        out_dir(args.out, "--out")
    with redis_for(args) as url:
        result = _engine(args, scenario, url)
    if args.out:
        write_outputs(Path(args.out), result.jobs, result.timeseries, result.summary, scenario, result.records)
    if args.json:
        print_json(result.summary)
    else:
        print(format_summary(result.summary))
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    """Run the model and the engine on one scenario and print both with their ratios; with
    ``--check``, the verdict per quantity, and exit 1 when one is out of tolerance."""
    from qsim.analysis.check import check, check_document, load_tolerances, quantities_of
    from qsim.analysis.compare import compare
    from qsim.harness.run import check_supported

    scenario = load_scenario(args.scenario)
    check_supported(scenario)
    checking = args.check or args.tolerance is not None
    # a bad tolerance file is refused (exit 2) before anything runs
    tolerances = load_tolerances(args.tolerance, quantities_of(scenario)) if args.tolerance is not None else None
    with redis_for(args) as url:
        progress = Progress(f"compare {scenario.name} (model, then the engine)")
        try:
            doc = compare(scenario, url, seed=args.seed, max_jobs=args.jobs, drain_timeout=args.drain_timeout,
                          progress=progress, keep=args.keep)
        finally:
            progress.close()
    if checking:
        doc["check"] = check_document(check(doc["model"], doc["engine"], tolerances, scenario=scenario))
    if args.json:
        print_json(doc)
    else:
        print(format_comparison(doc))
        if checking:
            print()
            print(format_check(doc["check"]))
    return EXIT_FAILURE if checking and not doc["check"]["passed"] else EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?", help="scenario TOML file or built-in name (default: workshop)")
    p.add_argument("--redis", type=redis_url, metavar="URL", help="Redis to run on (default: $REDIS_URL, else a throwaway "
                                                  "redis-server started for this command)")
    p.add_argument("--seed", type=nonneg_int, help="override the scenario's seed")
    p.add_argument("--jobs", type=pos_int, metavar="N", help="add only the first N jobs")
    p.add_argument("--drain-timeout", type=nonneg_float, metavar="S",
                   help="seconds to wait after the last arrival for jobs to settle; those left are reported per "
                        "queue and count as unfinished (default: from the model's settle time of the same run, "
                        "max(30, 1.5 x settle + 10))")
    p.add_argument("--keep", action="store_true", help="leave the run's keys (qsim-run-<hex>:*) in Redis")
    p.add_argument("--i-know-this-is-not-local", action="store_true",
                   help="allow a Redis that is not on this machine (a run adds and deletes many keys)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON document")


def register(sub: Any) -> None:
    """Add ``run`` and ``compare`` to the qsim command."""
    p = sub.add_parser("run", help="run a scenario on the real engine (spawns the pools) and print its Summary",
                       description="Run SCENARIO on the Redis engine in real time: worker processes per pool, "
                                   "the planned arrivals, real signals for events. Prints the same Summary as "
                                   "`qsim simulate`, measured.")
    _common(p)
    p.add_argument("--out", metavar="DIR", help="write jobs.csv, timeseries.csv, summary.json and PNG plots "
                   "(DIR is created if missing; its parent must exist)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("compare", help="model and engine side by side, with ratios; --check: a verdict",
                       description="Simulate SCENARIO and run it on the engine; print both Summaries and "
                                   "engine/model ratios. With --check, a verdict per quantity (p50/p95 wait "
                                   "and latency within 10%% or 20 ms, throughput within 3%%, dead, lost and "
                                   "unfinished exact) and exit code 1 when one is out of tolerance.",
                       epilog="Exit codes: 0 success (and, with --check, every quantity within tolerance), "
                              "1 out of tolerance or another failure, 2 bad input.")
    _common(p)
    p.add_argument("--check", action="store_true",
                   help="print a verdict table and exit 1 when a quantity is out of tolerance")
    p.add_argument("--tolerance", metavar="FILE",
                   help="TOML file overriding the tolerances per quantity (implies --check): "
                        "[\"wait.p95\"] rel = 0.15, abs = 0.05, check = true")
    p.set_defaults(func=cmd_compare)
