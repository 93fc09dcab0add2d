"""``qsim simulate`` (the model on a scenario) and ``qsim theory`` (the closed forms)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qsim.cli.common import EXIT_OK, Progress, int_at_least, load_scenario, seed_int, pos_int, print_json
from qsim.cli.output import format_summary, format_theory, write_outputs
from qsim.cli.windows import add_window_args, apply_window, format_windows, write_windows
from qsim.errors import TheoryNotApplicable, UsageError
from qsim.results.outpath import out_dir

__all__ = ["register", "cmd_simulate", "cmd_theory", "replications_arg"]


def replications_arg(text: str) -> int:
    """argparse type of ``simulate --replications``: an integer >= 2 (a band needs several runs)."""
    return int_at_least(text, 2, " (a band needs several runs)")


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run the model on a scenario and print its Summary."""
    from qsim.model import simulate, simulate_replications

    scenario = apply_window(load_scenario(args.scenario), args.window)
    if args.arrivals is not None:
        from qsim.spec.arrival_trace import replay_arrivals

        mode, path = args.arrivals
        if mode != "trace":
            raise UsageError(f"--arrivals {mode!r}: the mode is trace (--arrivals trace FILE)")
        scenario = replay_arrivals(scenario, path)
    if args.out is not None:
        out_dir(args.out, "--out")  # before the run: a path that cannot be written is refused first
    recommend = None
    if any(a.policy == "qsim" or a.metric == "recommended_workers" for a in scenario.autoscalers):
        from qsim.advise.load import advisors

        recommend = advisors(scenario)
    n = args.replications
    progress = Progress(f"simulate {scenario.name}" + (f" ({n} replications)" if n else ""))
    try:
        if n:
            result = simulate_replications(scenario, n, seed=args.seed, max_jobs=args.jobs, progress=progress,
                                           recommend=recommend)
        else:
            result = simulate(scenario, seed=args.seed, max_jobs=args.jobs, progress=progress, recommend=recommend)
    finally:
        progress.close()
    if args.out:
        assert result.records is not None  # simulate() keeps the records unless records=False
        write_outputs(Path(args.out), result.records.jobs, result.timeseries, result.summary, scenario,
                      result.records)
        write_windows(Path(args.out), {"model": result.summary}, scenario)
    if args.json:
        print_json(result.summary)
    else:
        print(format_summary(result.summary))
        if args.windows:
            print()
            print(format_windows(result.summary, replications=n))
        if scenario.engine.overhead_by_load:  # which row of the table the model applied
            from qsim.spec.offered_load import engine_overhead

            o = engine_overhead(scenario)
            print(f"\nengine overhead: fetch {o.fetch * 1e3:.3g} ms + ack {o.ack * 1e3:.3g} ms per attempt, "
                  f"{o.source}")
        if args.out:
            print(f"\nwrote {args.out}/: jobs.csv timeseries.csv summary.json windows.csv queue_depth.png "
                  "wait_distribution.png windows.png")
    return EXIT_OK


def cmd_theory(args: argparse.Namespace) -> int:
    """Print the closed-form prediction for a scenario, or say why none applies."""
    from qsim.analysis.theory import predict

    scenario = load_scenario(args.scenario)
    try:
        result = predict(scenario).to_dict()
    except TheoryNotApplicable as e:
        if args.json:  # a document on stdout too; the one line on stderr and exit 2 stay (qsim.cli.main)
            print_json({"scenario": scenario.name, "source": "theory", "applicable": False, "reason": str(e)})
        raise
    if args.json:
        print_json(result)
    else:
        print(format_theory(result))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``simulate`` and ``theory`` to the qsim command."""
    p = sub.add_parser("simulate", help="run the model on a scenario (default: the built-in workshop)",
                       description="Run the SimPy model on SCENARIO (a TOML file or a built-in name; "
                                   "none = the built-in 'workshop') and print its Summary.")
    p.add_argument("scenario", nargs="?", help="scenario TOML file or built-in name (default: workshop)")
    p.add_argument("--seed", type=seed_int, help="override the scenario's seed")
    p.add_argument("--jobs", type=pos_int, metavar="N", help="stop arrivals after N jobs")
    p.add_argument("--json", action="store_true", help="print exactly the Summary as JSON")
    p.add_argument("--replications", type=replications_arg, metavar="N",
                   help="run N >= 2 replications (seeds SEED, SEED+1, ...): the Summary is the first one's, each "
                        "window gains bands, the 5-95%% range over the replications of its p95 and mean wait")
    p.add_argument("--arrivals", nargs=2, metavar=("trace", "FILE"),
                   help="replay measured arrivals instead of drawing them: FILE is a CSV with the columns type and "
                        "enqueued (the jobs.csv --out writes) or a JSON list of {type, enqueued}; seconds of the run, "
                        "or from the first arrival when they do not fit in it")
    p.add_argument("--out", metavar="DIR", help="write jobs.csv, timeseries.csv, summary.json, windows.csv and "
                                                "PNG plots (DIR is created if missing; its parent must exist)")
    add_window_args(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("theory", help="closed-form prediction (Erlang C, Allen-Cunneen, Cobham)",
                       description="Print what queueing theory predicts for SCENARIO, or say why no closed form "
                                   "applies (exit 2).")
    p.add_argument("scenario", help="scenario TOML file or built-in name")
    p.add_argument("--json", action="store_true",
                   help="print the prediction as JSON: {scenario, source, model, c, lambda, mu, rho, p_wait, wait, "
                        "latency, by_type, notes, ...}; where no closed form applies (still exit 2, the reason also "
                        "on stderr): {scenario, source, applicable: false, reason}")
    p.set_defaults(func=cmd_theory)
