"""The Summary: one function turns records into the JSON contract of DESIGN.md.

The model, the engine harness and the analysis all call :func:`summarize`, so a
prediction and a measurement are the same quantity, defined the same way:

- statistics cover jobs enqueued at or after ``warmup``;
- ``wait`` is enqueue -> start of the first attempt (jobs that started);
- ``latency`` is enqueue -> final success (completed jobs only);
- the measured window runs from ``warmup`` to the last completion;
  ``throughput`` (completed per second) and ``utilization`` (busy slot-seconds
  over available slot-seconds) are over that window;
- ``lost`` counts jobs that are neither completed, dead nor unfinished;
- ``max_depth`` of a queue is the most jobs that were enqueued and not yet
  started at any moment of the window.

Empty statistics (no job started, none completed) are ``null`` in JSON.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from qsim.records import Records

__all__ = ["summarize", "stats", "STAT_KEYS"]

STAT_KEYS = ("mean", "p50", "p95", "p99", "max")


def stats(values: pd.Series | np.ndarray) -> dict[str, float | None]:
    """mean, p50, p95, p99 and max of ``values`` (NaNs dropped; None when empty)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {k: None for k in STAT_KEYS}
    p50, p95, p99 = np.percentile(x, [50, 95, 99])
    return {"mean": float(x.mean()), "p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(x.max())}


def _max_depth(enqueued: np.ndarray, started: np.ndarray, warmup: float, end: float) -> int:
    """Most jobs enqueued and not yet started at any moment of [warmup, end]."""
    if enqueued.size == 0:
        return 0
    times = np.concatenate([enqueued, started[~np.isnan(started)]])
    steps = np.concatenate([np.ones(enqueued.size), -np.ones(int((~np.isnan(started)).sum()))])
    order = np.lexsort((steps, times))  # at equal times, starts (-1) before arrivals (+1)
    depth = np.cumsum(steps[order])
    t = times[order]
    inside = (t >= warmup) & (t <= end)
    before = t < warmup
    at_warmup = depth[before][-1] if before.any() else 0.0
    return int(max(at_warmup, depth[inside].max() if inside.any() else 0.0))


def summarize(records: Records, *, scenario: str, source: str, seed: int, warmup: float = 0.0) -> dict[str, Any]:
    """The Summary of one run (see the module docstring for every definition)."""
    jobs = records.jobs
    measured = jobs[jobs["enqueued"] >= warmup]
    done = measured[measured["outcome"] == "completed"]
    counts = measured["outcome"].value_counts()

    finished = jobs.loc[jobs["outcome"] == "completed", "finished"]
    end = float(finished.max()) if len(finished) else float(jobs["finished"].max()) if jobs["finished"].notna().any() else warmup
    window = max(end - warmup, 0.0)

    wait = measured["started"] - measured["enqueued"]
    latency = done["finished"] - done["enqueued"]
    capacity = records.slot_seconds(warmup, end)

    by_type = {}
    for name, group in measured.groupby("type", sort=True):
        ok = group[group["outcome"] == "completed"]
        by_type[str(name)] = {
            "completed": int(len(ok)),
            "dead": int((group["outcome"] == "dead").sum()),
            "wait": stats(group["started"] - group["enqueued"]),
            "latency": stats(ok["finished"] - ok["enqueued"]),
        }
    by_queue = {}
    for name, group in measured.groupby("queue", sort=True):
        every = jobs[jobs["queue"] == name]
        by_queue[str(name)] = {
            "completed": int((group["outcome"] == "completed").sum()),
            "dead": int((group["outcome"] == "dead").sum()),
            "max_depth": _max_depth(every["enqueued"].to_numpy(float), every["started"].to_numpy(float), warmup, end),
            "wait": stats(group["started"] - group["enqueued"]),
        }

    return {
        "scenario": scenario,
        "source": source,
        "seed": int(seed),
        "jobs": {
            "arrived": int(len(measured)),
            "completed": int(counts.get("completed", 0)),
            "dead": int(counts.get("dead", 0)),
            "failed_attempts": int(measured["failed_attempts"].sum()),
            "stalled": int(measured["stalled"].sum()),
            "unfinished": int(counts.get("unfinished", 0)),
            "lost": int(counts.get("lost", 0)),
        },
        "throughput": float(len(done) / window) if window > 0 else 0.0,
        "wait": stats(wait),
        "latency": stats(latency),
        "utilization": float(_busy(records, warmup, end) / capacity) if capacity > 0 else 0.0,
        "by_type": by_type,
        "by_queue": by_queue,
    }


def _busy(records: Records, start: float, end: float) -> float:
    """Slot-seconds spent running attempts inside [start, end]."""
    a = records.attempts
    if len(a):
        s, e = a["start"].to_numpy(float), a["end"].to_numpy(float)
    else:  # no attempt table: one span per job, first start to finish
        j = records.jobs
        s, e = j["started"].to_numpy(float), j["finished"].to_numpy(float)
    e = np.where(np.isnan(e), end, e)
    ok = ~np.isnan(s)
    return float(np.clip(np.minimum(e[ok], end) - np.maximum(s[ok], start), 0, None).sum())
