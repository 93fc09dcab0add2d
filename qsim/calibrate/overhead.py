"""The engine's per-job overhead, as the scenario's ``[engine]`` part models it.

The model holds a slot for ``fetch_overhead`` before a job's recorded start
(so it counts in the wait) and for ``ack_overhead`` after the handler returns
(so it counts in the run): a slot is busy ``fetch_overhead + service +
ack_overhead`` per attempt. On the engine, a job's recorded run (fetch stamp
to acknowledgement stamp) is the slot's whole occupancy, since a worker
acknowledges a finished job and fetches the next one in the same round trip;
and a job that finds an idle worker waits the pickup latency (enqueue to
fetch). So:

- ``fetch_overhead`` = the mean pickup latency of jobs that arrived when no
  job was waiting and a slot was free (the low-load periods of the measured
  jobs, or the probe's light load);
- ``ack_overhead`` = the in-slot time beyond the handler's own run, less
  ``fetch_overhead`` — only the probe can see it, as it knows how long its
  handler ran; from measured jobs it cannot be told apart from the handler's
  time and stays 0 (it is then part of the fitted service);
- the fitted service is the measured run less both, so the model's slot
  occupancy equals the measured one.

Means are 5%-trimmed (scipy.stats.trim_mean): a loaded machine adds rare
long pauses that are not the engine's typical cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from qsim.calibrate.pools import max_overlap

__all__ = ["Overhead", "NO_OVERHEAD", "estimate_from_jobs", "idle_pickups", "MIN_PICKUPS"]

#: Fewer low-load jobs than this: no estimate.
MIN_PICKUPS = 30


@dataclass(frozen=True)
class Overhead:
    """``[engine] fetch_overhead`` and ``ack_overhead`` and where they came from."""

    fetch_overhead: float
    ack_overhead: float
    source: str
    n: int = 0
    detail: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def in_slot(self) -> float:
        """Seconds of a run that are overhead, not service: subtracted from measured runs."""
        return self.fetch_overhead + self.ack_overhead

    def as_dict(self) -> dict[str, Any]:
        """The overhead for the JSON report."""
        return {"fetch_overhead": self.fetch_overhead, "ack_overhead": self.ack_overhead, "source": self.source,
                "n": self.n, **self.detail, **({"note": self.note} if self.note else {})}


NO_OVERHEAD = Overhead(0.0, 0.0, "none")


def trimmed_mean(x: np.ndarray) -> float:
    """The 5%-trimmed mean (NaN when empty)."""
    x = np.asarray(x, dtype=float)
    return float(stats.trim_mean(x, 0.05)) if x.size else math.nan


def idle_pickups(jobs: pd.DataFrame, runs: pd.DataFrame, slots: int) -> np.ndarray:
    """Waits (first start - enqueue) of the jobs that arrived while no job waited and a slot was free."""
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
    idle = (waiting <= 0) & (active < slots)
    return np.asarray(start[idle] - enq[idle], dtype=float)


def estimate_from_jobs(jobs: pd.DataFrame, runs: pd.DataFrame, slots: int) -> Overhead:
    """``fetch_overhead`` from the low-load periods of measured jobs (``ack_overhead`` stays 0)."""
    waits = idle_pickups(jobs, runs, slots)
    busiest = max_overlap(runs["start"].to_numpy(), runs["end"].to_numpy()) if len(runs) else 0
    if waits.size < MIN_PICKUPS:
        return Overhead(0.0, 0.0, "none", n=int(waits.size), note=(
            f"only {waits.size} jobs arrived while a slot was free (< {MIN_PICKUPS}): no overhead estimate; "
            "run `qsim calibrate --probe` for the engine's"))
    f = max(0.0, trimmed_mean(waits))
    return Overhead(f, 0.0, "measured jobs (low load)", n=int(waits.size),
                    detail={"pickup_p50": float(np.median(waits)), "busiest": float(busiest)},
                    note="ack_overhead is not observable in job records: it stays in the fitted service "
                         "(`--probe` measures it)")
