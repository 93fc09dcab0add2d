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

Impossible rows (:func:`impossible_rows`) are refused with their line number:
an empty ``enqueued``, a time that is not finite, ``started`` before
``enqueued`` (the job ran before it existed), ``finished`` before ``started``
(a negative run time) or before ``enqueued``, a negative ``attempts``,
``failed_attempts`` or ``timeout``, more failed attempts than attempts. With
``drop_bad_rows=True`` (``qsim calibrate --from csv --drop-bad-rows``) they
are left out instead, and the calibration's warnings say how many, of which
kind, and the first line of each kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qsim.calibrate.measured import Measured, measured_jobs
from qsim.errors import CalibrationError

__all__ = ["REQUIRED", "OPTIONAL", "read_table", "measured_from_table", "impossible_rows"]

REQUIRED = ("type", "enqueued", "started", "finished")
OPTIONAL = ("queue", "attempts", "outcome", "priority", "job_id", "failed_attempts", "max_attempts", "worker",
            "timeout")
_OUTCOMES = ("completed", "dead", "unfinished", "lost")
_NUMERIC_OPTIONAL = ("attempts", "failed_attempts", "timeout", "priority", "max_attempts")


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


def _numbers(df: pd.DataFrame, column: str, label: str) -> np.ndarray:
    """A numeric column as floats (NaN where empty); text where a number belongs is an error naming its line."""
    raw = df[column]
    values = pd.to_numeric(raw, errors="coerce")
    bad = values.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise CalibrationError(f"{label} line {row + 2}: {column} is not a number: {str(raw.iloc[row])[:40]!r}")
    return values.to_numpy(float)


def _column(df: pd.DataFrame, column: str) -> np.ndarray:
    """A numeric column as floats (NaN where empty; the whole column NaN when absent)."""
    return pd.to_numeric(df[column], errors="coerce").to_numpy(float) if column in df else np.full(len(df), np.nan)


#: The largest time read as seconds: the year 5138 in Unix time. Epoch milliseconds (about 1.7e12 today) are above
#: it, and would be read as jobs 1,000 times slower and rarer than they were.
MAX_SECONDS = 1e11


def _check_seconds(df: pd.DataFrame, label: str) -> None:
    """Refuse times that are not seconds (milliseconds since the epoch, most often), naming the column."""
    for c in ("enqueued", "started", "finished"):
        values = _column(df, c)
        big = np.isfinite(values) & (np.abs(values) > MAX_SECONDS)  # (not finite: an impossible row)
        if big.any():
            row = int(np.flatnonzero(big)[0])
            raise CalibrationError(f"{label} line {row + 2}: {c} is {values[row]:.6g}, not a time in seconds "
                                   "(milliseconds since the epoch? divide by 1000): the table's times are seconds")


#: The kinds of impossible row, in the order they are looked for: (name, what the message says).
_KINDS = (
    ("enqueued empty", "enqueued is empty"),
    ("not finite", "a time that is not finite"),
    ("started before enqueued", "started ({started}) is before enqueued ({enqueued}): the job ran before it existed"),
    ("finished before started", "finished ({finished}) is before started ({started}): a negative run time"),
    ("finished before enqueued", "finished ({finished}) is before enqueued ({enqueued})"),
    ("negative count", "attempts, failed_attempts or timeout is negative"),
    ("more failures than attempts", "failed_attempts is more than attempts"),
)
_SLACK = 1e-9  # seconds: times written with rounding may tie


def impossible_rows(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """The impossible rows of a jobs table (see the module docstring): ``{kind: row positions}``,
    each row under the first kind it shows (kinds as in :data:`_KINDS`), kinds without rows left out."""
    enq, start, fin = _column(df, "enqueued"), _column(df, "started"), _column(df, "finished")
    attempts, failed, timeout = _column(df, "attempts"), _column(df, "failed_attempts"), _column(df, "timeout")
    with np.errstate(invalid="ignore"):
        tests = {
            "enqueued empty": np.isnan(enq),
            "not finite": np.isinf(enq) | np.isinf(start) | np.isinf(fin),
            "started before enqueued": start < enq - _SLACK,
            "finished before started": fin < start - _SLACK,
            "finished before enqueued": fin < enq - _SLACK,
            "negative count": (attempts < 0) | (failed < 0) | (timeout < 0),
            "more failures than attempts": failed > attempts,
        }
    seen = np.zeros(len(df), dtype=bool)
    out: dict[str, np.ndarray] = {}
    for kind, _ in _KINDS:
        rows = tests[kind] & ~seen
        if rows.any():
            out[kind] = np.flatnonzero(rows)
            seen |= rows
    return out


def _row_text(df: pd.DataFrame, kind: str, row: int) -> str:
    values = {c: float(pd.to_numeric(df[c].iloc[row], errors="coerce")) for c in ("enqueued", "started", "finished")}
    return dict(_KINDS)[kind].format(**values)


def _check_rows(df: pd.DataFrame, label: str, drop_bad_rows: bool) -> tuple[pd.DataFrame, list[str]]:
    """``df`` without its impossible rows (with ``drop_bad_rows``) and the warning saying so; without
    ``drop_bad_rows`` the first impossible row is a CalibrationError naming its line."""
    found = impossible_rows(df)
    if not found:
        return df, []
    total = sum(len(rows) for rows in found.values())
    if not drop_bad_rows:
        kind, rows = min(found.items(), key=lambda kv: kv[1][0])
        more = f" ({total - 1} more impossible row{'s' if total > 2 else ''} in the file)" if total > 1 else ""
        raise CalibrationError(f"{label} line {rows[0] + 2}: {_row_text(df, kind, int(rows[0]))}{more}; fix the "
                               "file, or pass --drop-bad-rows to leave such rows out with a count")
    kept = np.ones(len(df), dtype=bool)
    for rows in found.values():
        kept[rows] = False
    parts = ", ".join(f"{len(rows)} {kind} (first at line {rows[0] + 2})" for kind, rows in found.items())
    note = f"dropped {total} impossible row{'s' if total > 1 else ''} of {len(df)} from {label} (--drop-bad-rows): {parts}"
    return df[kept].reset_index(drop=True), [note]


def measured_from_table(df: pd.DataFrame, *, label: str = "table", drop_bad_rows: bool = False) -> Measured:
    """Check a jobs table (see the module docstring) and turn it into measured jobs.

    Raises:
        CalibrationError: a missing column, a value that is not a number, an impossible row
            (unless ``drop_bad_rows``: then it is left out and counted in the notes).
    """
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise CalibrationError(f"{label} has no column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                               f"(needs {', '.join(REQUIRED)}; optional: {', '.join(OPTIONAL[:4])})")
    if len(df) == 0:
        raise CalibrationError(f"{label} holds no jobs")
    df = df.reset_index(drop=True)
    # what no flag makes usable, refused with its line first: an empty type, text where a number belongs
    if df["type"].isna().any():
        row = int(np.flatnonzero(df["type"].isna().to_numpy())[0])
        raise CalibrationError(f"{label} line {row + 2}: type is empty")
    for c in ("enqueued", "started", "finished", *_NUMERIC_OPTIONAL):
        if c in df:
            _numbers(df, c, label)
    _check_seconds(df, label)
    df, dropped = _check_rows(df, label, drop_bad_rows)
    if len(df) == 0:
        raise CalibrationError(f"{label}: every row is impossible ({dropped[0]})")
    cols: dict[str, Any] = {"type": df["type"].astype(str).to_numpy()}
    for c in ("enqueued", "started", "finished"):
        cols[c] = _numbers(df, c, label)
    n = len(df)
    attempts = _numbers(df, "attempts", label) if "attempts" in df else np.ones(n)
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
        failed = np.nan_to_num(_numbers(df, "failed_attempts", label), nan=-1).astype(np.int64)
    else:
        failed = np.where(outcome == "completed", attempts - 1, np.where(outcome == "dead", attempts, -1))
    cols.update(outcome=outcome, attempts=attempts, failed_attempts=failed)
    for c in ("queue", "job_id", "worker"):
        if c in df:
            cols[c] = df[c].fillna("").astype(str).to_numpy()
    if "queue" in cols:
        cols["queue"] = np.where(cols["queue"] == "", "default", cols["queue"])
    if "priority" in df:
        cols["priority"] = np.nan_to_num(_numbers(df, "priority", label)).astype(np.int64)
    if "timeout" in df:
        cols["timeout"] = np.nan_to_num(_numbers(df, "timeout", label))
    if "max_attempts" in df:
        cols["max_attempts"] = np.nan_to_num(_numbers(df, "max_attempts", label), nan=-1).astype(np.int64)
    else:
        most = pd.Series(attempts).groupby(cols["type"]).transform("max").to_numpy()
        cols["max_attempts"] = np.maximum(most, 1)
    jobs = measured_jobs(cols)
    notes = ("the table records no backoff: retried types get the default (exponential, 1 s, max 60 s)",) \
        if (jobs["max_attempts"] > 1).any() else ()
    return Measured(jobs=jobs, source=label, resolution=1e-6, notes=tuple(dropped) + notes)
