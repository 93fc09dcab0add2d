"""Model speed benchmark: qsim's model against the idiomatic SimPy pattern, same run.

M/M/c with c = 10 and rho = 0.8 (lambda = 8/s, mean service 1 s). For each
implementation it prints wall time, simulated jobs per second and peak
memory (tracemalloc), the median of several runs, and the ratio
qsim / idiomatic. The idiomatic pattern is what SimPy's documentation
teaches: one process per job that requests a ``simpy.Resource`` of capacity c.
Both are fed the same arrival and service samples, and both compute the mean
wait, so the figures are of the same work.

Usage: ``python benchmarks/model_speed.py [--jobs 1000000] [--runs 3]``
(the idiomatic pattern runs on ``--baseline-jobs``, default 200,000, and is
reported per job: its cost is linear in the number of jobs).
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
from qsim.model import Model, draw_jobs, simulate  # noqa: E402

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


def measure(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median wall seconds over ``runs``, and peak traced memory (MB) of one extra run."""
    walls = []
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return statistics.median(walls), peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--baseline-jobs", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()

    big = scenario(a.jobs)
    small = scenario(a.baseline_jobs)
    draws = draw_jobs(small, max_jobs=a.baseline_jobs)

    full_wall, full_mem = measure(lambda: simulate(big, max_jobs=a.jobs).summary, a.runs)
    core_wall, _ = measure(lambda: Model(small, draws, seed=0).run(), a.runs)
    base_wall, base_mem = measure(lambda: idiomatic(draws.time, draws.service), a.runs)

    n_small = len(draws)
    full_rate, core_rate, base_rate = a.jobs / full_wall, n_small / core_wall, n_small / base_wall
    print(f"M/M/{C}, rho = {LAM / (C / MEAN):.2f}; median of {a.runs} runs; peak memory by tracemalloc")
    print(f"{'':<44}{'jobs':>10}{'wall s':>9}{'jobs/s':>11}{'peak MB':>9}")
    print(f"{'qsim simulate() end to end (records+Summary)':<44}{a.jobs:>10}{full_wall:>9.2f}{full_rate:>11,.0f}"
          f"{full_mem:>9.0f}")
    print(f"{'qsim Model.run() on pre-drawn jobs':<44}{n_small:>10}{core_wall:>9.2f}{core_rate:>11,.0f}")
    print(f"{'idiomatic SimPy (process per job, Resource)':<44}{n_small:>10}{base_wall:>9.2f}{base_rate:>11,.0f}"
          f"{base_mem:>9.0f}")
    print(f"ratio qsim end to end / idiomatic: {full_rate / base_rate:.2f}x   "
          f"(simulation alone: {core_rate / base_rate:.2f}x; target >= 2.5x)")


if __name__ == "__main__":
    main()
