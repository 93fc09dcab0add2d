"""Calibrate: from a real queue's measured jobs to a Scenario that predicts it.

Sources (each read-only; each gives the same measured-jobs table,
:mod:`qsim.calibrate.measured`):

- :func:`from_redis` — the qsim engine's own job records (:mod:`qsim.calibrate.qsim_source`);
- :func:`from_bullmq` — a BullMQ (Node) Redis, 4.x and 5.x layouts (:mod:`qsim.calibrate.bullmq_source`);
- :func:`from_csv` / :func:`from_frame` — one row per job (:mod:`qsim.calibrate.table`).

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

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from qsim.calibrate.build import MIN_JOBS, calibrate
from qsim.calibrate.measured import Measured, QueueConfig, windowed
from qsim.calibrate.overhead import Overhead
from qsim.calibrate.report import Calibration, TypeFit
from qsim.calibrate.service import MIN_FIT
from qsim.calibrate.table import measured_from_table, read_table

__all__ = ["from_frame", "from_csv", "from_redis", "from_bullmq", "probe", "calibrate", "Calibration", "TypeFit",
           "Measured", "QueueConfig", "Overhead", "MIN_JOBS", "MIN_FIT", "DEFAULT_MAX_JOBS"]

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
    from qsim.calibrate.probe import probe as run_probe

    return run_probe(redis_url, **options)
