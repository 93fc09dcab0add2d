"""Model speed benchmark: qsim's model against the idiomatic SimPy pattern, same run.

M/M/c with c = 10 and rho = 0.8 (lambda = 8/s, mean service 1 s), 10^6 jobs
by default. Printed for each contender: median wall time over ``--runs``
rounds, simulated jobs per second and peak memory (tracemalloc, one extra
run each), and the ratio to the idiomatic pattern. The contenders run in
turn within each round (the machine is shared and noisy), and the headline
ratio is the median of the per-round ratios.

- ``qsim simulate(records=False)``: end to end (draws, run, Summary), keeping
  only streamed statistics — what sweeps use;
- ``qsim simulate(records=True)``: end to end with the per-job records
  (jobs DataFrame, attempts) and the Summary computed from them;
- the idiomatic pattern SimPy's documentation teaches: one process per job
  that requests a ``simpy.Resource`` of capacity c, fed the same arrival and
  service samples, computing the mean wait (less work than a Summary).

Then peak memory at ``--jobs / 10`` and ``--jobs`` jobs with records on and
off: records=False stays nearly flat (what remains O(jobs) is the drawn jobs
and the job-table columns dispatch reads, see :mod:`qsim.model.recordless`).

Usage: ``python benchmarks/model_speed.py [--jobs 1000000] [--runs 3] [--baseline-jobs N]``
(``--baseline-jobs`` runs the idiomatic pattern on fewer jobs, reported per
job: its cost is linear in the number of jobs).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qsim import Scenario  # noqa: E402
from qsim.model import draw_jobs, simulate  # noqa: E402
from qsim.summary import STREAM_REL_ERROR  # noqa: E402

C, LAM, MEAN = 10, 8.0, 1.0


def scenario(jobs: int) -> Scenario:
    return Scenario.from_dict({
        "name": "mmc-bench", "seed": 1, "duration": jobs / LAM * 1.05,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": LAM},
                  "service": {"kind": "exponential", "mean": MEAN}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": C, "concurrency": 1}],
    })


def idiomatic(times: np.ndarray, services: np.ndarray) -> float:
    """One SimPy process per job on a ``simpy.Resource``; returns the mean wait."""
    env = simpy.Environment()
    servers = simpy.Resource(env, capacity=C)
    waits: list[float] = []

    def job(arrival: float, service: float) -> Any:
        with servers.request() as req:
            yield req
            waits.append(env.now - arrival)
            yield env.timeout(service)

    def source() -> Any:
        for t, s in zip(times.tolist(), services.tolist()):
            yield env.timeout(t - env.now)
            env.process(job(t, s))

    env.process(source())
    env.run()
    return float(np.mean(waits))


def wall(fn: Callable[[], Any]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_mb(fn: Callable[[], Any]) -> float:
    """Peak traced memory (MB) of one run of ``fn`` (what it allocates and holds at once)."""
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--baseline-jobs", type=int, default=None, help="idiomatic run size (default: --jobs)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-memory-scaling", action="store_true", help="skip the 10x memory comparison")
    a = ap.parse_args()
    n = a.jobs
    nb = a.baseline_jobs or n
    big = scenario(n)
    base_draws = draw_jobs(scenario(nb), max_jobs=nb)
    nb = len(base_draws)

    contenders: dict[str, tuple[int, Callable[[], Any]]] = {
        "qsim simulate(records=False)": (n, lambda: simulate(big, max_jobs=n, records=False).summary),
        "qsim simulate(records=True)": (n, lambda: simulate(big, max_jobs=n, records=True).summary),
        "idiomatic SimPy (process/job + Resource)": (nb, lambda: idiomatic(base_draws.time, base_draws.service)),
    }
    base = "idiomatic SimPy (process/job + Resource)"
    walls: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(a.runs):
        for name, (_, fn) in contenders.items():
            walls[name].append(wall(fn))
        print(f"round {r + 1}/{a.runs}: " + ", ".join(f"{k.split(' (')[0] if 'idiom' in k else k} {v[-1]:.2f}s"
                                                      for k, v in walls.items()), file=sys.stderr)
    rates = {k: [contenders[k][0] / w for w in ws] for k, ws in walls.items()}
    peaks = {k: peak_mb(fn) for k, (_, fn) in contenders.items()}

    print(f"M/M/{C}, rho = {LAM / (C / MEAN):.2f}; median of {a.runs} interleaved rounds; "
          "peak memory by tracemalloc (one extra run)")
    print(f"{'':<42}{'jobs':>9}{'wall s':>9}{'jobs/s':>11}{'peak MB':>9}{'x idiomatic':>13}")
    for name, (jobs, _) in contenders.items():
        ratio = statistics.median(x / y for x, y in zip(rates[name], rates[base]))
        print(f"{name:<42}{jobs:>9}{statistics.median(walls[name]):>9.2f}{statistics.median(rates[name]):>11,.0f}"
              f"{peaks[name]:>9.0f}{ratio:>12.2f}x")
    print("x idiomatic: median over rounds of (jobs/s) / (idiomatic jobs/s of the same round); target >= 2.5x")

    exact = simulate(big, max_jobs=n, records=True).summary
    streamed = simulate(big, max_jobs=n, records=False).summary
    errors = [f"{what} {q} {abs(streamed[what][q] - exact[what][q]) / exact[what][q]:.3%}"
              for what in ("wait", "latency") for q in ("p50", "p95", "p99") if exact[what][q]]
    same = all(streamed[k] == exact[k] for k in ("jobs", "throughput")) and \
        streamed["by_queue"]["q"]["max_depth"] == exact["by_queue"]["q"]["max_depth"]
    print(f"\nrecords=False vs records=True, same seed: relative error {', '.join(errors)} "
          f"(bound {STREAM_REL_ERROR:.2%}); wait p50 exact 0 both: {exact['wait']['p50'] == streamed['wait']['p50']}; "
          f"counts, throughput, max_depth identical: {same}; mean wait differs by "
          f"{abs(streamed['wait']['mean'] - exact['wait']['mean']):.1e} s")

    if not a.no_memory_scaling:
        print("\npeak memory (MB) by number of jobs")
        small = max(n // 10, 1)
        print(f"{'':<30}{small:>12}{n:>12}")
        for records in (True, False):
            row = []
            for jobs in (small, n):
                s = scenario(jobs)
                row.append(peak_mb(lambda: simulate(s, max_jobs=jobs, records=records).summary))
            print(f"{f'simulate(records={records})':<30}{row[0]:>12.0f}{row[1]:>12.0f}")


if __name__ == "__main__":
    main()
