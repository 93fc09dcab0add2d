"""Calibrate: from a real queue's measured jobs to a Scenario that predicts it.

Sources (each read-only; each gives the same measured-jobs table,
:mod:`qsim.calibrate.measured`):

- :func:`from_redis` — the qsim engine's own job records (:mod:`qsim.calibrate.qsim_source`);
- :func:`from_bullmq` — a BullMQ (Node) Redis, 4.x, 5.x and 6.x layouts (:mod:`qsim.calibrate.bullmq_source`);
- :func:`from_csv` / :func:`from_frame` — one row per job (:mod:`qsim.calibrate.table`).

:func:`from_any` takes any of them (a DataFrame, a CSV path, a Redis URL) and is
what ``qsim.calibrate(...)`` calls: this package is also that verb
(:mod:`qsim.callable_module`).

Each returns a :class:`~qsim.calibrate.report.Calibration` (the Scenario in
``.scenario``, the fits beside it; it also unpacks as ``scenario, report``).
:func:`probe` measures the engine's own per-job overhead on a Redis.

In a notebook::

    from qsim.calibrate import from_redis
    cal = from_redis("redis://localhost:6379/0", ["orders"], since="2h")
    cal                                 # the fit table
    cal.write("orders.toml")            # the commented scenario TOML
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from qsim.callable_module import make_callable
from qsim.calibrate import probe as _probe  # the module, first: the function probe below then keeps the name
from qsim.calibrate.build import MIN_JOBS, calibrate
from qsim.calibrate.measured import Measured, QueueConfig, windowed
from qsim.calibrate.overhead import Overhead
from qsim.calibrate.report import Calibration, TypeFit
from qsim.calibrate.service import MIN_FIT
from qsim.calibrate.table import measured_from_table, read_table
from qsim.errors import ScenarioError

__all__ = ["from_any", "from_frame", "from_csv", "from_redis", "from_bullmq", "probe", "calibrate", "Calibration",
           "TypeFit", "Measured", "QueueConfig", "Overhead", "MIN_JOBS", "MIN_FIT", "DEFAULT_MAX_JOBS"]

#: ``--max-jobs``: the most jobs a Redis source reads (the most recent first).
DEFAULT_MAX_JOBS = 200_000


def _fit(m: Measured, since: Any, until: Any, now: float | None, start: float | None, options: dict[str, Any]) -> Calibration:
    return calibrate(windowed(m, since, until, now=now, start=start), **options)


def from_frame(df: pd.DataFrame, *, since: Any = None, until: Any = None, service: str = "fit",
               arrivals: str = "fit", min_jobs: int = MIN_JOBS, min_fit: int = MIN_FIT,
               overhead: Overhead | None = None, name: str = "calibrated", label: str = "DataFrame",
               drop_bad_rows: bool = False) -> Calibration:
    """Calibrate from a DataFrame of jobs (the columns of ``jobs.csv``: see :mod:`qsim.calibrate.table`).

    ``since``/``until``: seconds on the table's clock, ISO date-times, or
    durations (``2h``) back from the last enqueue time. An impossible row
    (``finished`` before ``started``, ...) is a CalibrationError naming its
    line; with ``drop_bad_rows`` it is left out and the warnings count it.
    """
    options = dict(service=service, arrivals=arrivals, min_jobs=min_jobs, min_fit=min_fit, overhead=overhead,
                   name=name)
    return _fit(measured_from_table(df, label=label, drop_bad_rows=drop_bad_rows), since, until, None, None, options)


def from_csv(path: str | Path, **options: Any) -> Calibration:
    """Calibrate from a CSV file of jobs (see :func:`from_frame` for the options)."""
    options.setdefault("label", str(path))
    return from_frame(read_table(path), **options)


def from_redis(url: str, queues: str | Sequence[str], *, prefix: str = "qsim", group: str | None = None,
               since: Any = None, until: Any = None, max_jobs: int = DEFAULT_MAX_JOBS, service: str = "fit",
               arrivals: str = "fit", min_jobs: int = MIN_JOBS, min_fit: int = MIN_FIT,
               overhead: Overhead | None = None, name: str = "calibrated",
               progress: Callable[[float], None] | None = None) -> Calibration:
    """Calibrate from the qsim engine's job records in Redis (read-only).

    ``since``/``until``: Unix seconds, ISO date-times, or durations (``2h``)
    back from the Redis server's clock. At most ``max_jobs`` jobs are read, the
    most recently finished first (the window then starts where they do).
    ``progress`` is called with the fraction of job hashes read.
    """
    from qsim.calibrate.qsim_source import read_qsim

    m, now, start = read_qsim(url, [queues] if isinstance(queues, str) else list(queues), prefix=prefix,
                              group=group, since=since, max_jobs=max_jobs, progress=progress)
    options = dict(service=service, arrivals=arrivals, min_jobs=min_jobs, min_fit=min_fit, overhead=overhead,
                   name=name)
    return _fit(m, since, until, now, start, options)


def from_bullmq(url: str, queues: str | Sequence[str], *, prefix: str = "bull", since: Any = None,
                until: Any = None, max_jobs: int = DEFAULT_MAX_JOBS, service: str = "fit", arrivals: str = "fit",
                min_jobs: int = MIN_JOBS, min_fit: int = MIN_FIT, overhead: Overhead | None = None,
                name: str = "calibrated", progress: Callable[[float], None] | None = None) -> Calibration:
    """Calibrate from a BullMQ (Node) Redis, 4.x or 5.x layout (read-only); options as :func:`from_redis`."""
    from qsim.calibrate.bullmq_source import read_bullmq

    m, now, start = read_bullmq(url, [queues] if isinstance(queues, str) else list(queues), prefix=prefix,
                                since=since, max_jobs=max_jobs, progress=progress)
    options = dict(service=service, arrivals=arrivals, min_jobs=min_jobs, min_fit=min_fit, overhead=overhead,
                   name=name)
    return _fit(m, since, until, now, start, options)


def probe(redis_url: str, **options: Any) -> Overhead:
    """The engine's per-job overhead on this Redis and machine (see :mod:`qsim.calibrate.probe`)."""
    return _probe.probe(redis_url, **options)


def from_any(data: pd.DataFrame | str | os.PathLike[str], queues: str | Sequence[str] | None = None, *,
             source: str | None = None, **options: Any) -> Calibration:
    """Calibrate from a DataFrame of jobs, a CSV file, or a Redis URL (then ``queues`` names the queues).

    ``source``: ``"qsim"`` (the engine's records: the default for a URL), ``"bullmq"``,
    ``"csv"`` or ``"frame"`` (the defaults for a path and a DataFrame). ``options``: those of
    :func:`from_redis`, :func:`from_bullmq` or :func:`from_frame` (``since``, ``until``,
    ``prefix``, ``service``, ``min_jobs``, ``overhead``, ...).

    Raises:
        ScenarioError: the data does not match the source, or a Redis source without queues.
        CalibrationError: too few jobs, or not in the source's layout.
    """
    url = isinstance(data, str) and data.split("://", 1)[0] in ("redis", "rediss", "unix")
    kind = source or ("frame" if isinstance(data, pd.DataFrame) else "qsim" if url else "csv")
    if kind in ("qsim", "bullmq"):
        if not isinstance(data, str) or not url:
            raise ScenarioError(f"calibrate from {kind} reads a Redis URL (redis://...), got {data!r}")
        if not queues:
            raise ScenarioError(f"calibrate from {kind} needs the queues to read (queues=...)")
        return (from_redis if kind == "qsim" else from_bullmq)(data, queues, **options)
    if queues is not None:
        raise ScenarioError(f"calibrate from a {kind} takes no queues (its rows say which queue), got {queues!r}")
    if kind == "frame" and isinstance(data, pd.DataFrame):
        return from_frame(data, **options)
    if kind == "csv" and not isinstance(data, pd.DataFrame):
        return from_csv(Path(data), **options)
    raise ScenarioError(f"source must be qsim, bullmq, csv or frame (matching the data), got {source!r}")


make_callable(__name__, from_any)
