"""The Summary's windows of a record-less run, gathered in time order with bounded memory.

:class:`~qsim.model.recordless.StreamRecords` runs a window *edge* at each
window boundary ``warmup + k * length`` (an urgent alarm: before anything
else that happens at that instant, so an event at the boundary belongs to the
window it opens, as in :func:`qsim.results.windows.windows_of`) and feeds a
:class:`WindowSeries` what it knows then: busy slot-seconds and completions
so far, the queue depth, the oldest waiting job. Between edges it hands over
the waits of the jobs that start (in the buffers it folds anyway) and the
depth after each instant a queue grew. What is kept per closed window is a
handful of numbers; the open window keeps its waits (exact quantiles, the
same arithmetic as the records' windows) up to :data:`EXACT_WAITS` values,
then folds them into a :class:`~qsim.results.summary.StreamStat` (quantiles within
:data:`~qsim.results.summary.STREAM_REL_ERROR`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from qsim.results.summary import StreamStat
from qsim.results.windows import Window, build_windows, mean_steps, sorted_quantile, window_count

__all__ = ["WindowSeries", "EXACT_WAITS"]

#: Waits of one window kept as they are (exact quantiles); beyond this many they go into a histogram.
EXACT_WAITS = 1 << 17


class WindowSeries:
    """Per-window figures of a run, fed in time order (see the module docstring)."""

    def __init__(self, *, warmup: float, length: float) -> None:
        self.warmup, self.length = float(warmup), float(length)
        self.opened = False
        self.k = 0  # the open window
        self._busy: list[float] = []  # busy slot-seconds before each edge, from warmup
        self._done: list[int] = []  # measured completions before each edge
        self._depth: list[int] = []  # per closed window
        self._p50: list[float] = []
        self._p95: list[float] = []
        self._mean: list[float] = []
        self._oldest: list[float] = []
        self._open_window(0)

    def edge(self, k: int) -> float:
        """The start of window ``k`` (the same arithmetic as :func:`qsim.results.windows.window_edges`)."""
        return self.warmup + k * self.length

    def _open_window(self, depth: int) -> None:
        self._waits: list[np.ndarray] = []
        self._count = 0
        self._sum, self._n = 0.0, 0  # every wait of the open window, for its mean
        self._stat: StreamStat | None = None
        self._longest = -math.inf
        self._max_depth = depth

    # ------------------------------------------------------------------ fed while the run goes

    def add_waits(self, values: Sequence[float] | np.ndarray) -> None:
        """Waits of measured jobs whose first attempt started in the open window."""
        x = np.array(values, dtype=np.float64)
        if not x.size:
            return
        self._longest = max(self._longest, float(x.max()))
        self._waits.append(x)
        self._count += x.size
        self._sum += float(x.sum())
        self._n += x.size
        if self._count > EXACT_WAITS:  # too many to keep: into a histogram
            if self._stat is None:
                self._stat = StreamStat()
            self._stat.add(np.concatenate(self._waits))
            self._waits, self._count = [], 0

    def longest(self, wait: float) -> None:
        """The wait of a job enqueued before warm-up that started in the open window."""
        if wait > self._longest:
            self._longest = wait

    def depth(self, n: int) -> None:
        """The jobs waiting after an instant of the open window at which a queue grew."""
        if n > self._max_depth:
            self._max_depth = n

    def open(self, *, busy: float, done: int, depth: int) -> None:
        """Window 0 opens (at warm-up) with ``depth`` jobs waiting."""
        self.opened = True
        self._busy.append(busy)
        self._done.append(done)
        self._open_window(depth)

    def close(self, *, busy: float, done: int, oldest_age: float, depth: int) -> None:
        """The open window ends at the next edge: its figures are kept, the next window opens.

        Args:
            busy: busy slot-seconds from warm-up to the edge.
            done: measured completions before the edge.
            oldest_age: the age at the edge of the oldest job waiting then (0: none).
            depth: jobs waiting at the edge (the depth entering the next window).
        """
        self._keep(oldest_age)
        self._busy.append(busy)
        self._done.append(done)
        self.k += 1
        self._open_window(depth)

    def _keep(self, oldest_age: float) -> None:
        if self._stat is not None:
            stat = self._stat
            if self._waits:
                stat.add(np.concatenate(self._waits))
            p50, p95 = (stat.quantile(0.50), stat.quantile(0.95)) if stat.n else (math.nan, math.nan)
        else:
            w = np.sort(np.concatenate(self._waits)) if self._waits else np.zeros(0)
            p50, p95 = sorted_quantile(w, 0.50), sorted_quantile(w, 0.95)
        self._p50.append(p50)
        self._p95.append(p95)
        self._mean.append(self._sum / self._n if self._n else math.nan)
        self._oldest.append(max(self._longest, oldest_age, 0.0))
        self._depth.append(self._max_depth)

    # ------------------------------------------------------------------ at the end

    def finish(self, *, end: float, busy: float, done: int, oldest_age: float, arrivals: np.ndarray,
               workers: Mapping[str, Sequence[tuple[float, float]]]) -> list[Window]:
        """The windows of ``[warmup, end]`` (see :func:`qsim.results.windows.windows_of`).

        Args:
            end: the last completion; ``busy``, ``done``, ``oldest_age``: as for :meth:`close`, at ``end``.
            arrivals: jobs enqueued per window (the caller counts them from the enqueue times).
            workers: per pool, its processes as ``(time, count)`` steps from time 0.
        """
        n = window_count(self.warmup, end, self.length)
        if n == 0 or not self.opened:
            return []
        if self.k < n:  # the open window holds the end
            self._keep(oldest_age)
            self._busy.append(busy)
            self._done.append(done)
        edges = self.warmup + np.arange(n + 1, dtype=np.float64) * self.length
        upto = np.asarray(self._busy[:n + 1], dtype=np.float64)
        done_at = np.asarray(self._done[:n + 1], dtype=np.int64)
        return build_windows(edges, arrivals[:n], np.diff(done_at) / self.length, np.diff(upto) / self.length,
                             np.asarray(self._depth[:n]), np.asarray(self._p50[:n]), np.asarray(self._p95[:n]),
                             np.asarray(self._mean[:n]), np.asarray(self._oldest[:n]),
                             {name: mean_steps(s, edges) for name, s in workers.items()})
