"""The Redis load of a sizing answer: what ``qsim plan`` and ``qsim autoscale`` report beside it.

An answer (a plan's recommended point, an autoscaling policy at its peak) comes
with a Summary of its runs. Its Redis load is priced by
:func:`qsim.spec.redis_cost.redis_load` at the answer's throughput and worker
count, with the attempts per job (retries cost Redis a fetch and an
acknowledgement each) and the mean time in the handler (lock renewals) its
Summary shows. Over a rate profile the throughput to plan for is the busiest
window's expected arrival rate (:func:`peak_rate`), not the run's mean: Redis
saturates within seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from qsim.analysis.plan.profile import peak_hour, time_varying
from qsim.spec.redis_cost import DEFAULT_CEILING, RedisCost, RedisLoad, redis_cost, redis_load
from qsim.spec.scenario import Scenario

__all__ = ["summary_load", "attach", "peak_rate"]


def _finite(x: Any, default: float = 0.0) -> float:
    try:
        value = float(x)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def peak_rate(scenario: Scenario) -> float | None:
    """Over a rate profile, the busiest Summary window's expected arrivals per second (None: a steady rate)."""
    if not time_varying(scenario):
        return None
    return peak_hour(scenario, scenario.window_length).rate


def summary_load(scenario: Scenario, summary: Mapping[str, Any], *, cost: RedisCost | None = None,
                 ceiling: float = DEFAULT_CEILING, workers: int | None = None,
                 throughput: float | None = None) -> RedisLoad:
    """The Redis load of ``scenario`` (already at the answer's settings) running as ``summary`` shows.

    Args:
        cost: Redis's cost (default: the scenario's ``[engine]`` keys, else qsim's defaults).
        workers: Worker processes (default: the pools' ``workers``).
        throughput: Jobs/s to price (default: the Summary's ``throughput``).
    """
    cost = cost if cost is not None else redis_cost(scenario.engine)
    jobs = summary.get("jobs", {})
    ended = _finite(jobs.get("completed")) + _finite(jobs.get("dead"))
    # attempts = the successful ones + the failed ones (a dead job's included), over the jobs that ended
    attempts = max(1.0, (_finite(jobs.get("completed")) + _finite(jobs.get("failed_attempts"))) / ended) \
        if ended > 0 else 1.0
    service = max(0.0, _finite(summary.get("latency", {}).get("mean")) - _finite(summary.get("wait", {}).get("mean")))
    rate = _finite(summary.get("throughput")) if throughput is None else throughput
    count = sum(p.workers for p in scenario.pools) if workers is None else workers
    return redis_load(cost, throughput=max(0.0, rate), workers=count, attempts_per_job=attempts,
                      mean_service=service, lock_duration=scenario.engine.lock_duration, ceiling=ceiling)


def attach(doc: dict[str, Any], load: RedisLoad | None, what: str) -> None:
    """Put ``load`` in ``doc["redis"]`` (None: no answer) and its warning, if any, in ``doc["warnings"]``."""
    doc["redis"] = None if load is None else load.as_dict()
    warning = None if load is None else load.warning(what)
    if warning is not None:
        doc.setdefault("warnings", []).append(warning)
