"""Records on: the :class:`~qsim.model.hooks.Recorder` strategies that keep every job's records.

- :class:`JobRecords` — a core run (every attempt succeeds, one per job): the
  job table's record columns say it all; the attempts table and the time
  series are derived from them at the end;
- :class:`AttemptRecords` — a run with any other mechanism
  (:func:`~qsim.model.run.needs_full`): the job columns plus one row per
  attempt in an :class:`~qsim.model.attempts.AttemptLog` (an attempt's
  ``start`` is when its handler starts, ``fetch_overhead`` after its slot took
  the job); the mechanisms finish each row with its result (the log is made
  before the core and shared with them: :mod:`~qsim.model.run`). In a full
  run where no attempt can fail (no retry, timeout or flow: no
  :class:`~qsim.model.hooks.AttemptResult`), :meth:`AttemptRecords.completed`
  finishes the row itself (``ok``), as :class:`~qsim.model.retries.Retries` would.

The record-less strategies are :class:`~qsim.model.recordless.StreamRecords`
(core runs) and :class:`~qsim.model.spans.SpanRecords` (full runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from qsim.model.attempts import OK, AttemptLog
from qsim.model.core import ModelCore
from qsim.model.state import COMPLETED
from qsim.model.timeseries import Changes

__all__ = ["JobRecords", "AttemptRecords"]


class JobRecords:
    """Records on, one attempt per job (a core run): writes the job table's record columns."""

    def __init__(self, core: ModelCore) -> None:
        self.core = core
        self.queued: Callable[[int, int, float], None] | None = None
        self.every = math.inf
        jobs = core.jobs
        self._started, self._attempts, self._worker = jobs.started, jobs.attempts, jobs.worker
        self._finished, self._outcome = jobs.finished, jobs.outcome
        self._slot_worker = core.slot_worker

    def start(self) -> None:
        """Nothing to schedule: records are kept as they come."""

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """The job's one attempt started."""
        self._started[job] = now
        self._attempts[job] = 1
        self._worker[job] = self._slot_worker[slot]

    def completed(self, job: int, slot: int, now: float) -> None:
        """The job completed at the end of its attempt."""
        self._finished[job] = now
        self._outcome[job] = COMPLETED

    def settled(self, job: int, outcome: int, now: float) -> None:
        """The job settled."""
        self._finished[job] = now
        self._outcome[job] = outcome

    def tick(self) -> None:
        """Nothing to fold: records are kept as they come."""

    def changes(self, entered: np.ndarray) -> list[Changes]:
        """Every change of queue depth and active jobs (see :mod:`qsim.model.timeseries`).

        ``entered``: per job, whether it joined its queue when it was added (a
        drawn job that arrived, a child); other queue entries are the core's
        logged requeues. One attempt per job: the job table says the rest —
        started (waiting - 1, active + 1), finished (active - 1).
        """
        j = self.core.jobs
        q = np.asarray(j.queue, dtype=np.int64)
        enqueued = np.frombuffer(j.enqueued, dtype=np.float64) if j.n else np.zeros(0)
        started = np.frombuffer(j.started, dtype=np.float64) if j.n else np.zeros(0)
        finished = np.frombuffer(j.finished, dtype=np.float64) if j.n else np.zeros(0)
        ran, ended = ~np.isnan(started), ~np.isnan(finished)
        one = np.ones(j.n, dtype=np.int64)
        return [
            (enqueued[entered], q[entered], one[entered], 0 * one[entered]),
            (started[ran], q[ran], -one[ran], one[ran]),
            (finished[ended], q[ended], 0 * one[ended], -one[ended]),
            self.core.changes.changes(),
        ]


class AttemptRecords(JobRecords):
    """Records on, any number of attempts: the job columns and the attempt log.

    ``log.row_of[slot]`` is the log row of the attempt running (or last run)
    on a slot; the mechanisms finish it (:meth:`AttemptLog.finish`).
    """

    def __init__(self, core: ModelCore, log: AttemptLog, fetch_overhead: float = 0.0) -> None:
        super().__init__(core)
        self.fetch = float(fetch_overhead)
        self.log = log
        self.row_of = log.row_of
        self._end, self._result = log.end, log.result

    def completed(self, job: int, slot: int, now: float) -> None:
        """The attempt on ``slot`` ended at ``now`` and ``job`` completed (a run with no AttemptResult):
        its row ends ``ok`` (its end is not before its start: no move back, see AttemptLog.finish)."""
        row = self.row_of[slot]
        self._end[row] = now
        self._result[row] = OK
        self._finished[job] = now
        self._outcome[job] = COMPLETED

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt started; its handler starts ``fetch_overhead`` later (its logged start)."""
        start = now + self.fetch if self.fetch else now
        if self._attempts[job] == 0:
            self._started[job] = start
        self._attempts[job] += 1
        w = self._slot_worker[slot]
        self._worker[job] = w
        self.row_of[slot] = self.log.begin(job, self._attempts[job], w, start)

    def changes(self, entered: np.ndarray) -> list[Changes]:
        """As :meth:`JobRecords.changes`, with starts and ends from the attempt log."""
        j = self.core.jobs
        q = np.asarray(j.queue, dtype=np.int64)
        enqueued = np.frombuffer(j.enqueued, dtype=np.float64) if j.n else np.zeros(0)
        job, _, _, start, end, _ = self.log.arrays()
        aq = q[job]
        ended = ~np.isnan(end)
        one = np.ones(job.size, dtype=np.int64)
        first = np.ones(int(entered.sum()), dtype=np.int64)
        return [(enqueued[entered], q[entered], first, 0 * first), self.core.changes.changes(),
                (start, aq, -one, one), (end[ended], aq[ended], 0 * one[ended], -one[ended])]
