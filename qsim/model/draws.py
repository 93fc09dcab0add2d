"""Which of the workload's attempt draws each job of a run plays (runs with retries, children).

The draws themselves are the workload's (:mod:`qsim.spec.workload`: every
attempt's service time and failure flag, the children each job plans), the
very ones the engine harness runs. Job numbers are the run's: the drawn
arrivals first, then children in the order the run adds them; this index
maps each to its table and row.
"""

from __future__ import annotations

import numpy as np

from qsim.spec.workload import Attempts, Workload

__all__ = ["DrawIndex"]


class DrawIndex:
    """Each job's row of the workload's attempt draws (see the module docstring)."""

    def __init__(self, workload: Workload) -> None:
        plan = workload.attempts
        self.n_types = len(workload.scenario.jobs)
        self.kids = plan.kids  # drawn job -> its planned children (type, row of the type's child draws)
        #: the arriving jobs' draws per type, then the children's
        self.tables: list[Attempts | None] = [*plan.own, *plan.child]
        self.src: list[int] = np.asarray(workload.arrivals.type, dtype=np.int64).tolist()  # job -> table
        self.row: list[int] = plan.rank.tolist()  # job -> row of its table

    def of(self, job: int) -> tuple[Attempts | None, int]:
        """The draws of ``job`` and its row."""
        return self.tables[self.src[job]], self.row[job]

    def add_child(self, type_: int, row: int) -> float:
        """The next job is a child of type ``type_`` playing row ``row`` of its draws; its first service time."""
        src = self.n_types + type_
        table = self.tables[src]
        assert table is not None
        self.src.append(src)
        self.row.append(row)
        return float(table.service[row, 0])
