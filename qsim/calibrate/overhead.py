"""The per-job overhead around measured runs, as the scenario's ``[engine]`` part models it — per source.

The model knows three places for time a job spends outside its handler:

- ``fetch_overhead``: the slot is held that long before the handler starts
  (part of the wait, and of the slot's busy time);
- ``ack_overhead``: the slot is held that long after the handler returns
  (part of the latency and of the busy time);
- ``pickup_latency``: a job can be taken that long after its enqueue, holding
  **no** slot (part of the wait only).

What a source's records say decides which applies to the **pickup** (enqueue
to recorded start, for jobs that arrived while a slot was free: the low-load
periods, :func:`idle_pickups`):

1. **qsim's own engine** (``--from qsim``, and the probe): the recorded run
   (fetch stamp to acknowledgement stamp) is the slot's whole occupancy, since
   a worker acknowledges a finished job and fetches the next in one round
   trip. The pickup is ``fetch_overhead``, and it is *inside* the recorded
   runs: it is subtracted from them before the service fit (``in_run``), so
   the model's busy time per attempt equals the measured one. The probe also
   knows its handler's time and so measures ``ack_overhead``; from job
   records it cannot be told from the handler's time and stays 0.
2. **Another source whose data show the pickup holding a slot**: under load,
   a job that waited for a slot starts a pickup after the run that freed it
   ended (:func:`handover_gaps`: their median is at least half the idle
   pickup's). Then the pickup is ``fetch_overhead`` *between* runs: the slot
   is held, the runs are fitted as measured.
3. **Another source otherwise** (CSV, BullMQ: the handover shows no gap, or
   too few jobs waited to tell): the pickup is not known to hold a slot. It
   becomes ``pickup_latency``, and the runs are fitted as measured — so the
   fitted service is the runs' own distribution and the pickup sits in the
   wait.

Means are 5%-trimmed (scipy.stats.trim_mean): a loaded machine adds rare
long pauses that are not the typical cost. The overhead *under load* (a
table over utilization, ``overhead_by_load``) comes from the probe at several
loads (:mod:`qsim.calibrate.probe`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from qsim.calibrate.pools import max_overlap
from qsim.spec.redis_cost import RedisCost
from qsim.spec.scenario import EngineSettings

__all__ = ["Overhead", "NO_OVERHEAD", "estimate_from_jobs", "idle_pickups", "handover_gaps", "MIN_PICKUPS",
           "IN_RUN", "BETWEEN_RUNS", "LATENCY"]

#: Fewer low-load jobs (or, for the handover test, jobs that waited for a slot) than this: no estimate.
MIN_PICKUPS = 30
#: The treatments of the pickup (see the module docstring), as the report names them.
IN_RUN = "fetch_overhead inside the measured runs (subtracted before the fit)"
BETWEEN_RUNS = "fetch_overhead holding the slot between runs (runs fitted as measured)"
LATENCY = "pickup_latency: in the wait, holding no slot (runs fitted as measured)"


@dataclass(frozen=True)
class Overhead:
    """The ``[engine]`` overheads calibrated from a source, and where they came from.

    Attributes:
        fetch_overhead, ack_overhead: Seconds a slot is held before / after the handler.
        source: Where they came from (``probe``, ``measured jobs (low load)``, ``none``).
        n: Jobs they rest on.  detail: Figures behind them (pickup p50, handover gap...).
        note: What the reader should know.
        pickup_latency: Seconds before a job can be taken, holding no slot.
        in_run: Whether ``fetch_overhead + ack_overhead`` are inside the measured runs
            (then subtracted from them before the service fit).
        by_load: ``((utilization, fetch_overhead, ack_overhead), ...)`` measured at several loads
            (the probe at a concurrency): the scenario gets it as ``engine.overhead_by_load``.
        redis: Redis's own cost per job and per waiting worker, measured by the probe
            (:mod:`qsim.calibrate.redis_probe`): the scenario gets it as ``engine.redis_cpu_per_job_us``
            and ``engine.redis_idle_us_per_worker``.
    """

    fetch_overhead: float
    ack_overhead: float
    source: str
    n: int = 0
    detail: dict[str, float] = field(default_factory=dict)
    note: str = ""
    pickup_latency: float = 0.0
    in_run: bool = True
    by_load: tuple[tuple[float, float, float], ...] | None = None
    redis: RedisCost | None = None

    @property
    def in_slot(self) -> float:
        """Seconds of a measured run that are overhead, not service: subtracted from the runs before the fit
        (with ``by_load``: at the lightest load; :meth:`in_slot_at` reads the table)."""
        return self.fetch_overhead + self.ack_overhead if self.in_run else 0.0

    def in_slot_at(self, utilization: float) -> float:
        """:attr:`in_slot` at a utilization: ``by_load`` interpolated (the nearest row outside it)."""
        if not (self.by_load and self.in_run):
            return self.in_slot
        from qsim.spec.offered_load import overhead_at

        fetch, ack = overhead_at(self.engine(), utilization)
        return fetch + ack

    @property
    def treatment(self) -> str:
        """Which of the module docstring's treatments applies, in words."""
        if self.pickup_latency > 0:
            return LATENCY
        if self.by_load:
            return "overhead_by_load: the probe's overheads at several loads, the model reads the row of its load"
        if not (self.fetch_overhead or self.ack_overhead):
            return "none"
        return IN_RUN if self.in_run else BETWEEN_RUNS

    def engine(self, base: EngineSettings | None = None) -> EngineSettings:
        """The scenario's ``[engine]`` table with these overheads (the scalars 0 when ``by_load`` is given)."""
        from dataclasses import replace

        scalars = (0.0, 0.0) if self.by_load else (self.fetch_overhead, self.ack_overhead)
        engine = replace(base or EngineSettings(), fetch_overhead=scalars[0], ack_overhead=scalars[1],
                         pickup_latency=self.pickup_latency, overhead_by_load=self.by_load or None)
        if self.redis is None:
            return engine
        return replace(engine, redis_cpu_per_job_us=round(self.redis.cpu_per_job_us, 2),
                       redis_idle_us_per_worker=round(self.redis.idle_us_per_worker, 3))

    def as_dict(self) -> dict[str, Any]:
        """The overhead for the JSON report."""
        return {"fetch_overhead": self.fetch_overhead, "ack_overhead": self.ack_overhead,
                "pickup_latency": self.pickup_latency, "in_run": self.in_run, "treatment": self.treatment,
                "source": self.source, "n": self.n, **self.detail,
                **({"by_load": [list(r) for r in self.by_load]} if self.by_load else {}),
                **({"note": self.note} if self.note else {}),
                **({"redis": self.redis.as_dict()} if self.redis is not None else {})}


NO_OVERHEAD = Overhead(0.0, 0.0, "none")


def trimmed_mean(x: np.ndarray) -> float:
    """The 5%-trimmed mean (NaN when empty)."""
    x = np.asarray(x, dtype=float)
    return float(stats.trim_mean(x, 0.05)) if x.size else math.nan


def idle_pickups(jobs: pd.DataFrame, runs: pd.DataFrame, slots: int,
                 window: tuple[float, float] = (-math.inf, math.inf)) -> np.ndarray:
    """Waits (first start - enqueue) of the jobs that arrived while no job waited and a slot was free
    (of those enqueued in ``window``; every job counts in deciding whether one waited)."""
    enq = jobs["enqueued"].to_numpy(float)
    start = jobs["started"].to_numpy(float)
    ok = np.isfinite(enq) & np.isfinite(start) & (start >= enq)
    enq, start = enq[ok], start[ok]
    if enq.size == 0 or slots < 1:
        return np.zeros(0)
    e_sorted, s_sorted = np.sort(enq), np.sort(start)
    # jobs enqueued at or before this one (itself excluded, simultaneous ones included) not started before it
    waiting = np.searchsorted(e_sorted, enq, side="right") - 1 - np.searchsorted(s_sorted, enq, side="left")
    r0 = np.sort(runs["start"].to_numpy(float))
    r1 = np.sort(runs["end"].to_numpy(float))
    active = np.searchsorted(r0, enq, side="right") - np.searchsorted(r1, enq, side="right")
    idle = (waiting <= 0) & (active < slots) & (enq >= window[0]) & (enq < window[1])
    return np.asarray(start[idle] - enq[idle], dtype=float)


def handover_gaps(jobs: pd.DataFrame, runs: pd.DataFrame, pickup: float) -> np.ndarray:
    """For jobs that waited for a slot well beyond a pickup (``started - enqueued > 2 * pickup``): the
    time from the latest run end before their start (on their own worker, when workers are named) to
    their start. About 0 when a freed slot takes the next job at once; about a pickup when the pickup
    holds the slot between runs."""
    enq = jobs["enqueued"].to_numpy(float)
    start = jobs["started"].to_numpy(float)
    worker = jobs["worker"].to_numpy() if "worker" in jobs else np.full(len(jobs), "", dtype=object)
    waited = np.isfinite(enq) & np.isfinite(start) & (start - enq > 2 * pickup)
    if not waited.any() or not len(runs):
        return np.zeros(0)
    run_worker = runs["worker"].to_numpy() if "worker" in runs else np.full(len(runs), "", dtype=object)
    run_end = runs["end"].to_numpy(float)
    everyone = np.sort(run_end)
    gaps: list[np.ndarray] = []
    for w in sorted(set(worker[waited])):
        sel = waited & (worker == w)
        ends = np.sort(run_end[run_worker == w]) if w else everyone  # a job's own worker, when named
        if ends.size == 0:
            ends = everyone
        s = start[sel]
        i = np.searchsorted(ends, s, side="right") - 1
        gaps.append(s[i >= 0] - ends[i[i >= 0]])
    return np.concatenate(gaps) if gaps else np.zeros(0)


def estimate_from_jobs(jobs: pd.DataFrame, runs: pd.DataFrame, slots: int, *,
                       pickup_in_run: bool | None = None) -> Overhead:
    """The overheads of measured jobs (see the module docstring for the three treatments).

    Args:
        jobs, runs: The measured jobs and their runs (:func:`qsim.calibrate.pools.runs_of`).
        slots: The observed pools' slots (a slot is free below that many runs at once).
        pickup_in_run: True when the source's recorded runs are known to hold the pickup
            (qsim's engine); None: the data decide (the handover test), else the pickup is a latency.
    """
    waits = idle_pickups(jobs, runs, slots)
    busiest = max_overlap(runs["start"].to_numpy(), runs["end"].to_numpy()) if len(runs) else 0
    if waits.size < MIN_PICKUPS:
        return Overhead(0.0, 0.0, "none", n=int(waits.size), note=(
            f"only {waits.size} jobs arrived while a slot was free (< {MIN_PICKUPS}): no overhead estimate; "
            "run `qsim calibrate --probe` for the engine's"))
    pickup = max(0.0, trimmed_mean(waits))
    detail = {"pickup_mean": pickup, "pickup_p50": float(np.median(waits)),
              "pickup_p95": float(np.percentile(waits, 95)), "busiest": float(busiest)}
    source = "measured jobs (low load)"
    if pickup_in_run:
        return Overhead(pickup, 0.0, source, n=int(waits.size), detail=detail, in_run=True, note=(
            "qsim's engine records a run from its fetch to its acknowledgement: the pickup is inside the runs, "
            "fetch_overhead is subtracted from them; ack_overhead is not observable in job records (it stays in "
            "the fitted service; `--probe` measures it)"))
    gaps = handover_gaps(jobs, runs, detail["pickup_p95"])
    detail["handovers"] = float(gaps.size)
    if gaps.size >= MIN_PICKUPS:
        detail["handover_gap_p50"] = float(np.median(gaps))
        if detail["handover_gap_p50"] >= 0.5 * detail["pickup_p50"] > 0:
            return Overhead(pickup, 0.0, source, n=int(waits.size), detail=detail, in_run=False, note=(
                f"under load a freed slot took its next job {detail['handover_gap_p50'] * 1e3:.3g} ms (median of "
                f"{gaps.size}) after the run before it ended, about a pickup ({detail['pickup_p50'] * 1e3:.3g} ms): "
                "the pickup holds the slot, between runs; the runs are fitted as measured"))
        why = (f"under load a freed slot took its next job {detail['handover_gap_p50'] * 1e3:.3g} ms (median of "
               f"{gaps.size}) after the run before it ended, far less than a pickup")
    else:
        why = f"too few jobs waited for a slot ({gaps.size} < {MIN_PICKUPS}) to see whether a pickup holds one"
    return Overhead(0.0, 0.0, source, n=int(waits.size), detail=detail, pickup_latency=pickup, in_run=False, note=(
        f"{why}: the pickup ({pickup * 1e3:.3g} ms) is not known to hold a slot, so it is engine.pickup_latency "
        "(in the wait) and the runs are fitted as measured"))
