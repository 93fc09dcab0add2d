"""The overhead probe: a short light-load run on the real engine that measures
``[engine] fetch_overhead`` and ``ack_overhead`` for this Redis and machine.

It runs a scenario of its own with the engine harness
(:func:`qsim.harness.run.run_scenario`: a real worker process, keys under a
``qsim-run-<hex>`` prefix of their own, deleted afterwards): Poisson arrivals
at a light load, each job's handler sleeping a known constant time. Then
(see :mod:`qsim.calibrate.overhead`):

- pickup  = enqueue -> fetch stamp, for the jobs that found a slot free;
- in-slot = fetch stamp -> acknowledgement stamp, less the planned handler time;
- ``fetch_overhead`` = mean pickup; ``ack_overhead`` = mean in-slot - ``fetch_overhead``
  (at least 0), so the model's slot occupancy per job equals the engine's.

The caller checks that the Redis is local (or confirmed): the probe writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from qsim.calibrate.overhead import Overhead, idle_pickups, trimmed_mean
from qsim.calibrate.pools import runs_of
from qsim.calibrate.measured import measured_jobs
from qsim.scenario import Scenario

__all__ = ["probe", "probe_scenario"]

logger = logging.getLogger(__name__)

SERVICE = 0.01


def probe_scenario(*, duration: float = 4.0, rate: float = 30.0, concurrency: int = 4, seed: int = 1) -> Scenario:
    """The probe's workload: Poisson arrivals, a constant handler time, one worker (light load)."""
    return Scenario.from_dict({
        "name": "overhead-probe", "seed": seed, "duration": duration,
        "queues": [{"name": "probe"}],
        "jobs": [{"name": "probe", "queue": "probe", "arrival": {"kind": "poisson", "rate": rate},
                  "service": {"kind": "constant", "mean": SERVICE}}],
        "pools": [{"name": "probe", "queues": ["probe"], "workers": 1, "concurrency": concurrency}],
    })


def probe(redis_url: str, *, duration: float = 4.0, rate: float = 30.0, concurrency: int = 4,
          progress: Callable[[float], None] | None = None) -> Overhead:
    """Measure the engine's per-job overhead on ``redis_url`` (keys of its own, deleted afterwards).

    Raises:
        RedisUnavailable: Redis cannot be reached.  HarnessError: the worker did not start.
    """
    from qsim.harness.run import run_scenario

    scenario = probe_scenario(duration=duration, rate=rate, concurrency=concurrency)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a terminal: run here
        result = run_scenario(scenario, redis_url, progress=progress, drain_timeout=30.0)
    else:  # a notebook's running event loop: the harness runs its own loop in a thread
        with ThreadPoolExecutor(1) as pool:
            result = pool.submit(run_scenario, scenario, redis_url, progress=progress, drain_timeout=30.0).result()
    recs = result.records
    jobs = measured_jobs(recs.jobs.assign(last_start=np.nan))
    ok = recs.attempts[recs.attempts["result"] == "ok"]
    in_slot = (ok["end"] - ok["start"]).to_numpy(float) - SERVICE
    pickups = idle_pickups(jobs, runs_of(jobs, recs.attempts), concurrency)
    if pickups.size == 0 or in_slot.size == 0:
        raise RuntimeError("the probe completed no job")
    fetch = max(0.0, trimmed_mean(pickups))
    slot = trimmed_mean(in_slot)
    ack = max(0.0, slot - fetch)
    logger.info("probe: %s jobs, pickup %.2f ms, in-slot %.2f ms", len(ok), fetch * 1e3, slot * 1e3)
    return Overhead(fetch, ack, "probe", n=int(len(ok)), detail={
        "pickup_mean": fetch, "pickup_p50": float(np.median(pickups)), "pickup_p95": float(np.percentile(pickups, 95)),
        "in_slot_mean": slot, "in_slot_p50": float(np.median(in_slot)), "handler": SERVICE,
        "lost": float(result.summary["jobs"]["lost"])})
