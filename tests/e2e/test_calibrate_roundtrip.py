"""Calibrate round trip on the engine: measure a workload, calibrate from the engine's Redis, predict the
same workload at another concurrency with the model, and measure that on the engine too.

The workload: bursts of 20 jobs every 0.5 s (lognormal service) plus Poisson traffic (exponential
service), 8 s, on 2 worker processes. Calibrated at concurrency 4 per process (8 slots, rho ~0.25),
predicted and measured at concurrency 2 (4 slots, rho ~0.5): every burst queues, so waits are tens of
milliseconds, not pickup noise. The model's figure is the mean of 6 replications (its own random
draws of the fitted distributions); the engine's is the one run. Longer runs and more settings:
``python benchmarks/calibrate.py``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import qsim.calibrate as cal
from qsim.harness.run import run_scenario
from qsim.model import simulate
from qsim.spec.scenario import Scenario

pytestmark = pytest.mark.redis


def workload(workers: int, concurrency: int, seed: int = 5, duration: float = 8.0) -> Scenario:
    return Scenario.from_dict({
        "name": "roundtrip", "seed": seed, "duration": duration, "queues": [{"name": "orders"}],
        "jobs": [{"name": "bulk", "queue": "orders", "arrival": {"kind": "burst", "rate": 40.0, "size": 20},
                  "service": {"kind": "lognormal", "mean": 0.04, "cv": 0.5}},
                 {"name": "cut", "queue": "orders", "arrival": {"kind": "poisson", "rate": 10.0},
                  "service": {"kind": "exponential", "mean": 0.05}}],
        "pools": [{"name": "shop", "queues": ["orders"], "workers": workers, "concurrency": concurrency}]})


@pytest.mark.long
def test_engine_round_trip_at_another_concurrency(redis_url: str) -> None:
    # Given the workload measured on the engine at concurrency 4
    measured = run_scenario(workload(2, 4), redis_url, keep=True)
    # When calibrated from the engine's Redis
    c = cal.from_redis(redis_url, ["orders"], prefix=measured.prefix)
    s = c.scenario
    assert [(p.name, p.workers) for p in s.pools] == [("shop", 2)]
    assert s.job("bulk").arrival.kind == "burst" and s.job("bulk").arrival.size == 20  # type: ignore[union-attr]
    assert s.job("cut").arrival.kind == "poisson"  # type: ignore[union-attr]
    assert s.job("bulk").service.mean == pytest.approx(0.04, rel=0.1)
    # and the model predicts the same workload at concurrency 2
    at2 = replace(s, pools=tuple(replace(p, concurrency=2) for p in s.pools))
    runs = [simulate(replace(at2, seed=100 + i)).summary for i in range(6)]
    # Then the engine, run at concurrency 2, measures what the model predicted
    engine = run_scenario(workload(2, 2), redis_url).summary
    assert engine["jobs"]["lost"] == 0
    for metric in ("wait", "latency"):
        for stat in ("p50", "p95"):
            predicted = float(np.mean([r[metric][stat] for r in runs]))
            assert predicted == pytest.approx(engine[metric][stat], rel=0.10), (metric, stat, predicted, engine[metric])
    assert engine["wait"]["p50"] > 0.02  # waits that are not pickup noise
    predicted = float(np.mean([r["throughput"] for r in runs]))
    assert predicted == pytest.approx(engine["throughput"], rel=0.03)
