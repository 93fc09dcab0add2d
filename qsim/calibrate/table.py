"""Measured jobs from a table: a CSV file or a pandas DataFrame, one row per job.

Columns (the ones ``qsim simulate --out`` writes to ``jobs.csv``), times in
seconds on any one clock:

- required: ``type``, ``enqueued``, ``started``, ``finished`` (``started`` /
  ``finished`` empty for a job that never started / finished);
- optional: ``queue`` (default ``default``), ``attempts`` (default 1),
  ``outcome`` (completed | dead | unfinished | lost; default completed when
  ``finished`` is set), ``priority`` (default 0), and also ``job_id``,
  ``failed_attempts``, ``max_attempts``, ``worker``, ``timeout``.

Without ``failed_attempts``, a completed job failed ``attempts - 1`` times
and a dead job every attempt; without ``max_attempts``, a type's jobs were
allowed the most attempts any of its jobs made. A job's run is
``finished - started`` when it made one attempt (with several, the table
does not say when the last one started).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qsim.calibrate.measured import Measured, measured_jobs
from qsim.errors import CalibrationError

__all__ = ["REQUIRED", "OPTIONAL", "read_table", "measured_from_table"]

REQUIRED = ("type", "enqueued", "started", "finished")
OPTIONAL = ("queue", "attempts", "outcome", "priority", "job_id", "failed_attempts", "max_attempts", "worker",
            "timeout")
_OUTCOMES = ("completed", "dead", "unfinished", "lost")


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a jobs CSV; a missing file, a file that is not CSV or lacks a column is a CalibrationError."""
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype={"type": str, "queue": str, "job_id": str, "worker": str, "outcome": str},
                         keep_default_na=True)
    except FileNotFoundError:
        raise CalibrationError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CalibrationError(f"{path}: cannot be read: {e}") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise CalibrationError(f"{path}: not a CSV table of jobs: {str(e).splitlines()[0]}") from None
    return df


def _numbers(df: pd.DataFrame, column: str, label: str, *, required: bool) -> np.ndarray:
    raw = df[column]
    values = pd.to_numeric(raw, errors="coerce")
    bad = values.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise CalibrationError(f"{label} line {row + 2}: {column} is not a number: {str(raw.iloc[row])[:40]!r}")
    if required and values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0])
        raise CalibrationError(f"{label} line {row + 2}: {column} is empty")
    out = values.to_numpy(float)
    if not np.isfinite(out[~np.isnan(out)]).all():
        raise CalibrationError(f"{label}: {column} holds a value that is not finite")
    return out


def measured_from_table(df: pd.DataFrame, *, label: str = "table") -> Measured:
    """Check a jobs table (see the module docstring) and turn it into measured jobs."""
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise CalibrationError(f"{label} has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                               f"(needs {', '.join(REQUIRED)}; optional: {', '.join(OPTIONAL[:4])})")
    if len(df) == 0:
        raise CalibrationError(f"{label} holds no jobs")
    cols: dict[str, Any] = {"type": df["type"].astype(str).to_numpy()}
    if df["type"].isna().any():
        row = int(np.flatnonzero(df["type"].isna().to_numpy())[0])
        raise CalibrationError(f"{label} line {row + 2}: type is empty")
    for c in ("enqueued", "started", "finished"):
        cols[c] = _numbers(df, c, label, required=c == "enqueued")
    n = len(df)
    attempts = _numbers(df, "attempts", label, required=False) if "attempts" in df else np.ones(n)
    attempts = np.where(np.isnan(attempts), np.where(np.isfinite(cols["started"]), 1, 0), attempts).astype(np.int64)
    if "outcome" in df:
        outcome = df["outcome"].fillna("").astype(str).str.strip().to_numpy(dtype=object)
        outcome[outcome == ""] = np.where(np.isfinite(cols["finished"][outcome == ""]), "completed", "unfinished")
        bad = sorted(set(outcome) - set(_OUTCOMES))
        if bad:
            raise CalibrationError(f"{label}: outcome must be one of {', '.join(_OUTCOMES)}, got {bad[0]!r}")
        outcome[outcome == "lost"] = "unfinished"
    else:
        outcome = np.where(np.isfinite(cols["finished"]), "completed", "unfinished").astype(object)
    if "failed_attempts" in df:
        failed = np.nan_to_num(_numbers(df, "failed_attempts", label, required=False), nan=-1).astype(np.int64)
    else:
        failed = np.where(outcome == "completed", attempts - 1, np.where(outcome == "dead", attempts, -1))
    cols.update(outcome=outcome, attempts=attempts, failed_attempts=failed)
    for c in ("queue", "job_id", "worker"):
        if c in df:
            cols[c] = df[c].fillna("").astype(str).to_numpy()
    if "queue" in cols:
        cols["queue"] = np.where(cols["queue"] == "", "default", cols["queue"])
    if "priority" in df:
        cols["priority"] = np.nan_to_num(_numbers(df, "priority", label, required=False)).astype(np.int64)
    if "timeout" in df:
        cols["timeout"] = np.nan_to_num(_numbers(df, "timeout", label, required=False))
    if "max_attempts" in df:
        cols["max_attempts"] = np.nan_to_num(_numbers(df, "max_attempts", label, required=False), nan=-1).astype(np.int64)
    else:
        most = pd.Series(attempts).groupby(cols["type"]).transform("max").to_numpy()
        cols["max_attempts"] = np.maximum(most, 1)
    jobs = measured_jobs(cols)
    bad_order = np.isfinite(jobs["started"]) & (jobs["started"] < jobs["enqueued"] - 1e-9)
    if bad_order.any():
        row = int(np.flatnonzero(bad_order.to_numpy())[0])
        raise CalibrationError(f"{label} line {row + 2}: started ({jobs['started'].iloc[row]}) is before "
                               f"enqueued ({jobs['enqueued'].iloc[row]})")
    notes = ("the table records no backoff: retried types get the default (exponential, 1 s, max 60 s)",) \
        if (jobs["max_attempts"] > 1).any() else ()
    return Measured(jobs=jobs, source=label, resolution=1e-6, notes=notes)
