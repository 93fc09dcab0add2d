"""Per-job records: the one row format that the model and the engine both emit.

Records are columnar (one pandas DataFrame per table), not a Python object per
job, so runs of millions of jobs stay cheap. Times are seconds since the start
of the run (the model's clock, or Redis's clock minus the run's start).

``jobs`` — one row per job::

    job_id     str    unique within the run
    type       str    job type name
    queue      str    queue name
    priority   int    lower runs first
    enqueued   float  when the job was added
    started    float  start of its first attempt (NaN if it never started)
    finished   float  end of its final attempt (NaN if unfinished)
    attempts   int    attempts started
    failed_attempts int  attempts that failed (error or timeout)
    stalled    int    times it was found stalled and put back (a shutdown hand-back is not a stall)
    worker     str    the worker (process) of its last attempt ("" if none)
    outcome    str    completed | dead | unfinished | lost
    parent     str    id of the flow/fan-out parent ("" if none)

``attempts`` — one row per attempt (job_id, attempt, worker, start, end,
result in ok | failed | timeout | stalled | cutoff); may be empty when a source
does not track attempts, then busy time is taken from the jobs table.

``slots`` — how many worker slots existed over time, as (time, slots) steps
starting at time 0, so utilization can be integrated when pools grow or shrink.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["JOB_COLUMNS", "ATTEMPT_COLUMNS", "OUTCOMES", "ATTEMPT_RESULTS", "Records", "jobs_frame", "attempts_frame"]

JOB_COLUMNS: Mapping[str, str] = {
    "job_id": "object", "type": "object", "queue": "object", "priority": "int64",
    "enqueued": "float64", "started": "float64", "finished": "float64",
    "attempts": "int64", "failed_attempts": "int64", "stalled": "int64",
    "worker": "object", "outcome": "object", "parent": "object",
}
ATTEMPT_COLUMNS: Mapping[str, str] = {
    "job_id": "object", "attempt": "int64", "worker": "object",
    "start": "float64", "end": "float64", "result": "object",
}
OUTCOMES = ("completed", "dead", "unfinished", "lost")
ATTEMPT_RESULTS = ("ok", "failed", "timeout", "stalled", "cutoff")


def _frame(columns: Mapping[str, Sequence[Any] | np.ndarray], schema: Mapping[str, str], what: str) -> pd.DataFrame:
    missing = [c for c in schema if c not in columns]
    extra = [c for c in columns if c not in schema]
    if missing or extra:
        raise ValueError(f"{what} columns: missing {missing}, unknown {extra}")
    return pd.DataFrame({c: np.asarray(columns[c]) for c in schema}).astype(dict(schema))


def jobs_frame(columns: Mapping[str, Sequence[Any] | np.ndarray]) -> pd.DataFrame:
    """A jobs table from column arrays (every column of :data:`JOB_COLUMNS`)."""
    df = _frame(columns, JOB_COLUMNS, "jobs")
    bad = set(df["outcome"]) - set(OUTCOMES)
    if bad:
        raise ValueError(f"jobs outcome must be one of {OUTCOMES}, got {sorted(bad)}")
    return df


def attempts_frame(columns: Mapping[str, Sequence[Any] | np.ndarray] | None = None) -> pd.DataFrame:
    """An attempts table from column arrays (empty when ``columns`` is None)."""
    if columns is None:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in ATTEMPT_COLUMNS.items()})
    return _frame(columns, ATTEMPT_COLUMNS, "attempts")


@dataclass(frozen=True)
class Records:
    """Everything one run (model or engine) recorded, ready for :func:`qsim.summary.summarize`."""

    jobs: pd.DataFrame
    attempts: pd.DataFrame = field(default_factory=attempts_frame)
    slots: tuple[tuple[float, int], ...] = ((0.0, 0),)
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)  # e.g. "timeseries", "drains"

    def slot_seconds(self, start: float, end: float) -> float:
        """Integral of the slot count over ``[start, end]``."""
        if end <= start:
            return 0.0
        times = [t for t, _ in self.slots] + [float("inf")]
        total = 0.0
        for (t, n), t_next in zip(self.slots, times[1:]):
            lo, hi = max(t, start), min(t_next, end)
            if hi > lo:
                total += n * (hi - lo)
        return total

