"""The model against queueing theory, with tolerances that mean something.

Each statistical test pools independent replications (seeds) and also checks
its own power: the standard error across replications must be small enough
(about a third of the tolerance) that a model off by the tolerance would fail.
Closed forms come from :mod:`qsim.analysis.theory`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from qsim.analysis.theory import cobham_waits, erlang_c, mmc_wait_mean
from qsim.model import simulate
from qsim.spec.scenario import Scenario


def scenario(jobs: list[dict[str, Any]], pools: list[dict[str, Any]], *, queues: list[str] = ("q",),
             duration: float, warmup: float = 0.0, seed: int = 0) -> Scenario:
    return Scenario.from_dict({
        "name": "theory", "seed": seed, "duration": duration, "warmup": warmup,
        "queues": [{"name": q} for q in queues], "jobs": jobs, "pools": pools,
    })


def poisson_job(name: str, rate: float, *, queue: str = "q", priority: int = 0, mean: float = 1.0) -> dict[str, Any]:
    return {"name": name, "queue": queue, "priority": priority, "arrival": {"kind": "poisson", "rate": rate},
            "service": {"kind": "exponential", "mean": mean}}


def measured(jobs: pd.DataFrame, warmup: float) -> pd.DataFrame:
    return jobs[jobs["enqueued"] >= warmup]


def pooled(values: list[float], weights: list[int]) -> tuple[float, float]:
    """Weighted mean over replications and its relative standard error."""
    v, w = np.asarray(values), np.asarray(weights, dtype=float)
    mean = float(np.average(v, weights=w))
    se = float(np.std(v, ddof=1) / np.sqrt(v.size))
    return mean, se / mean


# --------------------------------------------------------------------------- M/M/c: Erlang C

C, LAM, MU = 10, 8.0, 1.0  # rho = 0.8
REPLICATIONS, JOBS_PER_RUN, WARMUP = 40, 100_000, 100.0


@pytest.fixture(scope="module")
def mmc_waits() -> list[np.ndarray]:
    """The waits of the measured jobs (enqueued after warmup) of each M/M/10 replication."""
    pool = [{"name": "p", "queues": ["q"], "workers": C}]
    waits = []
    for seed in range(REPLICATIONS):
        j = measured(simulate(scenario([poisson_job("a", LAM, mean=1 / MU)], pool, duration=JOBS_PER_RUN / LAM,
                                       warmup=WARMUP, seed=seed)).jobs, WARMUP)
        waits.append((j["started"] - j["enqueued"]).to_numpy())
    return waits


@pytest.mark.slow
def test_mmc_mean_wait_within_3_percent_of_erlang_c(mmc_waits: list[np.ndarray]) -> None:
    mean, rel_se = pooled([float(w.mean()) for w in mmc_waits], [w.size for w in mmc_waits])
    theory = mmc_wait_mean(C, LAM, MU)
    assert rel_se < 0.012, f"not enough jobs for a 3% check: relative standard error {rel_se:.2%}"
    assert mean == pytest.approx(theory, rel=0.03), f"model {mean:.5f} vs Erlang C {theory:.5f}"


@pytest.mark.slow
def test_mmc_probability_of_waiting_within_3_percent_of_erlang_c(mmc_waits: list[np.ndarray]) -> None:
    p = [float((w > 0).mean()) for w in mmc_waits]
    mean, rel_se = pooled(p, [w.size for w in mmc_waits])
    theory = erlang_c(C, LAM / MU)
    assert rel_se < 0.01
    assert mean == pytest.approx(theory, rel=0.03), f"model {mean:.5f} vs Erlang C {theory:.5f}"


# --------------------------------------------------------------------------- priorities: Cobham

PRIO_RATES = (4.0, 4.0)  # high, low; rho = 0.8 with c = 10, mu = 1
PRIO_REPLICATIONS = 16


@pytest.mark.slow
def test_two_class_priority_waits_within_5_percent_of_cobham() -> None:
    jobs = [poisson_job("hi", PRIO_RATES[0], priority=0), poisson_job("lo", PRIO_RATES[1], priority=1)]
    pool = [{"name": "p", "queues": ["q"], "workers": C}]
    per_class: dict[str, list[float]] = {"hi": [], "lo": []}
    counts: dict[str, list[int]] = {"hi": [], "lo": []}
    for seed in range(PRIO_REPLICATIONS):
        j = measured(simulate(scenario(jobs, pool, duration=JOBS_PER_RUN / sum(PRIO_RATES), warmup=WARMUP,
                                       seed=seed)).jobs, WARMUP)
        for name, g in j.groupby("type"):
            per_class[str(name)].append(float((g["started"] - g["enqueued"]).mean()))
            counts[str(name)].append(len(g))
    theory = dict(zip(("hi", "lo"), cobham_waits(C, list(PRIO_RATES), MU)))
    for name in ("hi", "lo"):
        mean, rel_se = pooled(per_class[name], counts[name])
        assert rel_se < 0.02, f"{name}: relative standard error {rel_se:.2%} too large for a 5% check"
        assert mean == pytest.approx(theory[name], rel=0.05), f"{name}: model {mean:.5f} vs Cobham {theory[name]:.5f}"


# --------------------------------------------------------------------------- smooth weighted round-robin


@pytest.mark.parametrize("weights", [{"a": 5, "b": 3, "c": 1}, {"a": 1, "b": 1, "c": 2}, {"a": 1, "b": 5, "c": 14}])
def test_wrr_shares_match_the_weights_when_every_queue_is_backlogged(weights: dict[str, float]) -> None:
    # Given three queues each fed far beyond the pool's capacity (all stay backlogged)
    jobs = [poisson_job(f"j{q}", 6.0, queue=q) for q in "abc"]
    pool = [{"name": "p", "queues": ["a", "b", "c"], "policy": "wrr", "weights": weights, "workers": 3,
             "concurrency": 2}]
    r = simulate(scenario(jobs, pool, queues=["a", "b", "c"], duration=600.0, seed=5))
    # When we count the starts while every queue still had jobs waiting
    ts = r.timeseries.pivot_table(index="time", columns="queue", values="waiting", aggfunc="last").ffill()
    backlogged = ts[(ts > 0).all(axis=1)].index
    lo, hi = 20.0, float(backlogged.max())
    started = r.jobs[(r.jobs["started"] >= lo) & (r.jobs["started"] < hi)]
    assert len(started) > 2500
    shares = started["queue"].value_counts(normalize=True)
    total = sum(weights.values())
    # Then each queue's share of the starts is within 2% of its weight's share
    for q, w in weights.items():
        assert shares[q] == pytest.approx(w / total, rel=0.02), f"queue {q}: {shares[q]:.4f} vs {w / total:.4f}"


# --------------------------------------------------------------------------- starvation


def _low_class_wait(policy: str, duration: float, seed: int) -> float:
    # high class alone loads the pool to rho = 0.95; the low class adds 0.2 (total 1.15)
    jobs = [poisson_job("hi", 1.9, queue="high", priority=0), poisson_job("lo", 0.4, queue="low", priority=1)]
    pool = [{"name": "p", "queues": ["high", "low"], "policy": policy, "weights": {"high": 1, "low": 1},
             "workers": 2}]
    j = simulate(scenario(jobs, pool, queues=["high", "low"], duration=duration, seed=seed)).jobs
    lo = j[j["type"] == "lo"]
    return float((lo["started"] - lo["enqueued"]).mean())


def test_strict_priority_starves_the_low_class_and_wrr_does_not() -> None:
    lengths = (500.0, 1000.0, 2000.0, 4000.0)
    seeds = range(4)
    prio = [np.mean([_low_class_wait("priority", t, s) for s in seeds]) for t in lengths]
    wrr = [np.mean([_low_class_wait("wrr", t, s) for s in seeds]) for t in lengths]
    # Under strict priority the low class's wait keeps growing with the run's length (about linearly)
    assert all(b > 1.5 * a for a, b in zip(prio, prio[1:])), prio
    assert prio[-1] > 5 * prio[0]
    # Under wrr (the low queue is guaranteed half the starts while both wait; it needs 0.4 of 2 per s) it stays bounded
    assert max(wrr) < 1.5 * min(wrr), wrr
    assert wrr[-1] < prio[-1] / 20
