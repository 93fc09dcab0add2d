"""The time series of queue depth and active jobs per queue.

Recorded at every change, not on a grid. The hot path only logs
``(time, queue * N_KINDS + kind)`` — two array appends — for each change of a
queue: a job enqueued (``waiting + 1``), started (``waiting - 1, active + 1``)
or ended (``active - 1``); :meth:`TimeSeries.frame` rebuilds the counts with a
cumulative sum per queue. New kinds (e.g. a running job handed back to the
queue) are new rows of :data:`KIND_DELTAS`.

The frame keeps, for each queue and instant, the state *after* everything that
happened at that instant (an arrival that starts at once leaves no
``waiting = 1`` blip), and opens with one row per queue at time 0. Between two
rows of a queue its values hold (a step function).

Columns: ``time`` (float), ``queue`` (str), ``waiting`` (jobs enqueued and
not started), ``active`` (jobs running).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["TimeSeries", "TIMESERIES_COLUMNS", "ENQUEUED", "STARTED", "ENDED", "KIND_DELTAS"]

TIMESERIES_COLUMNS = ("time", "queue", "waiting", "active")

ENQUEUED, STARTED, ENDED = 0, 1, 2
#: (waiting delta, active delta) of each kind of change
KIND_DELTAS = ((1, 0), (-1, 1), (0, -1))
N_KINDS = len(KIND_DELTAS)


class TimeSeries:
    """Append-only log of per-queue changes (``log_time`` / ``log_code`` are bound appends)."""

    def __init__(self) -> None:
        self.time = array("d")
        self.code = array("q")
        self.log_time = self.time.append
        self.log_code = self.code.append

    def log(self, now: float, q: int, kind: int) -> None:
        """Queue ``q`` changed by ``kind`` (ENQUEUED, STARTED, ENDED) at ``now``."""
        self.time.append(now)
        self.code.append(q * N_KINDS + kind)

    def frame(self, queue_names: Sequence[str]) -> pd.DataFrame:
        """The recorded steps as a DataFrame (see the module docstring)."""
        nq = len(queue_names)
        t = np.frombuffer(self.time, dtype=np.float64) if len(self.time) else np.zeros(0)
        code = np.frombuffer(self.code, dtype=np.int64) if len(self.code) else np.zeros(0, dtype=np.int64)
        q, kind = np.divmod(code, N_KINDS)
        deltas = np.asarray(KIND_DELTAS, dtype=np.int64)
        parts = []
        for i in range(nq):
            mine = q == i
            d = deltas[kind[mine]]
            ti = np.concatenate([[0.0], t[mine]])
            w = np.concatenate([[0], np.cumsum(d[:, 0])])
            a = np.concatenate([[0], np.cumsum(d[:, 1])])
            last = np.ones(ti.size, dtype=bool)
            last[:-1] = ti[1:] != ti[:-1]  # rows are in time order: keep the last of each instant
            parts.append((ti[last], np.full(int(last.sum()), i), w[last], a[last]))
        if not parts:
            return pd.DataFrame({"time": np.zeros(0), "queue": np.zeros(0, dtype=object),
                                 "waiting": np.zeros(0, dtype=np.int64), "active": np.zeros(0, dtype=np.int64)})
        tt = np.concatenate([p[0] for p in parts])
        qq = np.concatenate([p[1] for p in parts])
        order = np.lexsort((qq, tt))
        return pd.DataFrame({
            "time": tt[order].astype(np.float64),
            "queue": np.asarray(queue_names, dtype=object)[qq[order]],
            "waiting": np.concatenate([p[2] for p in parts])[order].astype(np.int64),
            "active": np.concatenate([p[3] for p in parts])[order].astype(np.int64),
        })
