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
``mean_wait``
    The mean of those same waits; ``null`` when none started.
``oldest_age``
    The longest any job had been waiting at a moment of the window: the larger
    of the longest wait of a job (any job) that started in it and the age, at
    the window's end (at ``end`` for the last window), of the oldest job still
    waiting then; 0 when no job waited. (A job waiting for a retry after its
    backoff is not waiting in this sense, as for ``max_depth``.)
``bands`` (only with replications: ``qsim simulate --replications N``)
    ``{"wait_p95": [lo, hi], "mean_wait": [lo, hi]}``: the 5th and 95th
    percentiles of the window's ``wait_p95`` and ``mean_wait`` over the N
    replications (:func:`with_bands`), a range that holds a further
    replication's value 90% of the time (N >= 19; :func:`window_bands`);
    ``null`` for a figure fewer than half of the replications have in that
    window.
``workers``
    Per pool, the time-weighted mean number of processes taking work over it
    (from the run's process history, :attr:`qsim.results.records.Records.workers`: the
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
from typing import NotRequired, TypedDict

import numpy as np

__all__ = ["DEFAULT_WINDOW", "WINDOW_FIELDS", "Window", "window_count", "window_edges", "windows_of",
           "group_quantiles", "sorted_quantile", "mean_steps", "check_window", "BAND", "BAND_FIELDS", "WindowBands",
           "window_bands", "with_bands"]

#: Window length (seconds) when neither the scenario nor ``--window`` sets one.
DEFAULT_WINDOW = 60.0
#: The keys of one window, in the order the JSON and the tables show them.
WINDOW_FIELDS = ("start", "end", "arrivals", "throughput", "busy", "max_depth", "wait_p50", "wait_p95",
                 "mean_wait", "oldest_age", "workers")

Steps = Sequence[tuple[float, float]]
#: The percentiles over replications that bound a window's band (:func:`window_bands`).
BAND = (5.0, 95.0)
#: The window figures that get a band over replications (:func:`with_bands`).
BAND_FIELDS = ("wait_p95", "mean_wait")


class WindowBands(TypedDict):
    """A window's 5-95% range over replications of each of :data:`BAND_FIELDS` (``[lo, hi]``, or None)."""

    wait_p95: list[float] | None
    mean_wait: list[float] | None


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
    mean_wait: float | None
    oldest_age: float
    workers: dict[str, float]
    bands: NotRequired[WindowBands]


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
    """Slot-seconds of the spans ``[start, end]`` before each time ``x``.

    ``start`` and ``end`` are the caller's own copies: they are sorted and summed in place (two arrays of
    the attempts' size in all, not six).
    """
    start.sort()
    end.sort()
    ns = np.searchsorted(start, x, side="left")
    ne = np.searchsorted(end, x, side="left")
    np.cumsum(start, out=start)
    np.cumsum(end, out=end)
    cs = np.where(ns > 0, start[np.maximum(ns - 1, 0)], 0.0)
    ce = np.where(ne > 0, end[np.maximum(ne - 1, 0)], 0.0)
    # spans ended before x add end - start; spans running at x add x - start
    return np.asarray(ce + x * (ns - ne) - cs, dtype=np.float64)


def _grouped_max(values: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    """Per group ``0..n-1`` the largest of ``values`` (``index`` sorted ascending); -inf for an empty group."""
    out = np.full(n, -np.inf)
    if values.size:
        first = np.searchsorted(index, np.arange(n), side="left")
        last = np.searchsorted(index, np.arange(n), side="right")
        full = last > first
        out[full] = np.maximum.reduceat(values, first[full])
    return out


def _locate(t: np.ndarray, edges: np.ndarray, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``t`` fall in ``[edges[0], end]`` (NaN: none) and the window of each of those."""
    keep = (t >= edges[0]) & (t <= end)
    i = np.searchsorted(edges, t[keep], side="right")
    i -= 1
    np.minimum(i, edges.size - 2, out=i)  # `end` itself is in the last window
    return keep, i


def windows_of(*, enqueued: np.ndarray, started: np.ndarray, finished: np.ndarray, completed: np.ndarray,
               attempt_start: np.ndarray, attempt_end: np.ndarray, workers: Mapping[str, Steps],
               warmup: float, end: float, length: float) -> list[Window]:
    """The windows of a run from its records' columns (see the module docstring).

    Each figure is computed by a function of its own, so that its job-sized temporaries are gone before
    the next one's are made (a run of a million jobs keeps a few arrays of its size at a time).

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
    arrivals = np.bincount(_locate(enqueued, edges, end)[1], minlength=n)
    throughput = np.bincount(_locate(np.where(measured & completed, finished, np.nan), edges, end)[1],
                             minlength=n) / length
    busy = _busy(attempt_start, attempt_end, edges, end) / length
    # waiting jobs (all of them): enqueued, first attempt not started; in arrival order
    by_enq = None if enqueued.size < 2 or bool((enqueued[1:] >= enqueued[:-1]).all()) \
        else np.argsort(enqueued, kind="stable")
    enq_sorted = enqueued if by_enq is None else enqueued[by_enq]
    max_depth = _max_depth(enq_sorted, started, edges, end)
    longest, p50, p95, mean = _waits(enqueued, started, measured, edges, end)
    del measured
    first_start = started if by_enq is None else started[by_enq]
    del by_enq
    oldest = np.maximum(np.maximum(longest, _oldest_waiting(enq_sorted, first_start, edges, end)), 0.0)
    pools = {name: mean_steps(steps, edges) for name, steps in workers.items()}
    return build_windows(edges, arrivals, throughput, busy, max_depth, p50, p95, mean, oldest, pools)


def _busy(attempt_start: np.ndarray, attempt_end: np.ndarray, edges: np.ndarray, end: float) -> np.ndarray:
    """Slot-seconds spent running attempts inside each window."""
    ran = attempt_start <= end  # (NaN: never started)
    e = attempt_end[ran]
    np.minimum(e, end, out=e)
    e[np.isnan(e)] = end  # still running: until the end
    return np.diff(_busy_until(np.minimum(edges, end), attempt_start[ran], e))


def _max_depth(enq_sorted: np.ndarray, started: np.ndarray, edges: np.ndarray, end: float) -> np.ndarray:
    """The most jobs waiting entering each window or after each arrival instant in it."""
    n = edges.size - 1
    st_sorted = started[~np.isnan(started)]  # our own copy: sorted in place
    if st_sorted.size > 1 and not bool((st_sorted[1:] >= st_sorted[:-1]).all()):
        st_sorted.sort()
    at_start = (np.searchsorted(enq_sorted, edges[:-1], side="left")
                - np.searchsorted(st_sorted, edges[:-1], side="left"))
    lo, hi = np.searchsorted(enq_sorted, [edges[0], end], side="left")[0], np.searchsorted(enq_sorted, end, "right")
    arrived = enq_sorted[lo:hi]  # the arrivals inside the measured range (a view: they are sorted)
    if not arrived.size:
        return at_start.astype(np.int64)
    # after each arrival instant: #(enqueued <= a) - #(started <= a)
    after = np.flatnonzero(np.r_[arrived[1:] != arrived[:-1], True])  # the last arrival of each instant
    instant = arrived[after]
    after += lo + 1
    after -= np.searchsorted(st_sorted, instant, side="right")
    del st_sorted
    window = np.searchsorted(edges, instant, side="right") - 1
    del instant
    np.minimum(window, n - 1, out=window)  # `end` itself is in the last window
    peak = _grouped_max(after.astype(np.float64), window, n)
    return np.asarray(np.maximum(at_start, peak), dtype=np.int64)


def _waits(enqueued: np.ndarray, started: np.ndarray, measured: np.ndarray, edges: np.ndarray,
           end: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """By the window of the first start: the longest wait of any job, and p50/p95/mean of the measured jobs'."""
    n = edges.size - 1
    keep_s, i_s = _locate(started, edges, end)
    waits = (started - enqueued)[keep_s]
    if i_s.size > 1 and not bool((i_s[1:] >= i_s[:-1]).all()):
        by = np.argsort(i_s, kind="stable")
        waits, i_s, mine = waits[by], i_s[by], measured[keep_s][by]
        del by
    else:
        mine = measured[keep_s]
    del keep_s
    longest = _grouped_max(waits, i_s, n)
    if not mine.all():
        waits, i_s = waits[mine], i_s[mine]
    del mine
    with np.errstate(invalid="ignore", divide="ignore"):  # an empty window's mean is NaN
        mean = np.bincount(i_s, weights=waits, minlength=n) / np.bincount(i_s, minlength=n)
    first = np.searchsorted(i_s, np.arange(n), side="left")
    sizes = np.searchsorted(i_s, np.arange(n), side="right") - first
    del i_s
    for g in np.flatnonzero(sizes > 1):  # each window's waits in order (waits is this function's own)
        waits[first[g]:first[g] + sizes[g]].sort()
    return (longest, group_quantiles(waits, first, sizes, 0.50), group_quantiles(waits, first, sizes, 0.95),
            mean)


def _oldest_waiting(enq_sorted: np.ndarray, first_start: np.ndarray, edges: np.ndarray, end: float) -> np.ndarray:
    """The age of the oldest job waiting at each window's end (at ``end`` for the last): in arrival order,
    the first whose first start is not before it (prefix maxima of the starts find it by bisection)."""
    n = edges.size - 1
    latest = np.where(np.isnan(first_start), np.inf, first_start)
    np.maximum.accumulate(latest, out=latest)
    ends = np.append(edges[1:-1], end)
    j = np.concatenate([np.searchsorted(latest, ends[:-1], side="left"),
                        np.searchsorted(latest, ends[-1:], side="right")])
    del latest
    oldest_enq = np.full(n, np.inf)
    valid = j < enq_sorted.size
    oldest_enq[valid] = enq_sorted[j[valid]]
    waiting = np.r_[oldest_enq[:-1] < ends[:-1], oldest_enq[-1:] <= ends[-1:]]
    return np.asarray(np.where(waiting, ends - oldest_enq, 0.0), dtype=np.float64)


def build_windows(edges: np.ndarray, arrivals: np.ndarray, throughput: np.ndarray, busy: np.ndarray,
                  max_depth: np.ndarray, p50: np.ndarray, p95: np.ndarray, mean: np.ndarray, oldest: np.ndarray,
                  workers: Mapping[str, np.ndarray]) -> list[Window]:
    """The window dicts from per-window arrays (NaN waits become None)."""
    def opt(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    return [{
        "start": float(edges[i]), "end": float(edges[i + 1]), "arrivals": int(arrivals[i]),
        "throughput": float(throughput[i]), "busy": float(busy[i]), "max_depth": int(max_depth[i]),
        "wait_p50": opt(p50[i]), "wait_p95": opt(p95[i]),
        "mean_wait": opt(mean[i]), "oldest_age": float(oldest[i]),
        "workers": {name: float(m[i]) for name, m in workers.items()},
    } for i in range(edges.size - 1)]


def window_bands(runs: Sequence[Sequence[Mapping[str, object]]], field: str, *,
                 band: tuple[float, float] = BAND) -> list[tuple[float, float] | None]:
    """Per window index, the ``band`` percentiles of ``field`` over the replications' ``windows`` lists.

    ``runs`` holds one Summary ``windows`` list per replication (the same scenario, other seeds). A
    window's band is ``(lo, hi)`` over the replications that have the window and a value for the field
    (``wait_p95`` is null in a window where no job started); None where fewer than half of them do.

    The percentiles take the ``k``-th of ``n`` sorted values at ``k / (n + 1)`` (numpy's ``"weibull"``
    method), so that a further replication's value falls inside the 5-95% band 90% of the time once
    ``n >= 19`` (fewer values: ``(n - 1) / (n + 1)``, the band being the range). numpy's default
    (``k - 1`` over ``n - 1``) would give a band that covers ``0.9 (n - 1) / (n + 1)``: 81% for 20 runs.
    """
    n = max((len(w) for w in runs), default=0)
    out: list[tuple[float, float] | None] = []
    for i in range(n):
        values = [float(v) for w in runs if i < len(w) and isinstance(v := w[i].get(field), (int, float))]
        if 2 * len(values) < len(runs) or not values:
            out.append(None)
            continue
        lo, hi = np.percentile(values, band, method="weibull")
        out.append((float(lo), float(hi)))
    return out


def with_bands(windows: Sequence[Window], runs: Sequence[Sequence[Mapping[str, object]]], *,
               band: tuple[float, float] = BAND) -> list[Window]:
    """``windows`` (one run's) with ``bands``: per window, :func:`window_bands` of each of :data:`BAND_FIELDS`
    over ``runs`` (every replication's ``windows``, this run's among them)."""
    per_field = {f: window_bands(runs, f, band=band) for f in BAND_FIELDS}

    def pick(field: str, i: int) -> list[float] | None:
        b = per_field[field]
        return list(b[i]) if i < len(b) and b[i] is not None else None  # type: ignore[arg-type]

    return [{**w, "bands": {"wait_p95": pick("wait_p95", i), "mean_wait": pick("mean_wait", i)}}
            for i, w in enumerate(windows)]
