"""Redis as a planned resource: its CPU per job, and the share of one Redis core a sizing implies.

Every job costs Redis some CPU: the ``add`` script, the ``fetch`` that
claims it, the ``complete`` (or ``fail``) that records its end with its
event, and the replies' networking; a job running longer than half a lock
also has its lock renewed (one script call per worker every
``lock_duration / 2`` s renews all of its jobs). Idle workers cost a little
too: each waits on a blocking pop that times out every ``block_timeout`` s
and looks for stalled jobs every ``stalled_interval`` s. Redis runs commands
on one core, so its load is a share of one core::

    cpu_per_job_us = cpu_per_attempt_us x attempts per job
                     + renewals per job x RENEW_US        (renewals = service / (lock_duration / 2))
    utilization    = (throughput x cpu_per_job_us + workers x idle_us_per_worker) / 1e6

``cpu_per_attempt_us`` defaults to :data:`DEFAULT_CPU_PER_JOB_US`, measured
on the machine qsim is developed on (``benchmarks/redis_cost.py``); ``qsim
calibrate --probe`` measures it on your Redis and writes it to the
scenario's ``[engine]`` table as ``redis_cpu_per_job_us`` (and the idle cost
as ``redis_idle_us_per_worker``), which ``qsim plan`` and ``qsim autoscale``
then use. Above :data:`DEFAULT_CEILING` of a core (``--redis-ceiling``) a
plan's answer is flagged: commands queue behind each other, every round trip
of every worker slows, and a Redis near 100 % has no room for a burst.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RedisCost", "RedisLoad", "redis_cost", "redis_load", "check_ceiling", "describe", "DEFAULT_CPU_PER_JOB_US",
           "DEFAULT_IDLE_US_PER_WORKER", "RENEW_US", "DEFAULT_CEILING"]

#: Redis CPU (µs) per no-op job with the engine's defaults — one ``add`` call, the fetch, the completion and its
#: event, networking included — the median over concurrencies 1, 10 and 100 of ``benchmarks/redis_cost.py``'s
#: qsim column on a shared 2-core machine, Redis 7.0 (docs/snippets/benchmarks/redis-cost.md; about half of it
#: the add). tests/unit/test_redis_plan.py holds it to that table.
DEFAULT_CPU_PER_JOB_US = 59.0
#: Redis CPU (µs) per second per worker process while it waits for work (its blocking pop timing out, stalled
#: checks), from the same table's paragraph on an idle worker.
DEFAULT_IDLE_US_PER_WORKER = 4.0
#: Redis CPU (µs) of renewing one running job's lock (its share of an ``extend_lock`` call).
RENEW_US = 3.0
#: The share of one Redis core above which an answer is flagged (``--redis-ceiling``).
DEFAULT_CEILING = 0.7


def check_ceiling(value: float, name: str = "--redis-ceiling") -> float:
    """``value`` when it is a share of a core in (0, 1]; else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1 or math.isnan(value):
        raise ValueError(f"{name} must be a share of one Redis core in (0, 1], such as 0.7, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RedisCost:
    """What Redis spends on the engine's work.

    Attributes:
        cpu_per_job_us: Redis CPU (µs) per job of one attempt, everything included.
        idle_us_per_worker: Redis CPU (µs) per second per worker process while it waits.
        source: Where the figures come from (``default``, ``engine.redis_cpu_per_job_us``, a probe).
        detail: Figures behind them (commands per job, the add's and the drain's shares...).
    """

    cpu_per_job_us: float = DEFAULT_CPU_PER_JOB_US
    idle_us_per_worker: float = DEFAULT_IDLE_US_PER_WORKER
    source: str = "default"
    detail: dict[str, float] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not (self.cpu_per_job_us > 0 and math.isfinite(self.cpu_per_job_us)):
            raise ValueError(f"Redis CPU per job must be > 0 µs, got {self.cpu_per_job_us!r}")
        if not (self.idle_us_per_worker >= 0 and math.isfinite(self.idle_us_per_worker)):
            raise ValueError(f"Redis CPU per idle worker must be >= 0 µs/s, got {self.idle_us_per_worker!r}")

    def as_dict(self) -> dict[str, Any]:
        """The cost for a JSON report."""
        return {"cpu_per_job_us": self.cpu_per_job_us, "idle_us_per_worker": self.idle_us_per_worker,
                "source": self.source, **self.detail}


@dataclass(frozen=True)
class RedisLoad:
    """The Redis load a sizing implies: CPU per job (µs) and the share of one Redis core."""

    cpu_per_job_us: float
    utilization: float
    throughput: float
    workers: int
    ceiling: float
    source: str

    @property
    def above_ceiling(self) -> bool:
        """Whether the utilization is above the ceiling."""
        return self.utilization > self.ceiling

    def warning(self, what: str = "the answer") -> str | None:
        """One sentence when above the ceiling (None otherwise)."""
        if not self.above_ceiling:
            return None
        # as few decimals as tell the two apart: 85% above 70%, 1.2% above 1.0%, 0.13% above 0.10%
        places = next((d for d in range(7) if f"{self.utilization:.{d}%}" != f"{self.ceiling:.{d}%}"), 6)
        return (f"Redis: {what} implies {self.utilization:.{places}%} of one Redis core ({self.throughput:.4g} "
                f"jobs/s x {self.cpu_per_job_us:.3g} µs, {_workers(self.workers)}), above the ceiling of "
                f"{self.ceiling:.{places}%} "
                f"(--redis-ceiling): shard the queues over a Redis Cluster (queue groups), or measure your "
                f"Redis's cost with qsim calibrate --probe")

    def as_dict(self) -> dict[str, Any]:
        """``{"cpu_per_job_us", "utilization", ...}`` for the JSON of plan and autoscale."""
        return {"cpu_per_job_us": self.cpu_per_job_us, "utilization": self.utilization,
                "throughput": self.throughput, "workers": self.workers, "ceiling": self.ceiling,
                "above_ceiling": self.above_ceiling, "source": self.source}


def _share(x: float, decimals: int) -> str:
    """``x`` as a percentage with ``decimals`` decimals, or with two significant digits where those would
    show a share above 0 as 0%."""
    text = f"{x:.{decimals}%}"
    return f"{x * 100:.2g}%" if x > 0 and float(text.rstrip("%")) == 0 else text


def _workers(n: int) -> str:
    return f"{n} worker" + ("" if n == 1 else "s")


def describe(load: Mapping[str, Any]) -> str:
    """One line of text for a load's JSON (:meth:`RedisLoad.as_dict`)."""
    return (f"redis: {_share(load['utilization'], 1)} of one core at {load['throughput']:.4g} jobs/s and "
            f"{_workers(load['workers'])} ({load['cpu_per_job_us']:.3g} µs per job, {load['source']}; "
            + ("ABOVE the " if load["utilization"] > load["ceiling"] else "") + f"ceiling {_share(load['ceiling'], 0)})")


def redis_cost(engine: Any = None, *, cpu_per_job_us: float | None = None) -> RedisCost:
    """The cost to plan with: ``cpu_per_job_us`` if given, else the scenario's ``[engine]`` keys, else the defaults."""
    given = getattr(engine, "redis_cpu_per_job_us", None)
    idle = getattr(engine, "redis_idle_us_per_worker", None)
    idle_us = DEFAULT_IDLE_US_PER_WORKER if idle is None else float(idle)
    if cpu_per_job_us is not None:
        return RedisCost(cpu_per_job_us, idle_us, "--redis-cpu-per-job")
    if given is not None:
        return RedisCost(float(given), idle_us, "engine.redis_cpu_per_job_us")
    return RedisCost(DEFAULT_CPU_PER_JOB_US, idle_us, "default")


def redis_load(cost: RedisCost, *, throughput: float, workers: int, attempts_per_job: float = 1.0,
               mean_service: float = 0.0, lock_duration: float = 30.0,
               ceiling: float = DEFAULT_CEILING) -> RedisLoad:
    """The Redis load of ``throughput`` jobs/s on ``workers`` worker processes (see the module docstring)."""
    check_ceiling(ceiling, "ceiling")
    if throughput < 0 or workers < 0 or attempts_per_job < 1 or mean_service < 0 or lock_duration <= 0:
        raise ValueError(f"throughput, workers and mean_service must be >= 0, attempts_per_job >= 1 and "
                         f"lock_duration > 0, got {throughput}, {workers}, {attempts_per_job}, {mean_service}, "
                         f"{lock_duration}")
    per_job = cost.cpu_per_job_us * attempts_per_job + mean_service / (lock_duration / 2) * RENEW_US
    utilization = (throughput * per_job + workers * cost.idle_us_per_worker) / 1e6
    return RedisLoad(per_job, utilization, throughput, workers, ceiling, cost.source)
