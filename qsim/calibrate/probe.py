"""The overhead probe: a short run on the real engine that measures ``[engine] fetch_overhead`` and
``ack_overhead`` for this Redis and machine — at light load, or at the user's concurrency over several loads.

It runs a scenario of its own with the engine harness
(:func:`qsim.harness.run.run_scenario`: real worker processes, keys under a
``qsim-run-<hex>`` prefix of their own, deleted afterwards): Poisson arrivals,
each job's handler sleeping a known constant time. Then (see
:mod:`qsim.calibrate.overhead`):

- pickup  = enqueue -> fetch stamp, for the jobs that found a slot free;
- in-slot = fetch stamp -> acknowledgement stamp, less the planned handler time;
- ``fetch_overhead`` = mean pickup; ``ack_overhead`` = mean in-slot - ``fetch_overhead``
  (at least 0), so the model's slot occupancy per job equals the engine's.

**At light load** (:func:`probe` without ``loads``): one worker, four slots,
about 8 % busy — the engine's floor. **Under load** (``loads=(0.1, 0.4, 0.7,
0.9)``, ``qsim calibrate --probe --concurrency N [--workers W]``): the pools of
the user's shape, one run per load (Poisson arrivals at ``load x slots /
handler time`` jobs/s for at least :data:`STEP` seconds and
:data:`MIN_JOBS_PER_LOAD` jobs; the first :data:`SETTLE` seconds of each left
out: the workers warm up), measured at the utilization it actually reached
(busy slot-seconds over slot-seconds). The rows ``(utilization,
fetch_overhead, ack_overhead)`` become the scenario's ``[engine]
overhead_by_load``, which the model reads at the load it simulates
(:mod:`qsim.spec.offered_load`). The handler's time (``service``) sets the job rate at
each load: near the user's mean service time, the probe's jobs per second at
a load are the user's. A load the engine cannot keep up with has no job that
found a slot free: its pickup is the lighter load's (the in-slot time, what a
saturated slot's cycle costs, is its own).

The caller checks that the Redis is local (or confirmed): the probe writes.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd

from qsim.calibrate.measured import measured_jobs
from qsim.calibrate.overhead import Overhead, idle_pickups, trimmed_mean
from qsim.calibrate.pools import runs_of
from qsim.errors import CalibrationError
from qsim.spec.scenario import Scenario

__all__ = ["probe", "probe_scenario", "SERVICE", "DEFAULT_LOADS", "STEP", "SETTLE", "MIN_JOBS_PER_LOAD", "MAX_STEP"]

logger = logging.getLogger(__name__)

#: The probe handler's time (s) unless told otherwise.
SERVICE = 0.01
#: Utilizations a probe under load steps through.
DEFAULT_LOADS = (0.1, 0.4, 0.7, 0.9)
#: Seconds at each load (at least); the first SETTLE of them are left out (the workers warm up).
STEP, SETTLE = 3.0, 0.5
#: Jobs at each load (at least; the run is longer at a low rate), up to MAX_STEP seconds.
MIN_JOBS_PER_LOAD, MAX_STEP = 150, 20.0
_MIN_ROW = 10  # fewer jobs in a step than this: no row


def probe_scenario(*, duration: float = 4.0, rate: float = 30.0, concurrency: int = 4, workers: int = 1,
                   service: float = SERVICE, seed: int = 1) -> Scenario:
    """The probe's workload: Poisson arrivals at ``rate`` for ``duration`` s, a constant handler time."""
    return Scenario.from_dict({
        "name": "overhead-probe", "seed": seed, "duration": duration,
        "queues": [{"name": "probe"}],
        "jobs": [{"name": "probe", "queue": "probe", "arrival": {"kind": "poisson", "rate": rate},
                  "service": {"kind": "constant", "mean": service}}],
        "pools": [{"name": "probe", "queues": ["probe"], "workers": workers, "concurrency": concurrency}],
    })


def _records(scenario: Scenario, redis_url: str,
             progress: Callable[[float], None] | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, float]:
    """Run a probe scenario: its measured jobs, attempts, runs and lost count."""
    result = _run(scenario, redis_url, progress)
    recs = result.records
    jobs = measured_jobs(recs.jobs.assign(last_start=np.nan))
    return jobs, recs.attempts, runs_of(jobs, recs.attempts), float(result.summary["jobs"]["lost"])


def _run(scenario: Scenario, redis_url: str, progress: Callable[[float], None] | None) -> Any:
    from qsim.harness.run import run_scenario

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # a terminal: run here
        return run_scenario(scenario, redis_url, progress=progress, drain_timeout=30.0)
    with ThreadPoolExecutor(1) as pool:  # a notebook's running event loop: the harness runs its own in a thread
        return pool.submit(run_scenario, scenario, redis_url, progress=progress, drain_timeout=30.0).result()


def _busy(runs: pd.DataFrame, lo: float, hi: float, slots: int) -> float:
    """Busy slot-seconds of ``runs`` within ``[lo, hi)`` over the slot-seconds there."""
    s, e = runs["start"].to_numpy(float), runs["end"].to_numpy(float)
    return float(np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None).sum() / (slots * (hi - lo)))


def _measure(jobs: pd.DataFrame, attempts: pd.DataFrame, runs: pd.DataFrame, slots: int, service: float,
             lo: float, hi: float, fetch_before: float = math.nan) -> dict[str, float] | None:
    """Pickup, in-slot time and utilization of the jobs enqueued in ``[lo, hi)`` (None: too few jobs).

    A saturated step has no job that found a slot free: its pickup is ``fetch_before`` (the
    lighter step's), and only the in-slot time, which is what a saturated slot's cycle costs, is new.
    """
    mine = jobs[(jobs["enqueued"] >= lo) & (jobs["enqueued"] < hi)]
    ok = attempts[(attempts["result"] == "ok") & attempts["job_id"].isin(set(mine["job_id"]))]
    in_slot = (ok["end"] - ok["start"]).to_numpy(float) - service
    pickups = idle_pickups(jobs, runs, slots, window=(lo, hi))
    if in_slot.size < _MIN_ROW or (pickups.size < _MIN_ROW and math.isnan(fetch_before)):
        return None
    fetch = max(0.0, trimmed_mean(pickups)) if pickups.size >= _MIN_ROW else fetch_before
    slot = trimmed_mean(in_slot)
    return {"utilization": _busy(runs, lo, hi, slots), "fetch": fetch, "ack": max(0.0, slot - fetch),
            "pickup_mean": fetch, "pickup_p50": float(np.median(pickups)) if pickups.size else math.nan,
            "pickup_p95": float(np.percentile(pickups, 95)) if pickups.size else math.nan, "in_slot_mean": slot,
            "in_slot_p50": float(np.median(in_slot)), "jobs": float(len(mine)), "pickups": float(pickups.size)}


def probe(redis_url: str, *, duration: float = 4.0, rate: float = 30.0, concurrency: int = 4, workers: int = 1,
          service: float = SERVICE, loads: Sequence[float] | None = None, step: float = STEP,
          min_jobs: int = MIN_JOBS_PER_LOAD, progress: Callable[[float], None] | None = None) -> Overhead:
    """Measure the engine's per-job overhead on ``redis_url`` (keys of its own, deleted afterwards).

    Without ``loads``: at light load (``rate`` jobs/s for ``duration`` s). With ``loads``
    (utilizations in (0, 1]): at each, on ``workers`` x ``concurrency`` slots; the result carries
    ``by_load`` and, as its scalars, the lightest load's overheads.

    Raises:
        RedisUnavailable: Redis cannot be reached.  HarnessError: the worker did not start.
        CalibrationError: a load outside (0, 1], or a handler time <= 0.
    """
    if not (service > 0 and math.isfinite(service)):
        raise CalibrationError(f"the probe's handler time must be > 0 s, got {service}")
    if loads is not None:
        bad = [u for u in loads if not 0 < u <= 1]
        if bad or not loads:
            raise CalibrationError(f"probe loads must be utilizations in (0, 1], such as 0.1,0.4,0.7,0.9, got "
                                   f"{','.join(map(str, loads)) or 'none'}")
        loads = sorted(set(loads))
    slots = workers * concurrency
    if not loads:
        jobs, attempts, runs, lost = _records(probe_scenario(duration=duration, rate=rate, concurrency=concurrency,
                                                             workers=workers, service=service), redis_url, progress)
        span = float(jobs["enqueued"].min()), float(np.nanmax(jobs["finished"].to_numpy(float)))
        row = _measure(jobs, attempts, runs, slots, service, span[0], span[1] + 1e-9)
        if row is None:
            raise RuntimeError("the probe completed too few jobs to measure")
        logger.info("probe: pickup %.2f ms, in-slot %.2f ms", row["fetch"] * 1e3, row["in_slot_mean"] * 1e3)
        return Overhead(row["fetch"], row["ack"], "probe", n=int(row["jobs"]), detail={
            "pickup_mean": row["pickup_mean"], "pickup_p50": row["pickup_p50"], "pickup_p95": row["pickup_p95"],
            "in_slot_mean": row["in_slot_mean"], "in_slot_p50": row["in_slot_p50"], "handler": service,
            "utilization": row["utilization"], "lost": lost})
    rows: list[dict[str, float]] = []
    lost = 0.0
    for i, u in enumerate(loads):
        level_rate = u * slots / service
        length = min(MAX_STEP, max(step, min_jobs / level_rate)) + SETTLE
        part = None if progress is None else (lambda f, i=i: progress((i + f) / len(loads)))
        jobs, attempts, runs, level_lost = _records(
            probe_scenario(duration=length, rate=level_rate, concurrency=concurrency, workers=workers,
                           service=service, seed=1 + i), redis_url, part)
        lost += level_lost
        t0 = float(jobs["enqueued"].min())
        row = _measure(jobs, attempts, runs, slots, service, t0 + SETTLE, t0 + length,
                       rows[-1]["fetch"] if rows else math.nan)
        if row is None and not rows and len(idle_pickups(jobs, runs, slots)) < _MIN_ROW:
            raise CalibrationError(f"at load {u:g} the engine kept no slot free (no pickup to measure): start "
                                   f"--loads with a lighter load, such as 0.1")
        if row is None:
            logger.warning("probe: too few jobs at load %.2f for a row", u)
            continue
        row["offered"] = u
        rows.append(row)
        logger.info("probe at %.0f%% offered (%.0f%% busy): pickup %.2f ms, in-slot %.2f ms", 100 * u,
                    100 * row["utilization"], row["fetch"] * 1e3, row["in_slot_mean"] * 1e3)
    if not rows:
        raise RuntimeError("the probe completed too few jobs at every load to measure")
    table: list[tuple[float, float, float]] = []
    for row in sorted(rows, key=lambda r: r["utilization"]):
        u = min(1.0, round(row["utilization"], 4))
        if not table or u > table[-1][0]:
            table.append((u, row["fetch"], row["ack"]))
    light = rows[0]
    return Overhead(light["fetch"], light["ack"], f"probe at {workers} x {concurrency} slots, {len(table)} loads",
                    n=int(sum(r["jobs"] for r in rows)), by_load=tuple(table), detail={
                        "handler": service, "workers": float(workers), "concurrency": float(concurrency),
                        "lost": lost},
                    note="; ".join(f"offered {r['offered']:.2g}: {r['utilization']:.2f} busy, pickup "
                                   f"{r['fetch'] * 1e3:.2f} ms" + (" (the lighter load's: no job found a slot free)"
                                                                  if r["pickups"] < _MIN_ROW else "")
                                   + f", in-slot {r['in_slot_mean'] * 1e3:.2f} ms ({int(r['jobs'])} jobs)"
                                   for r in rows))
