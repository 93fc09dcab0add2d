"""What a calibrated pool can and cannot do, before any simulation: load, limits, search range, shutdown.

All figures come from a :class:`~qsim.calibrate.report.Calibration` and are
plain arithmetic on its fits (no model run):

- **offered load** of a job type, in busy slots: ``rate x attempts x (service
  + fetch_overhead + ack_overhead)``, where ``attempts`` is the expected number
  of attempts per job, ``(1 - poison) (1 - p^A) / (1 - p) + poison A`` for
  ``fail_prob`` p, ``poison_prob`` and ``A`` attempts allowed;
- **limits**: a queue whose needed job starts per second reach its rate limit
  (``max / per``), or whose offered load reaches its concurrency limit, keeps
  growing whatever the number of workers: :func:`blocked` says so in words;
- **search range** (:func:`qsim.analysis.plan.search.search_range`) for the worker count at concurrency ``c``: from the least
  count that keeps the pool at most :data:`MAX_UTILIZATION` busy (with fewer
  slots than the load the queue grows; close to that, the waits a model run
  of a few thousand jobs shows depend on the run's length rather than the
  setting, as the queue's relaxation time grows like ``1 / (1 - rho)^2``) up
  to a count where the pool is at most 30% busy, at least twice the current
  count, and no more than ``ceil(limit / c)`` under a concurrency limit (more
  workers add no capacity there) nor ``max_workers``;
- **shutdown**: the grace a worker needs to drain (``qsim worker
  --shutdown-grace``) and Kubernetes' ``terminationGracePeriodSeconds``,
  see :class:`Shutdown`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from qsim.analysis.plan.search import LOW_UTILIZATION, MAX_UTILIZATION, search_range
from qsim.calibrate.pools import PoolFit, runs_of
from qsim.calibrate.report import Calibration, TypeFit

__all__ = ["attempts_per_job", "type_load", "pool_load", "blocked", "limit_workers", "search_range",
           "busy_share", "Shutdown", "shutdown_for", "MAX_UTILIZATION", "LOW_UTILIZATION", "RUN_MARGIN", "EXIT_MARGIN"]

#: Without a job timeout, the longest run a drain must allow is the longest measured one times this.
RUN_MARGIN = 1.5
#: Seconds added to the drain for handing cut-off jobs back and the process's exit.
EXIT_MARGIN = 5.0


def attempts_per_job(fit: TypeFit) -> float:
    """Expected attempts per job of a type, from its failure fits and attempts allowed."""
    p, poison, a = fit.failures.fail_prob, fit.failures.poison_prob, max(1, fit.attempts)
    healthy = float(a) if p >= 1.0 else (1.0 - p ** a) / (1.0 - p)
    return (1.0 - poison) * healthy + poison * a


def type_load(cal: Calibration, fit: TypeFit) -> float:
    """Busy slots a job type keeps occupied on average (see the module docstring)."""
    per_attempt = fit.service.mean + cal.overhead.fetch_overhead + cal.overhead.ack_overhead
    return fit.arrival.rate * attempts_per_job(fit) * per_attempt


def pool_load(cal: Calibration, pool: PoolFit) -> float:
    """Busy slots the job types of the pool's queues keep occupied."""
    return sum(type_load(cal, f) for f in cal.types.values() if f.queue in pool.queues)


def blocked(cal: Calibration, pool: PoolFit) -> str | None:
    """Why no worker count can keep up with the pool's queues (None: some count can), in one sentence."""
    for q in pool.queues:
        types = [f for f in cal.types.values() if f.queue == q]
        if not types:
            continue
        spec = cal.scenario.queue(q)
        rate = sum(f.arrival.rate for f in types)
        starts = sum(f.arrival.rate * attempts_per_job(f) for f in types)
        rl = spec.rate_limit
        if rl is not None and rl.key is None and starts >= rl.max / rl.per:
            return (f"queue {q!r} needs {starts:.4g} job starts/s (arrivals {rate:.4g}/s with retries), at or above "
                    f"its rate limit of {rl.max} per {rl.per:g} s ({rl.max / rl.per:.4g}/s): the queue grows "
                    "whatever the number of workers")
        load = sum(type_load(cal, f) for f in types)
        if spec.concurrency_limit is not None and load >= spec.concurrency_limit:
            return (f"queue {q!r} offers {load:.4g} busy slots (arrivals {rate:.4g}/s x their time in a slot), at "
                    f"or above its concurrency limit of {spec.concurrency_limit} jobs at once: the queue grows "
                    "whatever the number of workers")
    return None


def limit_workers(cal: Calibration, pool: PoolFit, concurrency: int) -> int | None:
    """More workers than this add no capacity: every queue of the pool has a concurrency limit (None: no cap)."""
    limits = [cal.scenario.queue(q).concurrency_limit for q in pool.queues]
    if not limits or any(lim is None for lim in limits):
        return None
    return max(1, math.ceil(sum(int(lim) for lim in limits if lim is not None) / concurrency))




def _pool_runs(cal: Calibration, pool: PoolFit) -> tuple[np.ndarray, np.ndarray]:
    runs = runs_of(cal.measured.jobs, cal.measured.attempts)
    runs = runs[runs["queue"].isin(pool.queues)]
    return runs["start"].to_numpy(float), runs["end"].to_numpy(float)


def busy_share(cal: Calibration, pool: PoolFit, concurrency: int) -> float:
    """Measured utilization: the pool's run time inside the window over ``workers x concurrency x`` its length."""
    start, end = cal.window
    s, e = _pool_runs(cal, pool)
    busy = float(np.clip(np.minimum(e, end) - np.maximum(s, start), 0.0, None).sum())
    slots = pool.workers * concurrency
    return busy / (slots * (end - start)) if slots and end > start else math.nan


@dataclass(frozen=True)
class Shutdown:
    """How long a worker needs to stop without cutting jobs off.

    ``shutdown_grace`` (``qsim worker --shutdown-grace``) is the longest job: the
    largest per-attempt ``timeout`` when every job type of the pool has one (the
    engine ends an attempt there), else the longest run measured in the window
    times :data:`RUN_MARGIN`, rounded up to whole seconds.
    ``termination_grace_period_seconds`` (Kubernetes) adds a ``preStop`` hook's
    time (Kubernetes counts it against the same period) and :data:`EXIT_MARGIN`.
    """

    longest_job: float
    source: str
    shutdown_grace: int
    pre_stop: float
    termination_grace_period_seconds: int

    def as_dict(self) -> dict[str, Any]:
        """The figures for the JSON document."""
        return {"longest_job": self.longest_job, "from": self.source, "shutdown_grace": self.shutdown_grace,
                "pre_stop": self.pre_stop, "exit_margin": EXIT_MARGIN,
                "termination_grace_period_seconds": self.termination_grace_period_seconds}

    def __str__(self) -> str:
        pre = f"preStop {self.pre_stop:g} s + " if self.pre_stop else ""
        return (f"--shutdown-grace {self.shutdown_grace}, terminationGracePeriodSeconds "
                f"{self.termination_grace_period_seconds} ({pre}longest job {self.longest_job:.3g} s from "
                f"{self.source} + {EXIT_MARGIN:g} s)")


def shutdown_for(cal: Calibration, pool: PoolFit, *, pre_stop: float = 0.0) -> Shutdown:
    """The drain and termination grace for the pool's workers (see :class:`Shutdown`)."""
    types = [f for f in cal.types.values() if f.queue in pool.queues]
    timeouts = [f.timeout for f in types]
    if types and all(t > 0 for t in timeouts):
        longest, source = max(timeouts), "the job timeout"
    else:
        s, e = _pool_runs(cal, pool)
        spans = e - s
        spans = spans[np.isfinite(spans)]
        top = float(spans.max()) if spans.size else 0.0
        longest, source = top * RUN_MARGIN, f"the longest measured run x {RUN_MARGIN:g}"
    grace = max(1, math.ceil(longest))
    return Shutdown(longest_job=longest, source=source, shutdown_grace=grace, pre_stop=pre_stop,
                    termination_grace_period_seconds=math.ceil(pre_stop + grace + EXIT_MARGIN))
