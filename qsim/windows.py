"""Time-resolved results: the Summary's ``windows``, the same figures for every source.

A run's measured range ``[warmup, end]`` (``end``: the last completion, as the
Summary defines it) is cut into windows of ``length`` seconds (the scenario's
``window``, or ``qsim simulate --window S``; :data:`DEFAULT_WINDOW` = 60 s of
model time, or of Redis's clock on the engine). Window ``i`` is the half-open
interval ``[warmup + i * length, warmup + (i + 1) * length)``; windows count
from 0 at ``warmup`` and run until the one that holds ``end`` (so every
window has the full length; nothing is counted after ``end``, which only a
run stopped at its horizon has). Warm-up: nothing before ``warmup`` is in a
window; jobs enqueued before it are left out of ``arrivals``, ``throughput``
and the wait quantiles (the measured jobs' figures, as in the Summary), but
they are part of the system's state (``busy``, ``max_depth``, ``oldest_age``).
No completion after ``warmup`` gives no window at all (``[]``).

Each window is a dict:

``start``, ``end``
    Its bounds (seconds of the run's clock).
``arrivals``
    Jobs enqueued in it (every job row: drawn arrivals and children).
``throughput``
    Measured jobs (enqueued at or after ``warmup``) that completed in it, per second.
``busy``
    Mean busy slots: slot-seconds spent running attempts inside it (every
    attempt, as ``utilization`` counts them), over its length.
``max_depth``
    The most jobs waiting (enqueued, first attempt not yet started: the
    Summary's ``max_depth``, all queues together) at any moment of it: the
    depth as it enters the window and after every instant of it at which a
    job arrived.
``wait_p50``, ``wait_p95``
    Quantiles (as ``numpy.percentile``) of the waits (enqueue -> start of the
    first attempt) of the measured jobs whose first attempt *started* in it —
    what a monitor sees as jobs start; ``null`` when none started.
``oldest_age``
    The longest any job had been waiting at a moment of the window: the larger
    of the longest wait of a job (any job) that started in it and the age, at
    the window's end (at ``end`` for the last window), of the oldest job still
    waiting then; 0 when no job waited. (A job waiting for a retry after its
    backoff is not waiting in this sense, as for ``max_depth``.)
``workers``
    Per pool, the time-weighted mean number of processes taking work over it
    (from the run's process history, :attr:`qsim.records.Records.workers`: the
    initial processes, then ``sigterm``/``sigkill`` (they stop fetching at the
    signal) and ``start`` events (from when the new processes take work), and
    whatever else changes a pool, such as an autoscaler); ``{}`` when the
    source recorded none.

Records on, :func:`windows_of` computes the windows from the records'
columns; a record-less model run (:mod:`qsim.model.recordless`) gathers the
same figures as it runs, with memory bounded by one window's waits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

import numpy as np

__all__ = ["DEFAULT_WINDOW", "WINDOW_FIELDS", "Window", "window_count", "window_edges", "windows_of",
           "group_quantiles", "sorted_quantile", "mean_steps", "check_window"]

#: Window length (seconds) when neither the scenario nor ``--window`` sets one.
DEFAULT_WINDOW = 60.0
#: The keys of one window, in the order the JSON and the tables show them.
WINDOW_FIELDS = ("start", "end", "arrivals", "throughput", "busy", "max_depth", "wait_p50", "wait_p95",
                 "oldest_age", "workers")

Steps = Sequence[tuple[float, float]]


class Window(TypedDict):
    """One window's figures (see the module docstring for each definition)."""

    start: float
    end: float
    arrivals: int
    throughput: float
    busy: float
    max_depth: int
    wait_p50: float | None
    wait_p95: float | None
    oldest_age: float
    workers: dict[str, float]


def check_window(length: object, *, what: str = "window") -> float:
    """``length`` as a window length in seconds (a finite number > 0), or ValueError naming ``what``."""
    if isinstance(length, bool) or not isinstance(length, (int, float)) or not math.isfinite(length) \
            or length <= 0:
        raise ValueError(f"{what} must be a number of seconds > 0, got {length!r}")
    return float(length)


def window_count(warmup: float, end: float, length: float) -> int:
    """How many windows cover ``[warmup, end]``: those whose start ``warmup + i * length`` is ``<= end``
    (none when ``end <= warmup``: nothing completed after warm-up)."""
    if not end > warmup:
        return 0
    k = math.floor((end - warmup) / length)
    while warmup + (k + 1) * length <= end:  # the quotient rounded down an edge that is <= end
        k += 1
    while k > 0 and warmup + k * length > end:
        k -= 1
    return k + 1


def window_edges(warmup: float, end: float, length: float) -> np.ndarray:
    """The bounds ``warmup + i * length`` of the windows covering ``[warmup, end]``: n + 1 values for n windows."""
    n = window_count(warmup, end, length)
    return warmup + np.arange(n + 1, dtype=np.float64) * length if n else np.zeros(0)


def group_quantiles(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile (linear interpolation, as ``numpy.percentile``) of each group of ``values``.

    ``values`` holds the groups one after the other, each sorted; group ``g`` is
    ``values[starts[g]:starts[g] + sizes[g]]`` (NaN for an empty group). The
    model's streamed windows and the records' windows both use it, so they agree
    to the last bit.
    """
    out = np.full(sizes.size, np.nan)
    full = sizes > 0
    if not full.any():
        return out
    s, n = starts[full], sizes[full]
    h = (n - 1) * q
    lo = np.floor(h).astype(np.int64)
    hi = np.minimum(lo + 1, n - 1)
    a, b = values[s + lo], values[s + hi]
    t = h - lo
    out[full] = np.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
    return out


def sorted_quantile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The ``q`` quantile of sorted ``values``, one group of :func:`group_quantiles` (the same arithmetic,
    to the last bit); NaN when empty."""
    n = len(values)
    if n == 0:
        return math.nan
    h = (n - 1) * q
    lo = math.floor(h)
    a, b = float(values[lo]), float(values[min(lo + 1, n - 1)])
    t = h - lo
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def mean_steps(steps: Steps, edges: np.ndarray) -> np.ndarray:
    """The time-weighted mean of a step function (``(time, value)`` steps from time 0) between consecutive ``edges``."""
    t = np.asarray([s[0] for s in steps], dtype=np.float64)
    v = np.asarray([s[1] for s in steps], dtype=np.float64)
    if t.size == 0 or edges.size < 2:
        return np.zeros(max(edges.size - 1, 0))
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    area = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])

    def integral(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(t, x, side="right") - 1
        before = k < 0  # before the first step: nothing
        k = np.maximum(k, 0)
        return np.where(before, 0.0, area[k] + v[k] * (x - t[k]))

    total = integral(edges)
    return np.diff(total) / np.diff(edges)


def _busy_until(x: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Slot-seconds of the spans ``[start, end]`` before each time ``x``."""
    s, e = np.sort(start), np.sort(end)
    cs = np.concatenate([[0.0], np.cumsum(s)])
    ce = np.concatenate([[0.0], np.cumsum(e)])
    ns = np.searchsorted(s, x, side="left")
    ne = np.searchsorted(e, x, side="left")
    # spans ended before x add end - start; spans running at x add x - start
    return np.asarray(ce[ne] + x * (ns - ne) - cs[ns], dtype=np.float64)


def _grouped_max(values: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    """Per group ``0..n-1`` the largest of ``values`` (``index`` sorted ascending); -inf for an empty group."""
    out = np.full(n, -np.inf)
    if values.size:
        first = np.searchsorted(index, np.arange(n), side="left")
        last = np.searchsorted(index, np.arange(n), side="right")
        full = last > first
        out[full] = np.maximum.reduceat(values, first[full])
    return out


def _sorted_copy(x: np.ndarray) -> np.ndarray:
    return x if x.size < 2 or bool((x[1:] >= x[:-1]).all()) else np.sort(x)


def _locate(t: np.ndarray, edges: np.ndarray, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``t`` fall in ``[edges[0], end]`` (NaN: none) and the window of each of those."""
    warmup, n = edges[0], edges.size - 1
    keep = (t >= warmup) & (t <= end)
    x = t[keep]
    i = np.minimum(((x - warmup) / (edges[1] - warmup)).astype(np.int64), n - 1)
    i -= x < edges[i]  # a quotient rounded up past an edge
    i += (i < n - 1) & (x >= edges[i + 1])  # or down below one
    return keep, i


def windows_of(*, enqueued: np.ndarray, started: np.ndarray, finished: np.ndarray, completed: np.ndarray,
               attempt_start: np.ndarray, attempt_end: np.ndarray, workers: Mapping[str, Steps],
               warmup: float, end: float, length: float) -> list[Window]:
    """The windows of a run from its records' columns (see the module docstring).

    Args:
        enqueued, started, finished: per job (NaN: never started / not finished).
        completed: per job, whether it completed.
        attempt_start, attempt_end: per attempt (``attempt_end`` NaN: still running).
        workers: per pool, its processes as ``(time, count)`` steps from time 0.
        warmup, end: the measured range; ``length``: the window length.
    """
    edges = window_edges(warmup, end, length)
    n = edges.size - 1
    if n <= 0:
        return []
    measured = enqueued >= warmup
    _, i_enq = _locate(enqueued, edges, end)
    arrivals = np.bincount(i_enq, minlength=n)
    _, i_done = _locate(np.where(measured & completed, finished, np.nan), edges, end)
    throughput = np.bincount(i_done, minlength=n) / length

    ran = attempt_start <= end  # (NaN: never started)
    s = attempt_start[ran]
    e = np.where(np.isnan(attempt_end[ran]), end, np.minimum(attempt_end[ran], end))
    busy = np.diff(_busy_until(np.minimum(edges, end), s, e)) / length

    # waiting jobs (all of them): enqueued, first attempt not started
    by_enq = None if enqueued.size < 2 or bool((enqueued[1:] >= enqueued[:-1]).all()) \
        else np.argsort(enqueued, kind="stable")
    enq_sorted = enqueued if by_enq is None else enqueued[by_enq]
    st_sorted = _sorted_copy(started[~np.isnan(started)])
    at_start = (np.searchsorted(enq_sorted, edges[:-1], side="left")
                - np.searchsorted(st_sorted, edges[:-1], side="left"))
    keep, i_arr = _locate(enq_sorted, edges, end)
    pos = np.flatnonzero(keep)
    if pos.size:  # after each arrival instant: #(enqueued <= a) - #(started <= a)
        arrived = enq_sorted[pos]
        last = np.flatnonzero(np.r_[arrived[1:] != arrived[:-1], True])  # the last arrival of each instant
        after = pos[last] + 1 - np.searchsorted(st_sorted, arrived[last], side="right")
        peak = _grouped_max(after.astype(np.float64), i_arr[last], n)
    else:
        peak = np.full(n, -np.inf)
    max_depth = np.maximum(at_start, peak).astype(np.int64)

    # waits by the window of the first start: quantiles of measured jobs, the longest of any job
    keep_s, i_s = _locate(started, edges, end)
    waits = (started - enqueued)[keep_s]
    if i_s.size > 1 and not bool((i_s[1:] >= i_s[:-1]).all()):
        by = np.argsort(i_s, kind="stable")
        waits, i_s, mine = waits[by], i_s[by], measured[keep_s][by]
    else:
        mine = measured[keep_s]
    longest = _grouped_max(waits, i_s, n)
    w, i_w = (waits, i_s) if mine.all() else (waits[mine], i_s[mine])
    w = w.copy()
    first = np.searchsorted(i_w, np.arange(n), side="left")
    sizes = np.searchsorted(i_w, np.arange(n), side="right") - first
    for g in np.flatnonzero(sizes > 1):  # each window's waits in order
        w[first[g]:first[g] + sizes[g]].sort()
    p50 = group_quantiles(w, first, sizes, 0.50)
    p95 = group_quantiles(w, first, sizes, 0.95)

    # the oldest job waiting at each window's end (at `end` for the last): in arrival order, the
    # first whose first start is not before it (prefix maxima of the starts find it by bisection)
    first_start = started if by_enq is None else started[by_enq]
    latest = np.maximum.accumulate(np.where(np.isnan(first_start), np.inf, first_start))
    ends = np.append(edges[1:-1], end)
    j = np.concatenate([np.searchsorted(latest, ends[:-1], side="left"),
                        np.searchsorted(latest, ends[-1:], side="right")])
    oldest_enq = np.full(n, np.inf)
    valid = j < enq_sorted.size
    oldest_enq[valid] = enq_sorted[j[valid]]
    waiting = np.r_[oldest_enq[:-1] < ends[:-1], oldest_enq[-1:] <= ends[-1:]]
    age = np.where(waiting, ends - oldest_enq, 0.0)
    oldest = np.maximum(np.maximum(longest, age), 0.0)

    pools = {name: mean_steps(steps, edges) for name, steps in workers.items()}
    return build_windows(edges, arrivals, throughput, busy, max_depth, p50, p95, oldest, pools)


def build_windows(edges: np.ndarray, arrivals: np.ndarray, throughput: np.ndarray, busy: np.ndarray,
                  max_depth: np.ndarray, p50: np.ndarray, p95: np.ndarray, oldest: np.ndarray,
                  workers: Mapping[str, np.ndarray]) -> list[Window]:
    """The window dicts from per-window arrays (NaN quantiles become None)."""
    def opt(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    return [{
        "start": float(edges[i]), "end": float(edges[i + 1]), "arrivals": int(arrivals[i]),
        "throughput": float(throughput[i]), "busy": float(busy[i]), "max_depth": int(max_depth[i]),
        "wait_p50": opt(p50[i]), "wait_p95": opt(p95[i]), "oldest_age": float(oldest[i]),
        "workers": {name: float(m[i]) for name, m in workers.items()},
    } for i in range(edges.size - 1)]
