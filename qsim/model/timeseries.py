"""The time series of queue depth and active jobs per queue.

Nothing is logged while the model runs (logging three changes per job cost
about a fifth of the run time): the series is rebuilt at the end from *change
sets* — arrays of ``(time, queue, waiting delta, active delta)``. The core
derives them from the job table: each job adds ``waiting + 1`` when enqueued,
``waiting - 1, active + 1`` when it starts and ``active - 1`` when it ends. A
mechanism that changes queues in other ways (a retry re-enqueued after its
backoff, a stalled job put back, several attempts per job) records its own
changes in a :class:`ChangeLog` (or provides them from its attempt records)
and the model passes them to :func:`timeseries_frame` as well.

The frame has one row per queue and instant at which the queue changed,
holding the state *after* everything that happened at that instant (an
arrival that starts at once leaves no ``waiting = 1`` blip), and opens with
one row per queue at time 0. Between two rows of a queue its values hold (a
step function). It is built on first access (``result.timeseries``).

Columns: ``time`` (float), ``queue`` (str), ``waiting`` (jobs enqueued and
not started), ``active`` (jobs running).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["TIMESERIES_COLUMNS", "Changes", "ChangeLog", "timeseries_frame"]

TIMESERIES_COLUMNS = ("time", "queue", "waiting", "active")

#: (times, queue indexes, waiting deltas, active deltas): one change per element
Changes = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class ChangeLog:
    """Changes recorded one at a time during a run (for mechanisms the job table cannot describe)."""

    def __init__(self) -> None:
        self.time = array("d")
        self.queue = array("q")
        self.waiting = array("q")
        self.active = array("q")

    def add(self, now: float, q: int, waiting: int, active: int) -> None:
        """Queue ``q`` gained ``waiting`` waiting and ``active`` running jobs (negative: lost) at ``now``."""
        self.time.append(now)
        self.queue.append(q)
        self.waiting.append(waiting)
        self.active.append(active)

    def changes(self) -> Changes:
        """The recorded changes as arrays."""
        return (np.asarray(self.time, dtype=np.float64), np.asarray(self.queue, dtype=np.int64),
                np.asarray(self.waiting, dtype=np.int64), np.asarray(self.active, dtype=np.int64))


def timeseries_frame(queue_names: Sequence[str], changes: Sequence[Changes]) -> pd.DataFrame:
    """The time series (see the module docstring) from change sets, in any order."""
    nq = len(queue_names)
    t = np.concatenate([np.zeros(nq)] + [np.asarray(c[0], dtype=np.float64) for c in changes])
    q = np.concatenate([np.arange(nq, dtype=np.int64)] + [np.asarray(c[1], dtype=np.int64) for c in changes])
    dw = np.concatenate([np.zeros(nq, dtype=np.int64)] + [np.asarray(c[2], dtype=np.int64) for c in changes])
    da = np.concatenate([np.zeros(nq, dtype=np.int64)] + [np.asarray(c[3], dtype=np.int64) for c in changes])
    order = np.lexsort((t, q))  # by queue, then time
    t, q, dw, da = t[order], q[order], dw[order], da[order]
    w, a = np.cumsum(dw), np.cumsum(da)
    # cumulative sums restart at each queue: subtract the totals of the queues before it
    first = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    sizes = np.diff(np.r_[first, q.size])
    w -= np.repeat(np.r_[0, w[first[1:] - 1]], sizes)
    a -= np.repeat(np.r_[0, a[first[1:] - 1]], sizes)
    last = np.r_[(t[1:] != t[:-1]) | (q[1:] != q[:-1]), True]  # the state after each instant
    t, q, w, a = t[last], q[last], w[last], a[last]
    out = np.lexsort((q, t))  # by time, then queue
    return pd.DataFrame({
        "time": t[out],
        "queue": np.asarray(queue_names, dtype=object)[q[out]],
        "waiting": w[out],
        "active": a[out],
    })
