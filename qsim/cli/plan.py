"""``qsim plan``: simulate settings with replications and recommend the cheapest that meets the SLOs."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from qsim.cli.common import (EXIT_BAD_INPUT, EXIT_OK, Progress, add_redis_flags, err, load_scenario, seed_int,
                              parse_vary, pos_float, pos_int, print_json)
from qsim.cli.windows import apply_window
from qsim.errors import ScenarioError
from qsim.results.outpath import out_file

__all__ = ["register", "cmd_plan", "replications_arg", "confidence_arg"]

logger = logging.getLogger(__name__)


def replications_arg(text: str) -> int | str:
    """argparse type: a whole number >= 1, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 or auto, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 or auto, got {text!r}")
    return value


def confidence_arg(text: str) -> float:
    """argparse type: a number strictly between 0 and 1 (0.95 for 95 %)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (e.g. 0.95), got {text!r}")
    return value


def cmd_plan(args: argparse.Namespace) -> int:
    """Simulate the --vary settings and recommend the cheapest one that meets every --slo."""
    from qsim.analysis.plan import plan
    from qsim.analysis.plan.runner import connect_dask
    from qsim.analysis.slo.language import parse_slo

    scenario = apply_window(load_scenario(args.scenario), args.window)
    slos = [parse_slo(text) for text in args.slo]
    vary = parse_vary(args.vary)
    if args.plot is not None:
        out_file(args.plot, "--plot")  # before the runs: a path that cannot be written is refused first
    client = None
    if args.dask:
        try:
            client = connect_dask(args.dask)
        except (ImportError, OSError, ValueError) as e:
            err("plan", f"--dask: {e}")
            return EXIT_BAD_INPUT
    progress = Progress(f"plan {scenario.name}")
    try:
        result = plan(scenario, slos, vary, seed=args.seed, max_jobs=args.jobs, processes=args.processes,
                      replications=args.replications, confidence=args.confidence, search=args.search,
                      minimize=args.minimize, client=client, progress=progress, peak=args.peak,
                      redis_ceiling=args.redis_ceiling, redis_cpu_per_job_us=args.redis_cpu_per_job)
    finally:
        progress.close()
        if client is not None:
            client.close()
    if args.plot:
        from qsim.analysis.plots import plan_plot

        plan_plot(result).savefig(args.plot, dpi=100)
        logger.info("wrote %s", args.plot)
    for warning in result.get("warnings", []):
        err("plan", f"warning: {warning}")
    if args.json:
        print_json(result)
    else:
        print(f"scenario {scenario.name}")
        print(result.table())
        if args.plot:
            print(f"plot: {args.plot}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``plan`` to the qsim command."""
    p = sub.add_parser(
        "plan", help="simulate settings (with replications) and recommend the cheapest meeting the SLOs",
        description="Simulate SCENARIO at every combination of the --vary values (or search them), each "
                    "--replications times with seeds SEED, SEED+1, ... (the same at every point), and recommend "
                    "the cheapest point whose confidence interval meets every --slo (the upper bound for <=, "
                    "the lower for >=). Cheapest: by --minimize, else the first in ascending order.")
    p.add_argument("scenario", help="scenario TOML file or built-in name")
    p.add_argument("--slo", action="append", required=True, metavar="EXPR",
                   help="objective like p95_wait<=2, p99_latency[cut]<5, utilization<=0.8; over the run's windows: "
                        "'p95_wait<=2 in 95%% of windows' or 'p95_wait<=2 in every window' (repeatable)")
    p.add_argument("--vary", action="append", required=True, metavar="PATH=VALUES",
                   help="e.g. pools.craftsmen.concurrency=1:64, pools.p.workers=1,2,4 (repeatable: a grid)")
    p.add_argument("--replications", type=replications_arg, default=1, metavar="R|auto",
                   help="runs per point (default 1); auto: 5, then 5 more where an interval straddles an SLO, "
                        "up to 40 per point")
    p.add_argument("--confidence", type=confidence_arg, default=0.95, metavar="C",
                   help="of the two-sided t-intervals over replications (default 0.95)")
    p.add_argument("--search", choices=("grid", "auto"), default="grid",
                   help="grid: every point; auto: bisection along workers/concurrency/rates (monotone), "
                        "~10 points for 1:512 (default grid)")
    p.add_argument("--minimize", "--cost", dest="minimize", metavar="EXPR",
                   help="cost over the varied parameters, e.g. 'workers*concurrency' or "
                        "'workers*0.05 + concurrency*0.01': recommend the cheapest point meeting the SLOs, "
                        "list the next two")
    p.add_argument("--dask", metavar="tcp://HOST:PORT", help="run the points on this Dask scheduler's cluster "
                   "(needs qsim[dask]; default: a local process pool)")
    p.add_argument("--plot", metavar="FILE.png", help="write a PNG: the first SLO's metric per point with its "
                   "interval, the SLO line, the recommendation (its folder must exist)")
    p.add_argument("--window", type=pos_float, metavar="S",
                   help="length of the windows the windowed SLOs judge (default: the scenario's window, else 60)")
    p.add_argument("--peak", type=pos_float, default=3600.0, metavar="S",
                   help="over a rate profile: the length of the peak period whose windows are also judged alone "
                        "(default 3600: the peak hour)")
    add_redis_flags(p)
    p.add_argument("--seed", type=seed_int, help="replication r uses SEED + r (default: the scenario's seed)")
    p.add_argument("--jobs", type=pos_int, metavar="N", help="stop arrivals after N jobs in each run")
    p.add_argument("--processes", type=pos_int, metavar="N", help="parallel runs (default: every core)")
    p.add_argument("--json", action="store_true",
                   help="print {points: [{params, summary, meets_slo, replications, ci, ...}], recommended, redis: "
                        "{cpu_per_job_us, utilization, ...}, warnings} as JSON")
    p.set_defaults(func=cmd_plan)
