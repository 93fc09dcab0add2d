"""Record-less full runs (``simulate(..., records=False)`` with any mechanism beyond the core).

A full run (:func:`~qsim.model.run.needs_full`: retries, limits, events,
autoscalers, flows, overheads) with ``records=False`` runs with
:class:`SpanRecords` as its :class:`~qsim.model.hooks.Recorder`. Its Summary
is the exact one (:func:`~qsim.results.summary.summarize`, the same function
and the same arrays as with records on, so the same figures to the last bit),
computed from what that function reads and nothing more:

- per job, the job table's columns: ``enqueued``, ``started``, ``finished``,
  ``outcome``, ``failed_attempts``, ``stalled`` (the exact quantiles need every
  job's wait and latency), and its type and queue as codes (no name per row);
- per attempt, its ``start`` and ``end`` (``utilization`` and each window's
  ``busy`` are sums over every attempt's span, and a streamed sum would round
  differently), in a :class:`SpanLog` that keeps *nothing* per attempt while
  attempts start in job order and end ``ok`` (one FIFO line, no failure, no
  cut-off: an autoscaled day): attempt ``i`` is then job ``i``'s only one, its
  span the job's ``started`` and ``finished``. Out of that order the log keeps
  each attempt's start and end from then on (16 bytes an attempt), and its
  ``job`` and ``number`` too while an autoscaler measures waits or run times
  (:meth:`SpanLog.keep_jobs`).

Not kept: each attempt's job, number, worker and result (and, in job order,
its start and end), each job's worker, the job ids, and the jobs, attempts
and time-series frames (the Summary is computed from column views, with the
name columns as categories).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from qsim.model.attempts import OK, AttemptLog
from qsim.model.core import ModelCore
from qsim.model.recorders import AttemptRecords
from qsim.model.state import COMPLETED, OUTCOME_NAMES
from qsim.results.records import Records, categorical

__all__ = ["SpanLog", "SpanRecords"]


class SpanLog(AttemptLog):
    """The attempt log of a records-off full run: each attempt's start and end, and nothing while attempts
    start in job order (see the module docstring).

    Rows ``0 .. derived - 1`` are *derived*: row ``i`` is job ``i``'s first and only attempt so far, so its
    start is the job's ``started`` and its end the job's ``finished`` (NaN while it runs), read from the job
    table (:meth:`read_jobs`). The first attempt out of that order, the first that ends other than ``ok``
    (failed, timed out, stalled, cut off) and :meth:`keep_jobs` make the log *explicit*: the derived rows
    are copied into ``start`` and ``end`` and every later attempt is appended there.
    """

    def __init__(self) -> None:
        super().__init__()
        self.derived = 0
        self.explicit = False
        self._jobs_kept = False
        self._started: array[float] = array("d")
        self._finished: array[float] = array("d")

    def read_jobs(self, started: array[float], finished: array[float]) -> None:
        """The job table's ``started`` and ``finished`` columns (the derived rows'); before the run."""
        self._started, self._finished = started, finished

    def __len__(self) -> int:
        return len(self.start) if self.explicit else self.derived

    @property
    def keeps_jobs(self) -> bool:
        """Whether each attempt's ``job`` and ``number`` are kept (after :meth:`keep_jobs`)."""
        return self._jobs_kept

    def keep_jobs(self) -> None:
        """Keep each attempt's ``job`` and ``number`` from now on (an explicit log; before the run)."""
        self._jobs_kept = True
        self._explicit()

    def _explicit(self) -> None:
        if not self.explicit:
            self.explicit = True
            k = self.derived
            self.start.extend(self._started[:k])  # (their starts and ends, as the job table holds them now)
            self.end.extend(self._finished[:k])

    def begin(self, job: int, number: int, worker: int, start: float) -> int:
        """Log an attempt's start; returns its row (the job's number while attempts start in job order)."""
        if not self.explicit:
            if job == self.derived:  # (its first attempt: an earlier one would have ended the derived rows)
                self.derived = job + 1
                return job
            self._explicit()
        if self._jobs_kept:
            self.job.append(job)
            self.number.append(number)
        self.start.append(start)
        self.end.append(math.nan)
        return len(self.start) - 1

    def ended(self, row: int, end: float) -> None:
        """Attempt ``row`` ended ``ok`` at ``end`` and its job completed then (a derived row: its ``finished``)."""
        if self.explicit:
            self.end[row] = end

    def finish(self, row: int, end: float, result: int) -> None:
        """Log how attempt ``row`` ended (see :meth:`AttemptLog.finish`); anything but ``ok`` makes the log explicit.

        A derived row ending ``ok`` is its job completing at ``end`` (:class:`~qsim.model.retries.Retries`
        settles it at once): its ``finished`` will say so.
        """
        if not self.explicit:
            if result == OK:
                return
            self._explicit()
        if end < self.start[row]:
            self.start[row] = end
        self.end[row] = end

    def mark(self, row: int, result: int) -> None:
        """Attempt ``row`` will end other than ``ok`` (a killed process's): the log turns explicit."""
        self._explicit()

    def start_of(self, row: int) -> float:
        """The start of attempt ``row``."""
        return self.start[row] if self.explicit else self._started[row]

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of every attempt as numpy arrays: views of the log or of the job table's columns (no
        copy: once the run is over)."""
        if self.explicit:
            return super().spans()
        k = self.derived
        return _view(self._started, np.float64)[:k], _view(self._finished, np.float64)[:k]


class SpanRecords(AttemptRecords):
    """Records off in a full run: the job columns the Summary reads and each attempt's span (module docstring).

    ``log``: the run's :class:`SpanLog`.
    """

    def __init__(self, core: ModelCore, log: SpanLog, fetch_overhead: float = 0.0) -> None:
        super().__init__(core, log, fetch_overhead)
        self.spans = log
        log.read_jobs(self._started, self._finished)

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt started; its handler starts ``fetch_overhead`` later (its logged start)."""
        start = now + self.fetch if self.fetch else now
        n = self._attempts[job] + 1
        if n == 1:
            self._started[job] = start
        self._attempts[job] = n
        log = self.spans
        if job == log.derived and not log.explicit:  # SpanLog.begin's derived row, inlined (the hot path)
            log.derived = job + 1
            self.row_of[slot] = job
        else:
            self.row_of[slot] = log.begin(job, n, -1, start)

    def completed(self, job: int, slot: int, now: float) -> None:
        """The attempt on ``slot`` ended at ``now`` and ``job`` completed (a run with no AttemptResult)."""
        log = self.spans
        if log.explicit:  # (SpanLog.ended, inlined: a derived row's end is its job's finished)
            log.end[self.row_of[slot]] = now
        self._finished[job] = now
        self._outcome[job] = COMPLETED

    def records(self, *, type_names: Sequence[str], queue_names: Sequence[str], slots: tuple[tuple[float, int], ...],
                workers: Mapping[str, tuple[tuple[float, int], ...]]) -> Records:
        """The records :func:`~qsim.results.summary.summarize` reads, as views of the run's columns (once the
        run is over): the jobs table has only the Summary's columns, the attempts table only start and end."""
        j = self.core.jobs
        start, end = self.spans.spans()
        jobs = pd.DataFrame({
            "type": categorical(np.asarray(j.type, dtype=np.int64), type_names),
            "queue": categorical(np.asarray(j.queue, dtype=np.int64), queue_names),
            "enqueued": _view(j.enqueued, np.float64),
            "started": _view(j.started, np.float64),
            "finished": _view(j.finished, np.float64),
            "failed_attempts": _view(j.failed_attempts, np.int32),
            "stalled": _view(j.stalled, np.int32),
            "outcome": categorical(_view(j.outcome, np.int8), OUTCOME_NAMES),
        }, copy=False)
        attempts = pd.DataFrame({"start": start, "end": end}, copy=False)
        return Records(jobs=jobs, attempts=attempts, slots=slots, workers=workers)


def _view(a: array[float] | array[int], dtype: type[np.generic]) -> np.ndarray:
    """A view of a column (no copy; ``a`` cannot grow while the view lives)."""
    return np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype=dtype)
