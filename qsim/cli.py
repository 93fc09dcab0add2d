"""The ``qsim`` command.

Exit codes: 0 success, 2 bad input (scenario, arguments) with a message naming
what is wrong, 1 any other failure. ``--json`` prints exactly one JSON document
on stdout; logs and progress go to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from qsim.errors import QsimError, ScenarioError, TheoryNotApplicable
from qsim.records import Records
from qsim.scenario import Scenario
from qsim.scenarios import load as load_scenario

__all__ = ["main", "build_parser", "load_scenario", "nonneg_int", "pos_int", "Progress", "print_json",
           "format_summary", "write_outputs"]

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


# --------------------------------------------------------------------------- progress


class Progress:
    """A progress bar on stderr that shows up only once a run has lasted ``after`` seconds.

    On a terminal it redraws one line; elsewhere (CI logs) it prints a line every 10%.
    """

    def __init__(self, label: str, *, after: float = 2.0, stream: TextIO | None = None) -> None:
        self.label, self.after = label, after
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self.shown = False
        self.last_decile = -1

    def __call__(self, fraction: float) -> None:
        elapsed = time.monotonic() - self.t0
        if elapsed < self.after:
            return
        fraction = min(max(fraction, 0.0), 1.0)
        self.shown = True
        if self.tty:
            bar = "#" * int(30 * fraction)
            self.stream.write(f"\r{self.label} [{bar:<30}] {fraction:6.1%} {elapsed:6.1f}s")
            self.stream.flush()
        elif int(fraction * 10) > self.last_decile:
            self.last_decile = int(fraction * 10)
            self.stream.write(f"{self.label}: {fraction:.0%} after {elapsed:.1f}s\n")

    def close(self) -> None:
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------- output


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isinf(x):
            return "inf"
        return f"{x:.4g}{unit}"
    return f"{x}{unit}"


def format_summary(summary: dict[str, Any]) -> str:
    """A readable table of a Summary."""
    jobs = summary["jobs"]
    lines = [
        f"scenario {summary['scenario']}  source {summary['source']}  seed {summary['seed']}",
        "jobs     " + "  ".join(f"{k} {v}" for k, v in jobs.items()),
        f"throughput {_fmt(summary['throughput'])} jobs/s   utilization {_fmt(summary['utilization'])}",
        "",
        f"{'':<24}{'mean':>10}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}",
    ]

    def row(label: str, s: dict[str, Any]) -> str:
        return f"{label:<24}" + "".join(f"{_fmt(s.get(k)):>10}" for k in ("mean", "p50", "p95", "p99", "max"))

    lines.append(row("wait (s)", summary["wait"]))
    lines.append(row("latency (s)", summary["latency"]))
    for name, t in summary["by_type"].items():
        lines.append(row(f"  {name} wait", t["wait"]))
        lines.append(row(f"  {name} latency", t["latency"]))
    lines.append("")
    lines.append(f"{'queue':<24}{'completed':>10}{'dead':>10}{'max_depth':>10}{'p95 wait':>10}")
    for name, q in summary["by_queue"].items():
        lines.append(f"{name:<24}{q['completed']:>10}{q['dead']:>10}{q['max_depth']:>10}{_fmt(q['wait']['p95']):>10}")
    return "\n".join(lines)


def format_theory(result: dict[str, Any]) -> str:
    """A readable table of a closed-form prediction."""
    lines = [
        f"scenario {result['scenario']}  model {result['model']}",
        f"c {result['c']}  lambda {_fmt(result['lambda'])}/s  mean service {_fmt(result['mean_service'])} s  "
        f"rho {_fmt(result['rho'])}  P(wait) {_fmt(result.get('p_wait'))}",
        "wait (s)    " + "  ".join(f"{k} {_fmt(v)}" for k, v in result["wait"].items()),
        "latency (s) " + "  ".join(f"{k} {_fmt(v)}" for k, v in result["latency"].items() if v is not None),
    ]
    for name, t in result.get("by_type", {}).items():
        lines.append(f"  {name}: wait mean {_fmt(t['wait']['mean'])} s")
    lines += [f"note: {n}" for n in result.get("notes", [])]
    return "\n".join(lines)


def print_json(doc: Any) -> None:
    """Exactly one JSON document on stdout (NaN/inf become null)."""
    json.dump(_finite(doc), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


# --------------------------------------------------------------------------- commands


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run the model on a scenario and print its Summary."""
    from qsim.model import simulate

    scenario = load_scenario(args.scenario)
    progress = Progress(f"simulate {scenario.name}")
    try:
        result = simulate(scenario, seed=args.seed, max_jobs=args.jobs, progress=progress)
    finally:
        progress.close()
    if args.out:
        write_outputs(Path(args.out), result.records.jobs, result.timeseries, result.summary, scenario,
                      result.records)
    if args.json:
        print_json(result.summary)
    else:
        print(format_summary(result.summary))
        if args.out:
            print(f"\nwrote {args.out}/: jobs.csv timeseries.csv summary.json queue_depth.png wait_distribution.png")
    return EXIT_OK


def write_outputs(out: Path, jobs: Any, timeseries: Any, summary: dict[str, Any], scenario: Scenario,
                  records: Records | None = None) -> None:
    """jobs.csv, attempts.csv, drains.csv (when processes were stopped), timeseries.csv,
    summary.json and the PNG plots into ``out``."""
    from qsim.analysis import plots

    out.mkdir(parents=True, exist_ok=True)
    jobs.to_csv(out / "jobs.csv", index=False)
    if records is not None:
        records.attempts.to_csv(out / "attempts.csv", index=False)
        drains = records.extra.get("drains")
        if drains is not None and len(drains):
            drains.to_csv(out / "drains.csv", index=False)
    timeseries.to_csv(out / "timeseries.csv", index=False)
    (out / "summary.json").write_text(json.dumps(_finite(summary), indent=2, allow_nan=False) + "\n")
    plots.queue_depth(timeseries, title=f"{scenario.name}: queue depth").savefig(out / "queue_depth.png", dpi=100)
    plots.wait_distribution(jobs, warmup=scenario.warmup, title=f"{scenario.name}: wait time").savefig(
        out / "wait_distribution.png", dpi=100)


def cmd_theory(args: argparse.Namespace) -> int:
    """Print the closed-form prediction for a scenario, or say why none applies."""
    from qsim.analysis.theory import predict

    result = predict(load_scenario(args.scenario)).to_dict()
    if args.json:
        print_json(result)
    else:
        print(format_theory(result))
    return EXIT_OK


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
              + f"{_fmt(s['wait']['p95']):>10}{_fmt(s['latency']['p95']):>12}{_fmt(s['utilization']):>7}"
              + f"  {'yes' if point['meets_slo'] else 'no'}")
    best = result["recommended"]
    print("recommended: " + (", ".join(f"{k} = {v}" for k, v in best.items()) if best else
                             "none of these values meets the SLO"))
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def pos_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = nonneg_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``qsim`` command."""
    parser = argparse.ArgumentParser(
        prog="qsim", description="Plan and load-test Redis-backed job queues.",
        epilog="Exit codes: 0 success, 2 bad input, 1 other failure.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", help="run the model on a scenario (default: the built-in workshop)",
                       description="Run the SimPy model on SCENARIO (a TOML file or a built-in name; "
                                   "none = the built-in 'workshop') and print its Summary.")
    p.add_argument("scenario", nargs="?", help="scenario TOML file or built-in name (default: workshop)")
    p.add_argument("--seed", type=nonneg_int, help="override the scenario's seed")
    p.add_argument("--jobs", type=pos_int, metavar="N", help="stop arrivals after N jobs")
    p.add_argument("--json", action="store_true", help="print exactly the Summary as JSON")
    p.add_argument("--out", metavar="DIR", help="write jobs.csv, timeseries.csv, summary.json and PNG plots")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("theory", help="closed-form prediction (Erlang C, Allen-Cunneen, Cobham)",
                       description="Print what queueing theory predicts for SCENARIO, or say why no closed form applies.")
    p.add_argument("scenario", help="scenario TOML file or built-in name")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")
    p.set_defaults(func=cmd_theory)

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

    for register in _plugins():
        register(sub)
    return parser


def _plugins() -> list[Callable[[Any], None]]:
    """Subcommands that live beside their part of qsim (engine, harness)."""
    found = []
    for module in ("qsim.worker_cli", "qsim.run_cli"):
        try:
            mod = __import__(module, fromlist=["register"])
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue
        found.append(mod.register)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qsim`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except (ScenarioError, TheoryNotApplicable) as e:
        print(f"qsim {args.command}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except QsimError as e:
        print(f"qsim {args.command}: {e}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"qsim {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (| head): not an error worth a traceback
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
