"""``qsim run`` and ``qsim compare``: a scenario on the real engine, and beside the model.

Redis: ``--redis URL``, else ``$REDIS_URL``, else a throwaway ``redis-server``
that qsim starts on a free port for the length of the command (nothing
existing is touched). A Redis that is not on this machine is refused unless
``--i-know-this-is-not-local`` is given: a run adds and deletes many keys.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qsim.cli.common import (EXIT_FAILURE, EXIT_OK, Progress, finite, load_scenario, nonneg_float, seed_int,
                              pos_int, print_json, redis_url, resolve_redis_url)
from qsim.cli.output import format_check, format_comparison, format_summary, write_outputs
from qsim.cli.windows import (add_window_args, apply_window, format_window_comparison, format_windows,
                              write_windows)
from qsim.results.outpath import out_dir

__all__ = ["register", "redis_for", "cmd_run", "cmd_compare", "worker_command"]


@contextlib.contextmanager
def redis_for(args: argparse.Namespace) -> Iterator[str]:
    """The Redis URL to run against, starting a throwaway server when none is given.

    Raises:
        UsageError: the URL (``--redis`` or ``$REDIS_URL``) is malformed, or not local and not confirmed.
    """
    url = resolve_redis_url(args.redis) if args.redis or os.environ.get("REDIS_URL") else None
    if url:
        from qsim.engine.safety import require_local_or_confirmed

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
        recommend = None
        if scenario.autoscalers:
            from qsim.advise.load import advisors

            recommend = advisors(scenario) or None
        return run_scenario(scenario, url, seed=args.seed, max_jobs=args.jobs, drain_timeout=args.drain_timeout,
                            progress=progress, keep=args.keep, recommend=recommend)
    finally:
        progress.close()


def cmd_run(args: argparse.Namespace) -> int:
    """Run a scenario on the engine and print the measured Summary."""
    from qsim.harness.run import check_supported

    scenario = apply_window(load_scenario(args.scenario), args.window)
    check_supported(scenario)  # bad input is refused before any process starts
    if args.out is not None:
        out_dir(args.out, "--out")
    with redis_for(args) as url:
        result = _engine(args, scenario, url)
    if args.out:
        write_outputs(Path(args.out), result.jobs, result.timeseries, result.summary, scenario, result.records)
        write_windows(Path(args.out), {"engine": result.summary}, scenario)
    if args.json:
        print_json(result.summary)
    else:
        print(format_summary(result.summary))
        if args.windows:
            print()
            print(format_windows(result.summary))
    return EXIT_OK


def _compare_bullmq(args: argparse.Namespace, scenario: Any) -> Any:
    """``--target bullmq``: the model beside the BullMQ workers that run on ``--redis``."""
    from qsim.bullmq.compare import check_workers, compare_bullmq, queue_map
    from qsim.bullmq.options import check_supported
    from qsim.engine.safety import require_local_or_confirmed
    from qsim.errors import ScenarioError

    check_supported(scenario, compare=True)
    command = worker_command(args.worker_command)
    check_workers(scenario, command)  # an autoscaled scenario needs the command; its metrics must be BullMQ's
    queue_map(scenario, args.queue or [])  # bad --queue values are refused before anything runs
    url = resolve_redis_url(args.redis) if args.redis or os.environ.get("REDIS_URL") else None
    if not url:
        raise ScenarioError("--target bullmq needs --redis URL (or $REDIS_URL): the Redis your BullMQ workers use")
    require_local_or_confirmed(url, args.i_know_this_is_not_local)
    progress = Progress(f"compare {scenario.name} (model, then BullMQ)")
    try:
        return compare_bullmq(scenario, url, queues=args.queue, prefix=args.prefix or "bull", seed=args.seed,
                              max_jobs=args.jobs, drain_timeout=args.drain_timeout, progress=progress,
                              worker_command=command)
    finally:
        progress.close()


def worker_command(text: str | None) -> list[str] | None:
    """``--worker-command``'s value split as a POSIX shell would (None: not given).

    Raises:
        UsageError: An empty command, or one a shell could not split (an unclosed quote).
    """
    if text is None:
        return None
    import shlex

    from qsim.errors import UsageError

    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"--worker-command {text!r}: {e}") from None
    if not argv:
        raise UsageError("--worker-command is empty: give the command that runs one BullMQ worker, e.g. "
                         "'node worker.js'")
    return argv


def cmd_compare(args: argparse.Namespace) -> int:
    """Run the model and the engine (or BullMQ) on one scenario and print both with their ratios; with
    ``--check``, the verdict per quantity (and per ``--slo``), and exit 1 when one is out of tolerance
    (or the measured run misses an SLO)."""
    from qsim.advise.load import advisors
    from qsim.analysis.fidelity.check import check, check_document, judge_slos, load_tolerances, quantities_of
    from qsim.analysis.fidelity.compare import compare
    from qsim.analysis.slo.language import parse_slo
    from qsim.harness.run import check_supported

    scenario = apply_window(load_scenario(args.scenario), args.window)
    if args.target == "qsim":
        if args.queue or args.prefix:
            from qsim.errors import ScenarioError

            raise ScenarioError("--queue and --prefix name BullMQ queues: use them with --target bullmq")
        if args.worker_command is not None:
            from qsim.errors import ScenarioError

            raise ScenarioError("--worker-command starts BullMQ workers: use it with --target bullmq (qsim's "
                                "engine runs its own pool workers)")
        check_supported(scenario)
    if args.out is not None:
        out_dir(args.out, "--out")  # before anything runs: a path that cannot be written is refused first
    slos = [parse_slo(text) for text in args.slo or []]
    checking = args.check or args.tolerance is not None or bool(slos)
    # a bad tolerance file is refused (exit 2) before anything runs
    tolerances = load_tolerances(args.tolerance, quantities_of(scenario)) if args.tolerance is not None else None
    if args.target == "bullmq":
        doc = _compare_bullmq(args, scenario)
    else:
        with redis_for(args) as url:
            progress = Progress(f"compare {scenario.name} (model, then the engine)")
            try:
                doc = compare(scenario, url, seed=args.seed, max_jobs=args.jobs, drain_timeout=args.drain_timeout,
                              progress=progress, keep=args.keep, advisors=advisors)
            finally:
                progress.close()
    if checking:
        doc["check"] = check_document(check(doc["model"], doc["engine"], tolerances, scenario=scenario,
                                            band_replications=int((doc.get("bands") or {}).get("replications", 0))),
                                      judge_slos(slos, doc["model"], doc["engine"]))
    if args.out:
        write_windows(Path(args.out), {"model": doc["model"], "engine": doc["engine"]}, scenario)
        for pool in doc.get("autoscaling") or {}:
            from qsim.analysis.autoscaling.plots import autoscaling_plot

            slo = next((x.value for x in slos if x.metric == "p95_wait"), None)
            autoscaling_plot({"model": doc["model"], "engine": doc["engine"]}, pool, slo=slo,
                             title=f"{scenario.name}: {pool}, model beside engine").savefig(
                Path(args.out) / f"autoscaling_{pool}.png", dpi=100)
        (Path(args.out) / "comparison.json").write_text(json.dumps(finite(doc), indent=2, allow_nan=False) + "\n")
    if args.json:
        print_json(doc)
    else:
        print(format_comparison(doc))
        if doc.get("autoscaling"):
            from qsim.analysis.fidelity.autoscaling import format_agreement

            print()
            print(format_agreement(doc["autoscaling"]))
        if args.windows:
            print()
            print(format_window_comparison(doc["model"], doc["engine"]))
        if checking:
            print()
            print(format_check(doc["check"], side=str(doc["engine"].get("source") or "engine")))
    return EXIT_FAILURE if checking and not doc["check"]["passed"] else EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", nargs="?", help="scenario TOML file or built-in name (default: workshop)")
    p.add_argument("--redis", type=redis_url, metavar="URL",
                   help="Redis to run on (default: $REDIS_URL, else a throwaway redis-server started for this "
                        "command)")
    p.add_argument("--seed", type=seed_int, help="override the scenario's seed")
    p.add_argument("--jobs", type=pos_int, metavar="N", help="add only the first N jobs")
    p.add_argument("--drain-timeout", type=nonneg_float, metavar="S",
                   help="seconds to wait after the last arrival for jobs to settle; those left are reported per "
                        "queue and count as unfinished (default: from the model's settle time of the same run, "
                        "max(30, 1.5 x settle + 10))")
    p.add_argument("--keep", action="store_true", help="leave the run's keys (qsim-run-<hex>:*) in Redis")
    p.add_argument("--i-know-this-is-not-local", action="store_true",
                   help="allow a Redis that is not on this machine (a run adds and deletes many keys)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON document")
    add_window_args(p)


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
                                   "and latency within 10% or 20 ms, throughput within 3%, dead, lost and "
                                   "unfinished exact) and exit code 1 when one is out of tolerance.",
                       epilog="Exit codes: 0 success (and, with --check, every quantity within tolerance), "
                              "1 out of tolerance or another failure, 2 bad input.")
    _common(p)
    p.add_argument("--check", action="store_true",
                   help="print a verdict table and exit 1 when a quantity is out of tolerance")
    p.add_argument("--tolerance", metavar="FILE",
                   help="TOML file overriding the tolerances per quantity (implies --check): "
                        "[\"wait.p95\"] rel = 0.15, abs = 0.05, check = true")
    p.add_argument("--target", choices=("qsim", "bullmq"), default="qsim",
                   help="what the model is compared with: qsim's engine (default: it starts the scenario's pools) "
                        "or bullmq (the scenario's arrivals go into BullMQ queues on --redis, where your BullMQ "
                        "workers run)")
    p.add_argument("--queue", action="append", metavar="Q",
                   help="with --target bullmq: the BullMQ queue (repeat for several: SCENARIO_QUEUE=BULLMQ_QUEUE, "
                        "or a scenario queue's own name)")
    p.add_argument("--prefix", metavar="P", help="with --target bullmq: BullMQ's key prefix (default bull)")
    p.add_argument("--worker-command", metavar="CMD",
                   help="with --target bullmq: qsim starts the workers, each pool's processes running CMD (e.g. "
                        "'node worker.js'; told REDIS_URL, QSIM_QUEUE, QSIM_QUEUES, QSIM_PREFIX, QSIM_CONCURRENCY, "
                        "QSIM_POOL, QSIM_WORKER_ID and QSIM_GRACE in its environment), and scales the pools "
                        "that have [[autoscalers]] with the model's controller on the queue's BullMQ keys "
                        "(needed for an autoscaled scenario)")
    p.add_argument("--slo", action="append", metavar="EXPR",
                   help="an objective the engine's run must meet (implies --check; repeatable): p95_wait<=2, "
                        "'p95_wait<=2 in 95%% of windows', 'p95_wait<=2 in every window'")
    p.add_argument("--out", metavar="DIR", help="write comparison.json, windows.csv and windows.png (rate, depth "
                                                "and p95 wait over time, model beside engine; DIR is created if "
                                                "missing, its parent must exist)")
    p.set_defaults(func=cmd_compare)
