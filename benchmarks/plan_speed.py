"""Plan speed: grid sweep against bisection on a 1..512 range, and the local pool against Dask.

The plan: M/M/c at lambda = 200 jobs/s of 1 s jobs (so about 200 slots are
needed) over ``pools.p.concurrency = 1:512``, SLO ``p95_wait<=0.1``, with
``--replications`` runs per point (seeds seed..seed+R-1 at every point).

1. **grid vs search**: ``search="grid"`` simulates all 512 points,
   ``search="auto"`` bisects; printed: points and runs simulated, median wall
   time over ``--runs`` rounds, and the ratio to the grid. Both must give the
   same recommendation.
2. **local pool vs Dask**: the same grid plan on a smaller range
   (``--dask-range``, default 150:300) on the local process pool (every core)
   and on a ``distributed.LocalCluster`` with as many worker processes (one
   thread each), started once outside the timing. Same recommendation, same
   figures; the ratio shows Dask's overhead per task on one machine (its
   point is a cluster of many).

The contenders alternate within each round (the machine is shared and noisy);
ratios are medians of the per-round ratios.

Usage: ``python benchmarks/plan_speed.py [--runs 3] [--replications 3] [--duration 30] [--no-dask]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qsim import Scenario  # noqa: E402
from qsim.analysis.plan import plan
from qsim.analysis.plan.sweep import parse_values  # noqa: E402
from qsim.analysis.slo.language import parse_slo  # noqa: E402

RATE, MEAN, SLO = 200.0, 1.0, "p95_wait<=0.1"
PATH = "pools.p.concurrency"


def scenario(duration: float) -> Scenario:
    return Scenario.from_dict({
        "name": "plan-bench", "seed": 1, "duration": duration, "warmup": duration / 6,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": RATE},
                  "service": {"kind": "exponential", "mean": MEAN}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 1}],
    })


def timed(fn: Callable[[], dict[str, Any]]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def compare(label: str, contenders: dict[str, Callable[[], dict[str, Any]]], runs: int) -> None:
    names = list(contenders)
    times: dict[str, list[float]] = {n: [] for n in names}
    results: dict[str, dict[str, Any]] = {}
    for _ in range(runs):
        for name in names:
            seconds, results[name] = timed(contenders[name])
            times[name].append(seconds)
    base = names[0]
    answers = {n: results[n]["recommended"] for n in names}
    print(f"\n{label}")
    print(f"{'':<22}{'points':>8}{'runs':>8}{'wall s (median)':>17}{'ratio':>8}  recommended")
    for name in names:
        r = results[name]
        ratio = statistics.median(t / b for t, b in zip(times[name], times[base]))
        print(f"{name:<22}{r['search']['points_simulated']:>8}{r['search']['runs']:>8}"
              f"{statistics.median(times[name]):>17.2f}{ratio:>8.3f}  {answers[name]}")
    same = len({str(a) for a in answers.values()}) == 1
    print("same recommendation: " + ("yes" if same else f"NO: {answers}"))
    if not same:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="rounds (medians are over these)")
    parser.add_argument("--replications", type=int, default=3)
    parser.add_argument("--duration", type=float, default=30.0, help="simulated seconds per run")
    parser.add_argument("--dask-range", default="150:300", help="concurrency values of the Dask comparison")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask comparison")
    args = parser.parse_args()
    s = scenario(args.duration)
    slos = [parse_slo(SLO)]
    cores = os.cpu_count() or 1
    print(f"M/M/c lambda={RATE:g}/s mean={MEAN:g}s, {args.duration:g} s runs (~{RATE * args.duration:,.0f} jobs), "
          f"SLO {SLO}, {args.replications} replications, {cores} cores, {args.runs} rounds")

    full = {PATH: list(range(1, 513))}
    compare(f"grid vs search over {PATH} = 1:512", {
        "grid (every point)": lambda: plan(s, slos, full, replications=args.replications),
        "search=auto (bisect)": lambda: plan(s, slos, full, replications=args.replications, search="auto"),
    }, args.runs)

    if args.no_dask:
        return
    from distributed import Client, LocalCluster

    part = {PATH: parse_values(args.dask_range)}
    with LocalCluster(n_workers=cores, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.submit(sum, [1]).result()  # workers up before timing
        compare(f"local pool vs Dask LocalCluster ({cores} worker processes), grid over {PATH} = {args.dask_range}", {
            f"local pool ({cores} proc)": lambda: plan(s, slos, part, replications=args.replications),
            "Dask LocalCluster": lambda: plan(s, slos, part, replications=args.replications, client=client),
        }, args.runs)


if __name__ == "__main__":
    main()
