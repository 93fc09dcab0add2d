"""The model's prediction for what a load test just measured (``--compare-model``).

The load test adds the scenario's jobs for a window at scaled rates with its
own pacing (``burst``, ``trace`` and ``profile`` types on their drawn schedule),
on the scenario's clock as ``--time-scale`` compresses it (the scenario given
here is the time-scaled one, :func:`qsim.loadtest.timescale.time_scaled`), and plays
the scenario's ``[[events]]`` only on pools it started itself;
:func:`load_test_scenario` is the scenario that describes exactly that:
duration = the window, no warm-up, the events or none, and as arrivals either

- the enqueue times the observer read from Redis, replayed as ``trace``
  arrivals (a single Locust process). The model then draws for the k-th job
  of a type the very service times and failures the producers' payloads
  carried (both come from the scenario's seeded streams, see
  :mod:`qsim.harness.plan`), so model and engine run the same jobs at the same
  times, and :func:`predict` needs one run; or
- the rates times the scale, ``constant`` (``--pacing constant``: exact for one
  producer and one type, an approximation otherwise) or ``poisson``
  (``--pacing poisson``), scheduled types (and all with ``--pacing
  scenario``) as drawn, sped up by the scale (a rate profile: its times
  divided and its rates multiplied by the scale, repeating like the
  load test's schedule when the window outlasts it), pooled over
  replications (distributed runs, whose master does not see the enqueue times).

:func:`predict` gives each job type's wait and latency percentiles, the
quantities of the ``wait`` and ``job`` rows of the Locust statistics.

The comparison means something when the workers run the synthetic handler
(``--start-workers``, or ``qsim.harness.pool_worker`` deployed on staging);
real handlers have service times of their own. Nothing here imports Locust.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qsim.spec.dists import (Arrival, BurstArrivals, ConstantArrivals, PoissonArrivals, ProfileArrivals, RateProfile,
                        TraceArrivals)
from qsim.loadtest.schedule import SCHEDULED_KINDS
from qsim.loadtest.timescale import scaled_profile
from qsim.model import simulate
from qsim.spec.scenario import Scenario

__all__ = ["load_test_scenario", "predict", "comparison_rows", "write_comparison"]


def load_test_scenario(scenario: Scenario, *, scale: float, window: float, pacing: str,
                       arrivals: dict[str, list[float]] | None = None, events: bool = False) -> Scenario:
    """The scenario a load test with these settings actually ran (see the module docstring).

    Args:
        arrivals: Enqueue times by job type (any clock, seconds): replayed as they were.
        events: Keep the scenario's ``[[events]]`` (the load test played them on
            ``--start-workers`` pools); else the run had none.
    """
    start = min((t for ts in (arrivals or {}).values() for t in ts), default=0.0)
    last = max((t - start for ts in (arrivals or {}).values() for t in ts), default=0.0)
    jobs = []
    for job in scenario.jobs:
        if job.arrival is not None:
            if arrivals:
                at = tuple(sorted(t - start for t in arrivals.get(job.name, ())))
                arrival: Any = TraceArrivals(path=Path("<load test>"), at=at)
            elif job.arrival.kind in SCHEDULED_KINDS or pacing == "scenario":  # on the drawn schedule, scaled
                arrival = _sped_up(job.arrival, scale, scenario.duration / scale if window > scenario.duration / scale
                                   else None)
            else:
                rate = float(job.arrival.rate) * scale
                arrival = PoissonArrivals(rate=rate) if pacing == "poisson" else ConstantArrivals(rate=rate)
            job = replace(job, arrival=arrival)
        jobs.append(job)
    duration = max(float(window), last + 1e-6)
    return replace(scenario, jobs=tuple(jobs), duration=duration, warmup=0.0,
                   events=scenario.events if events else ())


def _sped_up(arrival: Arrival, scale: float, repeat: float | None = None) -> Arrival:
    """The same arrival process with every time divided by ``scale`` (its rate times ``scale``); a rate
    profile without a period of its own repeats every ``repeat`` seconds when given (as the schedule does)."""
    if isinstance(arrival, TraceArrivals):
        return TraceArrivals(path=arrival.path, at=tuple(t / scale for t in arrival.at))
    if isinstance(arrival, ProfileArrivals):
        return ProfileArrivals(profile=_sped_profile(arrival.profile, scale, repeat))
    if isinstance(arrival, BurstArrivals):
        if arrival.profile is not None:
            return BurstArrivals(size=arrival.size, profile=_sped_profile(arrival.profile, scale, repeat))
        return BurstArrivals(rate=arrival.rate * scale, size=arrival.size)
    if isinstance(arrival, PoissonArrivals):
        return PoissonArrivals(rate=arrival.rate * scale)
    return ConstantArrivals(rate=float(arrival.rate) * scale)


def _sped_profile(profile: RateProfile, scale: float, repeat: float | None) -> RateProfile:
    sped = scaled_profile(profile, 1.0 / scale, scale)
    if repeat is not None and sped.period is None and sped.points[-1][0] <= repeat:
        sped = replace(sped, period=repeat)
    return sped


def _pct(values: np.ndarray, q: float) -> float | None:
    values = values[~np.isnan(values)]
    return float(np.percentile(values, q)) if len(values) else None


def predict(scenario: Scenario, *, min_jobs: int = 5000, max_runs: int = 30) -> dict[str, dict[str, Any]]:
    """Per job type: ``{"jobs", "runs", "wait": {"p50", "p95"}, "latency": {"p50", "p95"}}`` in
    seconds, from model runs of ``scenario`` (seeds ``seed``, ``seed + 1``, ...) pooled until
    ``min_jobs`` jobs or ``max_runs`` runs; one run when every arrival is a replayed trace
    (the jobs are then fixed: more runs would only repeat their arrivals)."""
    if all(j.arrival is None or isinstance(j.arrival, TraceArrivals) for j in scenario.jobs):
        max_runs = 1
    frames: list[pd.DataFrame] = []
    total = 0
    for k in range(max_runs):
        jobs = simulate(scenario, seed=scenario.seed + k).jobs
        frames.append(jobs[["type", "enqueued", "started", "finished", "outcome"]])
        total += len(jobs)
        if total >= min_jobs:
            break
    pooled = pd.concat(frames, ignore_index=True)
    out: dict[str, dict[str, Any]] = {}
    for name, rows in pooled.groupby("type", sort=False):
        wait = (rows["started"] - rows["enqueued"]).to_numpy(dtype=float)
        done = rows[rows["outcome"] == "completed"]
        latency = (done["finished"] - done["enqueued"]).to_numpy(dtype=float)
        out[str(name)] = {"jobs": len(rows), "runs": len(frames),
                          "wait": {"p50": _pct(wait, 50), "p95": _pct(wait, 95)},
                          "latency": {"p50": _pct(latency, 50), "p95": _pct(latency, 95)}}
    return out


def comparison_rows(predicted: dict[str, dict[str, Any]],
                    measured: dict[tuple[str, str], dict[str, float]]) -> list[dict[str, Any]]:
    """One row per (job type, metric): model and load-test p50/p95 in seconds, and the count measured.

    Args:
        predicted: :func:`predict`'s result.
        measured: ``{(type, "wait"|"latency"): {"count", "p50", "p95"}}`` from the Locust statistics.
    """
    rows = []
    for name in sorted(set(predicted) | {t for t, _ in measured}):
        for metric in ("wait", "latency"):
            model = predicted.get(name, {}).get(metric, {})
            got = measured.get((name, metric), {})
            rows.append({"type": name, "metric": metric,
                         "model_p50": model.get("p50"), "model_p95": model.get("p95"),
                         "measured_p50": got.get("p50"), "measured_p95": got.get("p95"),
                         "measured_count": int(got.get("count", 0))})
    return rows


def write_comparison(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write :func:`comparison_rows` as CSV (empty cells for missing values)."""
    fields = ["type", "metric", "model_p50", "model_p95", "measured_p50", "measured_p95", "measured_count"]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
                        for k, v in row.items()})
