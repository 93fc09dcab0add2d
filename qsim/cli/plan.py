"""``qsim plan``: sweep the model and recommend the smallest setting that meets the SLOs."""

from __future__ import annotations

import argparse
from typing import Any

from qsim.cli.common import EXIT_OK, Progress, fmt, load_scenario, nonneg_int, pos_int, print_json
from qsim.errors import ScenarioError

__all__ = ["register", "cmd_plan"]


def cmd_plan(args: argparse.Namespace) -> int:
    """Sweep the model and recommend the smallest setting that meets the SLOs."""
    from qsim.analysis.plan import parse_slo, plan
    from qsim.analysis.sweep import parse_values

    scenario = load_scenario(args.scenario)
    slos = [parse_slo(text) for text in args.slo]
    vary: dict[str, list[float | int]] = {}
    for item in args.vary:
        path, sep, values = item.partition("=")
        if not sep or not path:
            raise ScenarioError(f"--vary must look like pools.NAME.concurrency=1:64, got {item!r}")
        vary[path.strip()] = parse_values(values)
    progress = Progress(f"plan {scenario.name}")
    try:
        result = plan(scenario, slos, vary, seed=args.seed, max_jobs=args.jobs, processes=args.processes,
                      progress=progress)
    finally:
        progress.close()
    if args.json:
        print_json(result)
        return EXIT_OK
    paths = list(vary)
    widths = [len(p) + 2 for p in paths]
    print(f"scenario {scenario.name}  SLO {' and '.join(result['slo'])}")
    print("".join(f"{p:>{w}}" for p, w in zip(paths, widths)) + f"{'p95 wait':>10}{'p95 latency':>12}{'util':>7}  meets")
    for point in result["points"]:
        s = point["summary"]
        print("".join(f"{point['params'][p]:>{w}}" for p, w in zip(paths, widths))
              + f"{fmt(s['wait']['p95']):>10}{fmt(s['latency']['p95']):>12}{fmt(s['utilization']):>7}"
              + f"  {'yes' if point['meets_slo'] else 'no'}")
    best = result["recommended"]
    print("recommended: " + (", ".join(f"{k} = {v}" for k, v in best.items()) if best else
                             "none of these values meets the SLO"))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``plan`` to the qsim command."""
    p = sub.add_parser("plan", help="sweep the model; recommend the smallest setting meeting an SLO",
                       description="Simulate SCENARIO for every combination of the --vary values (on every "
                                   "core) and recommend the first, in ascending order, that meets every --slo.")
    p.add_argument("scenario", help="scenario TOML file or built-in name")
    p.add_argument("--slo", action="append", required=True, metavar="EXPR",
                   help="objective like p95_wait<=2, p99_latency[cut]<5, utilization<=0.8 (repeatable)")
    p.add_argument("--vary", action="append", required=True, metavar="PATH=VALUES",
                   help="e.g. pools.craftsmen.concurrency=1:64, pools.p.workers=1,2,4 (repeatable: a grid)")
    p.add_argument("--seed", type=nonneg_int, help="override the scenario's seed")
    p.add_argument("--jobs", type=pos_int, metavar="N", help="stop arrivals after N jobs in each run")
    p.add_argument("--processes", type=pos_int, metavar="N", help="parallel runs (default: every core)")
    p.add_argument("--json", action="store_true", help="print {points, recommended} as JSON")
    p.set_defaults(func=cmd_plan)
