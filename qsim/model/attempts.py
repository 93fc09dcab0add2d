"""The attempt log: one row per attempt, kept in columns while the model runs.

Written only when a scenario uses a mechanism that can make a job run more
than once or not at its slot's pace (retries, timeouts, crashes, shutdown,
flows, limits, overhead: see :func:`qsim.model.run.needs_full`); a core run
derives its one attempt per job from the job table.

An attempt's ``start`` is when its handler starts (after ``fetch_overhead``),
its ``end`` when it stopped and its result reached Redis (``ack_overhead``
after the handler returned): it finished (``ok``), failed (``failed``), hit its
timeout (``timeout``, at exactly start + timeout + ack_overhead), its process was killed
(``stalled``: it ends when the stalled check puts the job back, as the engine
logs it — the job held its lock and its place under the limits until then; NaN
if never found), or it was cut off at a shutdown's grace deadline
(``cutoff``). An attempt still running when the run stopped has ``end`` NaN
and result ``cutoff``.

Records off (``simulate(..., records=False)``), a full run logs into a
:class:`~qsim.model.spans.SpanLog` instead: each attempt's ``start`` and
``end`` only (read from the job table while attempts start in job order),
and ``job`` and ``number`` once :meth:`AttemptLog.keep_jobs` is called (an
autoscaler measuring waits or run times reads them as the run goes). The
mechanisms use :meth:`~AttemptLog.begin`, :meth:`~AttemptLog.finish`,
:meth:`~AttemptLog.mark` and :meth:`~AttemptLog.start_of`, which both logs have.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np
import pandas as pd

from qsim.results.records import attempts_frame, name_column

__all__ = ["AttemptLog", "OK", "FAILED", "TIMEOUT", "STALLED", "CUTOFF", "RESULT_NAMES"]

OK, FAILED, TIMEOUT, STALLED, CUTOFF = 0, 1, 2, 3, 4
RESULT_NAMES = ("ok", "failed", "timeout", "stalled", "cutoff")


class AttemptLog:
    """Columns of every attempt of a run."""

    def __init__(self) -> None:
        self.job = array("i")  # indexes and counts in 32 bits
        self.number = array("i")  # 1-based, every attempt the job started (stalls and cut-offs too)
        self.worker = array("i")
        self.start = array("d")
        self.end = array("d")
        self.result = array("b")
        #: per slot: the row of the attempt running (or last run) on it; the mechanisms finish it
        self.row_of: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.start)

    @property
    def keeps_jobs(self) -> bool:
        """Whether each attempt's ``job`` and ``number`` are kept (always, in this log)."""
        return True

    def keep_jobs(self) -> None:
        """Keep each attempt's ``job`` and ``number`` (this log keeps every column; call it before the run)."""

    def begin(self, job: int, number: int, worker: int, start: float) -> int:
        """Log an attempt's start; returns its row."""
        self.job.append(job)
        self.number.append(number)
        self.worker.append(worker)
        self.start.append(start)
        self.end.append(math.nan)
        self.result.append(CUTOFF)
        return len(self.job) - 1

    def finish(self, row: int, end: float, result: int) -> None:
        """Log how attempt ``row`` ended (a cancel before its handler started moves its start back)."""
        if end < self.start[row]:
            self.start[row] = end
        self.end[row] = end
        self.result[row] = result

    def mark(self, row: int, result: int) -> None:
        """Set the result of attempt ``row`` before it ends (a killed process's attempt: ``stalled``)."""
        self.result[row] = result

    def start_of(self, row: int) -> float:
        """The logged start of attempt ``row``."""
        return self.start[row]

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of every attempt as numpy arrays: views of the log (no copy: once the run is over)."""
        if not len(self.start):
            return np.zeros(0), np.zeros(0)
        return np.frombuffer(self.start, dtype=np.float64), np.frombuffer(self.end, dtype=np.float64)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(job, number, worker, start, end, result) as numpy arrays: views of the log (no copy; it
        cannot grow while they live, so once the run is over)."""
        if not len(self.job):
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int8)
        return (np.frombuffer(self.job, dtype=np.int32), np.frombuffer(self.number, dtype=np.int32),
                np.frombuffer(self.worker, dtype=np.int32), np.frombuffer(self.start, dtype=np.float64),
                np.frombuffer(self.end, dtype=np.float64), np.frombuffer(self.result, dtype=np.int8))

    def frame(self, worker_names: Sequence[str], ids: np.ndarray | None = None) -> pd.DataFrame:
        """The ``attempts`` table of :mod:`qsim.results.records`, plain dtypes (as the jobs table's).

        ``ids``: every job's id (the jobs table's ``job_id``: the attempts share its strings;
        default: built here).
        """
        job, number, worker, start, end, result = self.arrays()
        if ids is None:
            ids = np.array([f"j{i}" for i in range(int(job.max()) + 1 if job.size else 0)], dtype=object)
        ids = np.asarray(ids, dtype=object)
        worker = np.where(worker < 0, len(worker_names), worker)  # -1 -> ""
        return attempts_frame({
            "job_id": ids[job],
            "attempt": number.astype(np.int64),
            "worker": name_column(worker, [*worker_names, ""]),
            "start": start,
            "end": end,
            "result": name_column(result, RESULT_NAMES),
        })
