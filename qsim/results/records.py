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

``workers`` — per pool, how many of its processes were taking work over time,
as (time, processes) steps starting at time 0 (the windows' ``workers``,
:mod:`qsim.results.windows`); empty when a source does not know its pools.

Plain, compact columns: every source gives the same dtypes — ``str``
columns are ``object``, ``int`` columns ``int64``, times ``float64`` — so a
records frame behaves like any pandas frame (assign any value, concatenate
model and engine frames and keep the dtypes). What keeps the model's frames
compact at millions of rows is sharing, not narrow dtypes: a name column
(:func:`name_column`: ``type``, ``queue``, ``worker``, ``outcome``, ``parent``,
the attempts' ``worker`` and ``result``) holds one ``str`` object per distinct
name, each row a pointer to it, and the model's attempts table shares the jobs
table's arrays where they hold the same values (pandas copy-on-write: a write
to either copies then). A source may still hand :func:`jobs_frame` a
``category`` or a narrower int column (:func:`categorical`, :func:`small_ints`):
it is kept as it is, and the values, the CSV and the Summary are the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["JOB_COLUMNS", "ATTEMPT_COLUMNS", "OUTCOMES", "ATTEMPT_RESULTS", "Records", "jobs_frame", "attempts_frame",
           "name_column", "categorical", "small_ints", "copy_on_write"]

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


Column = Sequence[Any] | np.ndarray | pd.Categorical | pd.Series


def name_column(codes: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """A plain ``str`` column (``object``) that costs a pointer a row: row ``i`` is ``names[codes[i]]``,
    the very same ``str`` object for every row of one name (no copy of the text per row)."""
    table = np.empty(len(names), dtype=object)
    table[:] = list(names)  # (np.asarray would make a str array of a list of strings)
    return table[np.asarray(codes, dtype=np.intp)] if len(table) else np.empty(len(codes), dtype=object)


def copy_on_write() -> bool:
    """Whether pandas copies a shared column before writing to it (always from pandas 3; in pandas 2 when
    ``pd.options.mode.copy_on_write`` is on): then frames may share arrays safely."""
    if int(pd.__version__.split(".")[0]) >= 3:
        return True
    return pd.options.mode.copy_on_write is True


def categorical(codes: np.ndarray, names: Sequence[str]) -> pd.Categorical | np.ndarray:
    """A compact ``str`` column: row ``i`` is ``names[codes[i]]`` (every code in ``range(len(names))``).

    Its categories are the names in use, sorted, so counting, mapping, sorting
    and grouping by it give what they give on plain strings. Names that repeat
    give a plain ``object`` array.
    """
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        c = c.astype(np.int64)
    if len(set(names)) < len(names):
        plain: np.ndarray = np.asarray(list(names), dtype=object)[c]
        return plain
    used = np.flatnonzero(np.bincount(c, minlength=len(names))).tolist() if c.size else []
    order = sorted(used, key=lambda k: names[k])
    if order != list(range(len(names))):  # code k -> the place of names[k] among the sorted names in use
        rank = np.full(len(names), -1, dtype=np.int64)
        rank[order] = np.arange(len(order))
        c = small_ints(rank)[c]
    dtype = pd.CategoricalDtype(pd.Index([names[k] for k in order], dtype=object))
    return pd.Categorical.from_codes(c, dtype=dtype)


def small_ints(values: Sequence[int] | np.ndarray) -> np.ndarray:
    """A compact ``int`` column: the values in the narrowest of int8, int16, int32, int64 that holds them."""
    x = np.asarray(values)
    if x.dtype.kind not in "iub":
        x = x.astype(np.int64)
    lo, hi = (int(x.min()), int(x.max())) if x.size else (0, 0)
    for t in (np.int8, np.int16, np.int32):
        info = np.iinfo(t)
        if info.min <= lo and hi <= info.max:
            return x.astype(t, copy=False)
    return x.astype(np.int64, copy=False)


def _column(values: Column, dtype: str) -> Any:
    if dtype == "object" and isinstance(values, pd.Categorical):
        return values  # compact, kept as it is
    if isinstance(values, pd.Series) and (values.dtype == dtype or (dtype == "int64" and values.dtype.kind == "i")):
        return values  # another frame's column: shared under copy-on-write (pandas tracks the reference)
    x = np.asarray(values)
    if dtype == "int64" and x.dtype.kind == "i":
        return x  # any width
    if dtype == "object":  # kept object (not inferred as pandas' str dtype, which would copy it)
        return pd.Series(x.astype(object, copy=False), dtype=object, copy=False)
    return x.astype(dtype, copy=False)


def _frame(columns: Mapping[str, Column], schema: Mapping[str, str], what: str) -> pd.DataFrame:
    missing = [c for c in schema if c not in columns]
    extra = [c for c in columns if c not in schema]
    if missing or extra:
        raise ValueError(f"{what} columns: missing {missing}, unknown {extra}")
    # copy=False: the frame owns the arrays it is given (they are not copied once more)
    return pd.DataFrame({c: _column(columns[c], t) for c, t in schema.items()}, copy=False)


def jobs_frame(columns: Mapping[str, Column]) -> pd.DataFrame:
    """A jobs table from column arrays (every column of :data:`JOB_COLUMNS`)."""
    df = _frame(columns, JOB_COLUMNS, "jobs")
    outcome = df["outcome"]
    if isinstance(outcome.dtype, pd.CategoricalDtype):  # the categories in use (Series.unique would copy)
        codes = outcome.cat.codes.to_numpy()
        used = np.unique(codes)
        values = set(outcome.cat.categories[used[used >= 0]]) | ({"<missing>"} if used.size and used[0] < 0 else set())
    else:
        values = set(outcome.to_numpy())  # (a set of the array: five times faster than of the Series)
    bad = values - set(OUTCOMES)
    if bad:
        raise ValueError(f"jobs outcome must be one of {OUTCOMES}, got {sorted(bad)}")
    return df


def attempts_frame(columns: Mapping[str, Column] | None = None) -> pd.DataFrame:
    """An attempts table from column arrays (empty when ``columns`` is None)."""
    if columns is None:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in ATTEMPT_COLUMNS.items()})
    return _frame(columns, ATTEMPT_COLUMNS, "attempts")


@dataclass(frozen=True)
class Records:
    """Everything one run (model or engine) recorded, ready for :func:`qsim.results.summary.summarize`."""

    jobs: pd.DataFrame
    attempts: pd.DataFrame = field(default_factory=attempts_frame)
    slots: tuple[tuple[float, int], ...] = ((0.0, 0),)
    extra: Mapping[str, pd.DataFrame] = field(default_factory=dict)  # e.g. "timeseries", "drains"
    workers: Mapping[str, tuple[tuple[float, int], ...]] = field(default_factory=dict)

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

