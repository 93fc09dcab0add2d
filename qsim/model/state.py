"""The central per-job state of a run: one columnar table, indexed by job number.

Every mechanism reads and writes jobs through this table (no Python object
per job), and :meth:`JobTable.frame` turns it into the ``jobs`` table of
:mod:`qsim.results.records` at the end. Job numbers are positions: ``0 .. n-1`` for the
drawn arrivals in arrival order; :meth:`JobTable.add` appends more (children
of fan-out and flows).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np
import pandas as pd

from qsim.results.records import jobs_frame, name_column

Column = Sequence[int] | Sequence[float] | np.ndarray

__all__ = ["JobTable", "UNFINISHED", "COMPLETED", "DEAD", "LOST", "OUTCOME_NAMES"]

UNFINISHED, COMPLETED, DEAD, LOST = 0, 1, 2, 3
OUTCOME_NAMES = ("unfinished", "completed", "dead", "lost")


class JobTable:
    """Columns of every job of a run (``array``/list columns, cheap to set one cell).

    With ``records=False`` the record columns (``started`` and after) stay empty.
    """

    def __init__(self, *, type_: Column, queue: Column, priority: Column, enqueued: Column,
                 service: Column, records: bool = True) -> None:
        n = int(len(type_))
        self.n = n
        self.type: list[int] = np.asarray(type_, dtype=np.int64).tolist()
        self.queue: list[int] = np.asarray(queue, dtype=np.int64).tolist()
        self.priority: list[int] = np.asarray(priority, dtype=np.int64).tolist()
        self.enqueued = _doubles(enqueued)
        self.service = _doubles(service)  # next attempt's service time
        if not records:  # a record-less core run (qsim.model.recordless) reads only the columns above
            n = 0
        self.started = array("d", [math.nan]) * n  # first attempt
        self.finished = array("d", [math.nan]) * n  # final attempt
        # counts and indexes in 32 bits (half the memory; as fast to set one cell)
        self.attempts = array("i", [0]) * n
        self.failed_attempts = array("i", [0]) * n
        self.stalled = array("i", [0]) * n
        self.worker = array("i", [-1]) * n  # worker (process) of the last attempt
        self.outcome = array("b", [UNFINISHED]) * n
        self.parent = array("i", [-1]) * n

    def add(self, *, type_: int, queue: int, priority: int, enqueued: float, service: float,
            parent: int = -1) -> int:
        """Append one job (e.g. a child); returns its number."""
        self.type.append(type_)
        self.queue.append(queue)
        self.priority.append(priority)
        self.enqueued.append(enqueued)
        self.service.append(service)
        self.started.append(math.nan)
        self.finished.append(math.nan)
        self.attempts.append(0)
        self.failed_attempts.append(0)
        self.stalled.append(0)
        self.worker.append(-1)
        self.outcome.append(UNFINISHED)
        self.parent.append(parent)
        self.n += 1
        return self.n - 1

    def frame(self, *, type_names: Sequence[str], queue_names: Sequence[str],
              worker_names: Sequence[str]) -> pd.DataFrame:
        """The jobs table of :mod:`qsim.results.records` (job ids are ``"j<number>"``): plain dtypes, the name
        columns sharing one ``str`` per name (:func:`~qsim.results.records.name_column`).

        The time columns are views of this table's arrays (no copy): call it once the run is over.
        """
        n = self.n
        ids = self.ids()
        worker = _ints(self.worker)
        worker[worker < 0] = len(worker_names)  # -1 -> ""
        parent = _ints(self.parent)
        has_parent = parent >= 0
        parents = np.unique(parent[has_parent])  # parent ids: "" then the parents' ids
        parent_code = np.zeros(n, dtype=np.int64)
        parent_code[has_parent] = np.searchsorted(parents, parent[has_parent]) + 1
        return jobs_frame({
            "job_id": ids,
            "type": name_column(np.asarray(self.type, dtype=np.int64), type_names),
            "queue": name_column(np.asarray(self.queue, dtype=np.int64), queue_names),
            "priority": np.asarray(self.priority, dtype=np.int64),
            "enqueued": _floats(self.enqueued),
            "started": _floats(self.started),
            "finished": _floats(self.finished),
            "attempts": _ints(self.attempts),
            "failed_attempts": _ints(self.failed_attempts),
            "stalled": _ints(self.stalled),
            "worker": name_column(worker, [*worker_names, ""]),
            "outcome": name_column(np.frombuffer(self.outcome, dtype=np.int8) if n else np.zeros(0, dtype=np.int8),
                                   OUTCOME_NAMES),
            "parent": name_column(parent_code, ["", *ids[parents].tolist()]),
        })

    def ids(self) -> np.ndarray:
        """Every job's id, ``"j<number>"``, as an object array."""
        return np.array([f"j{i}" for i in range(self.n)], dtype=object)


def _doubles(values: Column) -> array[float]:
    out = array("d")
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64).data.cast("B"))  # no temporary bytes copy
    return out


def _floats(a: array[float]) -> np.ndarray:
    """A view of the column (no copy; ``a`` cannot grow while the view lives)."""
    return np.frombuffer(a, dtype=np.float64) if len(a) else np.zeros(0)


def _ints(a: array[int]) -> np.ndarray:
    return np.frombuffer(a, dtype=np.dtype(a.typecode)).astype(np.int64) if len(a) else np.zeros(0, dtype=np.int64)
