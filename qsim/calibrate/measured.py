"""Measured jobs: the one table every source (qsim Redis, BullMQ Redis, CSV) produces.

``jobs`` — one row per job (times in seconds on the source's clock: Unix time
for Redis sources, whatever the CSV holds)::

    job_id        str    unique within the source
    type          str    job type (the job's name)
    queue         str    queue name
    priority      int    lower runs first
    enqueued      float  when the job could first run (added + initial delay)
    started       float  start of its first attempt (NaN: never, or not recorded)
    last_start    float  start of its last attempt (NaN: never, or not recorded)
    finished      float  end of its final attempt, completed or dead (NaN: unfinished)
    outcome       str    completed | dead | unfinished
    attempts      int    attempts made (-1: not recorded)
    failed_attempts int  attempts that failed (-1: not recorded)
    max_attempts  int    attempts allowed (-1: not recorded)
    worker        str    worker of its last attempt ("" unknown)
    backoff_kind  str    fixed | exponential | "" (none recorded)
    backoff_delay float  base delay (s)            backoff_max  float  cap (s; NaN: none)
    backoff_jitter float fraction                  timeout      float  per-attempt seconds (0: none)

``attempts`` — one row per attempt where the source records them (the qsim
engine does; BullMQ and CSV do not): the columns of
:data:`qsim.results.records.ATTEMPT_COLUMNS` (job_id, attempt, worker, start, end,
result in ok | failed | stalled | cutoff).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from qsim.errors import CalibrationError
from qsim.results.records import attempts_frame

__all__ = ["MEASURED_COLUMNS", "QueueConfig", "Measured", "measured_jobs", "parse_when", "in_window", "windowed",
           "data_window"]

MEASURED_COLUMNS: Mapping[str, str] = {
    "job_id": "object", "type": "object", "queue": "object", "priority": "int64",
    "enqueued": "float64", "started": "float64", "last_start": "float64", "finished": "float64",
    "outcome": "object", "attempts": "int64", "failed_attempts": "int64", "max_attempts": "int64",
    "worker": "object", "backoff_kind": "object", "backoff_delay": "float64", "backoff_max": "float64",
    "backoff_jitter": "float64", "timeout": "float64",
}
_DEFAULTS: Mapping[str, Any] = {
    "priority": 0, "started": math.nan, "last_start": math.nan, "finished": math.nan, "outcome": "",
    "attempts": -1, "failed_attempts": -1, "max_attempts": -1, "worker": "", "backoff_kind": "",
    "backoff_delay": math.nan, "backoff_max": math.nan, "backoff_jitter": 0.0, "timeout": 0.0,
}


@dataclass(frozen=True)
class QueueConfig:
    """A queue's limits as its source stores them (None: not set or not recorded)."""

    concurrency_limit: int | None = None
    rate_max: int | None = None
    rate_per: float | None = None
    rate_key: str | None = None
    aging: float = 0.0


@dataclass(frozen=True)
class Measured:
    """What a source read: jobs (and attempts), queue settings, the window, notes.

    Attributes:
        source: Where the jobs came from, for the report (``"qsim redis://.../0 prefix qsim"``).
        window: ``(start, end)`` of enqueue times the calibration covers.
        resolution: The clock's resolution in seconds (BullMQ: 0.001).
        notes: What the source could not read or had to assume.
        pickup_in_run: True when the source's recorded runs are known to include the pickup (qsim's
            engine: fetch stamp to acknowledgement stamp); None when the data must tell
            (:mod:`qsim.calibrate.overhead`).
    """

    jobs: pd.DataFrame
    attempts: pd.DataFrame = field(default_factory=attempts_frame)
    queues: Mapping[str, QueueConfig] = field(default_factory=dict)
    source: str = ""
    window: tuple[float, float] = (math.nan, math.nan)
    resolution: float = 1e-6
    notes: tuple[str, ...] = ()
    pickup_in_run: bool | None = None

    def with_notes(self, *notes: str) -> "Measured":
        return replace(self, notes=self.notes + tuple(notes))


def measured_jobs(columns: Mapping[str, Any] | pd.DataFrame) -> pd.DataFrame:
    """A jobs table in :data:`MEASURED_COLUMNS` from columns (missing optional ones get defaults).

    ``type`` and ``enqueued`` are required; ``job_id`` defaults to the row
    number, ``queue`` to ``"default"``, ``outcome`` to completed when
    ``finished`` is set (else unfinished).
    """
    df = pd.DataFrame(columns) if not isinstance(columns, pd.DataFrame) else columns
    n = len(df)
    out: dict[str, Any] = {}
    for name in ("type", "enqueued"):
        if name not in df:
            raise CalibrationError(f"measured jobs need a {name!r} column")
    out["job_id"] = df["job_id"].astype(str).to_numpy() if "job_id" in df else np.arange(n).astype(str)
    out["queue"] = df["queue"].astype(str).to_numpy() if "queue" in df else np.full(n, "default", dtype=object)
    for name, default in _DEFAULTS.items():
        out[name] = df[name].to_numpy() if name in df else np.full(n, default, dtype=object)
    out["type"] = df["type"].astype(str).to_numpy()
    out["enqueued"] = df["enqueued"].to_numpy()
    outcome = np.asarray(out["outcome"], dtype=object).copy()
    unset = np.array([not isinstance(o, str) or not o for o in outcome], dtype=bool)
    done = pd.notna(pd.to_numeric(pd.Series(out["finished"]), errors="coerce")).to_numpy()
    outcome[unset] = np.where(done[unset], "completed", "unfinished")
    out["outcome"] = outcome
    frame = pd.DataFrame({c: out[c] for c in MEASURED_COLUMNS})
    for c, t in MEASURED_COLUMNS.items():
        if t == "object":
            frame[c] = frame[c].fillna("").astype(str).astype(object)
        elif t == "float64":
            frame[c] = pd.to_numeric(frame[c], errors="coerce").astype(float)
        else:
            frame[c] = pd.to_numeric(frame[c], errors="coerce").fillna(_DEFAULTS.get(c, 0)).astype("int64")
    return frame


_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*(?:(\d+(?:\.\d+)?)\s*m)?"
                       r"\s*(?:(\d+(?:\.\d+)?)\s*s)?\s*$", re.IGNORECASE)


def parse_when(text: str | float | None, *, now: float, what: str = "--since") -> float | None:
    """A point in time: seconds (a number on the source's clock), an ISO date-time
    (UTC unless it says otherwise), or a duration back from ``now`` (``90s``,
    ``15m``, ``2h``, ``1d``, ``1h30m``)."""
    if text is None or text == "":
        return None
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip()
    try:
        value = float(s)
        if math.isfinite(value):
            return value
    except ValueError:
        pass
    m = _DURATION.match(s)
    if m and any(m.groups()):
        d, h, mi, sec = (float(g) if g else 0.0 for g in m.groups())
        return now - (d * 86400 + h * 3600 + mi * 60 + sec)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise CalibrationError(f"{what} must be seconds, an ISO date-time or a duration like 2h or 15m, "
                               f"got {s!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def in_window(jobs: pd.DataFrame, since: float | None, until: float | None) -> pd.DataFrame:
    """Jobs enqueued in ``[since, until)`` (either end open when None)."""
    keep = np.ones(len(jobs), dtype=bool)
    if since is not None:
        keep &= jobs["enqueued"].to_numpy(float) >= since
    if until is not None:
        keep &= jobs["enqueued"].to_numpy(float) < until
    return jobs[keep].reset_index(drop=True)


def windowed(m: Measured, since: str | float | None, until: str | float | None, *, now: float | None = None,
             start: float | None = None) -> Measured:
    """``m`` cut to the jobs enqueued in ``[since, until)``.

    ``since``/``until`` are parsed by :func:`parse_when`; durations count back
    from ``now`` (default: the last enqueue time in ``m``). ``start`` is the
    earliest time the source saw every job from (e.g. older jobs were
    trimmed): the window never starts before it. Raises CalibrationError for
    an empty window.
    """
    enq = m.jobs["enqueued"].to_numpy(float)
    if now is None:
        now = float(np.nanmax(enq)) if enq.size else 0.0
    lo = parse_when(since, now=now, what="--since")
    hi = parse_when(until, now=now, what="--until")
    if lo is not None and hi is not None and not hi > lo:
        raise CalibrationError(f"--until ({hi:.6g}) must be after --since ({lo:.6g})")
    if start is not None and math.isfinite(start):
        lo = start if lo is None else max(lo, start)
    jobs = in_window(m.jobs, lo, hi)
    if len(jobs) == 0:
        what = "" if lo is None and hi is None else \
            f" enqueued in the window [{'-inf' if lo is None else f'{lo:.6g}'}, {'now' if hi is None else f'{hi:.6g}'})"
        raise CalibrationError(f"no jobs{what} in {m.source or 'the source'}")
    ids = set(jobs["job_id"])
    attempts = m.attempts[m.attempts["job_id"].isin(ids)].reset_index(drop=True) if len(m.attempts) else m.attempts
    return replace(m, jobs=jobs, attempts=attempts, window=data_window(jobs["enqueued"].to_numpy(float), lo, hi))


def data_window(enqueued: np.ndarray, lo: float | None, hi: float | None) -> tuple[float, float]:
    """The calibration window: ``[lo, hi]`` cut to the data's own span ``[first, last]``.

    An end the data sets is moved out by half the mean gap between arrival
    instants (simultaneous arrivals, a batch, count once), so that ``n /
    (end - start)`` estimates the rate without the bias of counting both end
    points: with N instants, N / span = (N - 1) / (last - first).
    """
    e = np.unique(enqueued[np.isfinite(enqueued)])
    first, last = float(e[0]), float(e[-1])
    half = (last - first) / (2 * (e.size - 1)) if e.size > 1 else 0.0
    start = first - half if lo is None or lo < first - half else lo
    end = last + half if hi is None or hi > last + half else hi
    return start, end
