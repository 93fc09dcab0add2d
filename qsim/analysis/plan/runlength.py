"""Is a point's run long enough to trust its figures? Two checks, over all its replications.

**Too short for a tail quantile.** A run's p99 is read off the jobs beyond
it: with 1,000 jobs that is 10 jobs, with 200 it is 2, and the figure is then
mostly luck. A quantile metric is flagged *short* when, in some replication,
fewer than :data:`MIN_TAIL_JOBS` jobs lie beyond it (``jobs x (1 - q)``; jobs:
started ones for a wait, completed ones for a latency). The figure is still
reported, marked; lengthen the run (``duration``) to clear it.

**Still trending at the end (unstable).** Each run is compared with a second
run of the same seed whose arrivals stop after about the first third of the
measured jobs (:func:`qsim.analysis.plan.runner.run_task`): those jobs wait the same
in both, so the mean wait of the remaining two thirds follows by difference.
In a settled system both parts wait alike; in an overloaded one the queue
grows and the later jobs wait ever longer. A point is flagged *unstable* when,
averaged over the replications, the later jobs' mean wait is at least
:data:`TREND_RATIO` times the first part's and exceeds it by at least one mean
service time (latency minus wait: small waits that grow are not a trend), and
the paired difference over the replications is significant at the plan's
confidence. With one replication there is no test: the excess must then be
two mean service times. An unstable point meets no SLO: its figures depend on
how long the run lasted, not on the setting. (On M/M/10 runs of 40 to 540 s
this flagged no point at a load of 0.9 or below, and with 5 replications
nearly every point at 1.1 or above; near 1 a finite run has not settled and
may be flagged.) With priorities the split is an approximation (a later
urgent job can overtake an earlier one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from qsim.analysis.plan.runner import FIRST_PART, RunResult
from qsim.analysis.slo.metrics import Metric
from qsim.analysis.slo.windowed import WindowMetric
from qsim.analysis.stats import estimate

__all__ = ["MIN_TAIL_JOBS", "TREND_RATIO", "diagnose"]

#: A quantile needs at least this many jobs beyond it in every run not to be flagged short.
MIN_TAIL_JOBS = 10
#: The later jobs' mean wait over the first part's that flags a point as still trending.
TREND_RATIO = 1.25


def _tail_jobs(metric: Metric | WindowMetric, summary: dict[str, Any]) -> float | None:
    q, n = metric.quantile, metric.sample_size(summary)
    return None if q is None or n is None else n * (1.0 - q)


def _trend(runs: Sequence[RunResult], confidence: float) -> dict[str, Any] | None:
    firsts, rests, services = [], [], []
    for run in runs:
        first, summary = run.get("first_part"), run["summary"]
        wait, latency = summary["wait"]["mean"], summary["latency"]["mean"]
        if first is None or wait is None:
            return None
        n = int(summary["jobs"]["completed"]) + int(summary["jobs"]["dead"])
        n1, m1 = int(first["jobs"]), float(first["wait_mean"])
        firsts.append(m1)
        rests.append((n * float(wait) - n1 * m1) / (n - n1))
        services.append(max(float(latency) - float(wait), 0.0) if latency is not None else 0.0)
    if not firsts:
        return None
    first_mean = math.fsum(firsts) / len(firsts)
    rest_mean = math.fsum(rests) / len(rests)
    service = math.fsum(services) / len(services)
    growth = estimate([r - f for r, f in zip(rests, firsts)], confidence)
    if growth.low is None:  # one run: no test, a larger excess instead
        significant, services_needed = True, 2.0
    else:
        significant, services_needed = growth.low > 0, 1.0
    unstable = (rest_mean >= TREND_RATIO * first_mean and rest_mean - first_mean >= services_needed * service
                and significant)
    return {"unstable": unstable, "first_wait_mean": first_mean, "rest_wait_mean": rest_mean}


def diagnose(runs: Sequence[RunResult], metrics: Sequence[Metric | WindowMetric], confidence: float = 0.95) -> dict[str, Any]:
    """The run-length checks of one point over its runs.

    Returns ``{"unstable": bool, "trend": {"first_wait_mean", "rest_wait_mean"} | None,
    "short": {metric key: least jobs beyond the quantile in a run}, "warnings": [text]}``.
    """
    short: dict[str, float] = {}
    for metric in metrics:
        tails = [_tail_jobs(metric, run["summary"]) for run in runs]
        known = [t for t in tails if t is not None]
        if known and min(known) < MIN_TAIL_JOBS:
            short[metric.key] = round(min(known), 1)
    trend = _trend(runs, confidence)
    warnings = []
    if trend is not None and trend["unstable"]:
        first, rest = trend["first_wait_mean"], trend["rest_wait_mean"]
        times = f"{rest / first:.1f}x as long as" if first > 0 else "longer than"
        warnings.append(f"unstable: jobs after the first {FIRST_PART:.0%} of the run waited {times} those before "
                        f"(mean {rest:.3g} s vs {first:.3g} s): the queue is still growing at the end, so its "
                        "figures depend on the run's length (overloaded, or lengthen the run and warm-up)")
    for key, tail in short.items():
        warnings.append(f"short: {key} rests on {tail:g} jobs beyond it in a run (fewer than {MIN_TAIL_JOBS}): "
                        "lengthen the run")
    return {"unstable": bool(trend and trend["unstable"]),
            "trend": None if trend is None else {k: trend[k] for k in ("first_wait_mean", "rest_wait_mean")},
            "short": short, "warnings": warnings}
