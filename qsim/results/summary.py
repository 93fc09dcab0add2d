"""The Summary: one function turns records into the JSON contract (``docs/reference/summary.md``).

The model, the engine harness and the analysis all call :func:`summarize`, so a
prediction and a measurement are the same quantity, defined the same way:

- statistics cover jobs enqueued at or after ``warmup``;
- ``wait`` is enqueue -> start of the first attempt (jobs that started);
- ``latency`` is enqueue -> final success (completed jobs only);
- the measured window runs from ``warmup`` to the last completion;
  ``throughput`` (completed per second) and ``utilization`` (busy slot-seconds
  over available slot-seconds) are over that window;
- ``lost`` counts jobs that are neither completed, dead nor unfinished;
- ``max_depth`` of a queue is the most jobs that were enqueued and not yet
  started at any moment of the window;
- ``windows`` is the run cut into windows of ``window`` seconds from
  ``warmup`` on, each with its arrivals, throughput, busy slots, depth, wait
  quantiles, oldest age and workers (:mod:`qsim.results.windows` defines each).

Empty statistics (no job started, none completed) are ``null`` in JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd

from qsim.results.records import Records
from qsim.results.windows import DEFAULT_WINDOW, Window, windows_of

__all__ = ["summarize", "stats", "STAT_KEYS", "StreamStat", "StreamCounts", "summarize_streams",
           "STREAM_REL_ERROR", "Summary", "PoolScaling", "WorkerCounts", "ColdStarts", "Stats", "JobCounts", "TypeSummary", "QueueSummary", "field_value"]

STAT_KEYS = ("mean", "p50", "p95", "p99", "max")


def field_value(summary: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a Summary, e.g. ``wait.p95`` (None when absent)."""
    node: Any = summary
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


# The JSON contract (docs/reference/summary.md), spelled out for editors and type checkers. At run time a
# Summary is a plain dict: json.dumps, equality and indexing work as before.

class Stats(TypedDict):
    """mean, p50, p95, p99 and max in seconds (all None when there is no value)."""

    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None


class JobCounts(TypedDict):
    """Jobs enqueued at or after warmup, by what became of them."""

    arrived: int
    completed: int
    dead: int
    failed_attempts: int
    stalled: int
    unfinished: int
    lost: int


class TypeSummary(TypedDict):
    """One job type's figures."""

    completed: int
    dead: int
    wait: Stats
    latency: Stats


class QueueSummary(TypedDict):
    """One queue's figures."""

    completed: int
    dead: int
    max_depth: int
    wait: Stats


class WorkerCounts(TypedDict):
    """The replicas an autoscaler asked for over the run: least, most, time-weighted mean."""

    min: int
    max: int
    mean: float | None


class ColdStarts(TypedDict):
    """The cold starts drawn for an autoscaled pool's new processes: how many, their mean (s)."""

    drawn: int
    mean: float | None


class PoolScaling(TypedDict):
    """What one pool's autoscaler did (qsim/autoscale/tally.py defines each figure)."""

    policy: str
    worker_seconds: float
    scale_events: int
    scale_ups: int
    scale_downs: int
    flaps: int
    flap_window: float
    cut_jobs: int
    replacements: int
    polls: int
    workers: WorkerCounts
    trajectory: list[list[float]]
    start_delays: ColdStarts


class Summary(TypedDict):
    """The Summary of one run, model or engine (the JSON contract: docs/reference/summary.md)."""

    scenario: str
    source: str
    seed: int
    jobs: JobCounts
    throughput: float
    wait: Stats
    latency: Stats
    utilization: float
    by_type: dict[str, TypeSummary]
    by_queue: dict[str, QueueSummary]
    windows: list[Window]
    autoscaling: NotRequired[dict[str, PoolScaling]]  # runs with [[autoscalers]] only


def _no_stats() -> Stats:
    return {"mean": None, "p50": None, "p95": None, "p99": None, "max": None}


def stats(values: pd.Series | np.ndarray) -> Stats:
    """mean, p50, p95, p99 and max of ``values`` (NaNs dropped; None when empty)."""
    x = np.asarray(values, dtype=float)
    keep = ~np.isnan(x)
    if not keep.all():
        x = x[keep]
    if x.size == 0:
        return _no_stats()
    p50, p95, p99 = np.percentile(x, [50, 95, 99])
    return {"mean": float(x.mean()), "p50": float(p50), "p95": float(p95), "p99": float(p99), "max": float(x.max())}


def _sorted(x: np.ndarray) -> np.ndarray:
    return x if x.size < 2 or bool((x[1:] >= x[:-1]).all()) else np.sort(x)


def _max_depth(enqueued: np.ndarray, started: np.ndarray, warmup: float, end: float) -> int:
    """Most jobs enqueued and not yet started at any moment of [warmup, end].

    Counted without sorting every event: at equal times starts count before
    arrivals, so the depth only rises at arrivals; the most is at warmup (the
    depth after every event before it) or just after the arrivals at some time
    ``a`` in the window: ``#(enqueued <= a) - #(started <= a)``.
    """
    if enqueued.size == 0:
        return 0
    enq = _sorted(enqueued)
    st = np.sort(started[~np.isnan(started)])
    at_warmup = int(np.searchsorted(enq, warmup, side="left")) - int(np.searchsorted(st, warmup, side="left"))
    inside = enq[int(np.searchsorted(enq, warmup, side="left")):int(np.searchsorted(enq, end, side="right"))]
    if inside.size:
        depth = np.searchsorted(enq, inside, side="right")
        depth -= np.searchsorted(st, inside, side="right")
        return max(at_warmup, int(depth.max()))
    starts_inside = np.searchsorted(st, end, side="right") > np.searchsorted(st, warmup, side="left")
    return at_warmup if starts_inside else max(at_warmup, 0)


def summarize(records: Records, *, scenario: str, source: str, seed: int, warmup: float = 0.0,
              window: float = DEFAULT_WINDOW) -> Summary:
    """The Summary of one run (see the module docstring for every definition; ``window``: the
    length of its windows in seconds, :mod:`qsim.results.windows`)."""
    # Column arrays, with each string column factorized once (object compares cost ~40 ns a row).
    jobs = records.jobs
    enq = jobs["enqueued"].to_numpy(float)
    started = jobs["started"].to_numpy(float)
    finished = jobs["finished"].to_numpy(float)
    out_code, out_names = _codes(jobs["outcome"])
    outcome = {str(name): out_code == k for k, name in enumerate(out_names)}
    nothing = np.zeros(len(jobs), dtype=bool)
    completed, dead = outcome.get("completed", nothing), outcome.get("dead", nothing)
    measured = enq >= warmup

    done_finished = finished[completed]
    end = float(done_finished.max()) if done_finished.size else (
        float(np.nanmax(finished)) if (~np.isnan(finished)).any() else warmup)
    span_s = max(end - warmup, 0.0)
    span = _spans(records)
    capacity = _capacity(records, span, warmup, end)
    wait_all = started - enq
    latency_all = finished - enq
    done = measured & completed
    # A group holding every measured job (one type, one queue) has the run's own waits and latencies:
    # their statistics are computed once (the same values, the same arithmetic) and copied.
    n_measured = int(measured.sum())
    overall: dict[str, Stats] = {}

    def wait_of(rows: np.ndarray) -> Stats:
        if int(rows.sum()) != n_measured:  # (rows is a subset of the measured jobs)
            return stats(wait_all[rows])
        if "wait" not in overall:
            overall["wait"] = stats(wait_all[measured])
        return {**overall["wait"]}

    def latency_of(ok: np.ndarray, rows: np.ndarray) -> Stats:
        if int(rows.sum()) != n_measured:  # (then ok is done: the completed measured jobs)
            return stats(latency_all[ok])
        if "latency" not in overall:
            overall["latency"] = stats(latency_all[done])
        return {**overall["latency"]}

    by_type: dict[str, TypeSummary] = {}
    for name, rows in _groups(jobs["type"], measured):
        ok = rows & completed
        by_type[name] = {
            "completed": int(ok.sum()),
            "dead": int(dead[rows].sum()),
            "wait": wait_of(rows),
            "latency": latency_of(ok, rows),
        }
    by_queue: dict[str, QueueSummary] = {}
    for name, rows, every in _groups(jobs["queue"], measured, every=True):
        by_queue[name] = {
            "completed": int(completed[rows].sum()),
            "dead": int(dead[rows].sum()),
            "max_depth": _max_depth(enq, started, warmup, end) if every is None
            else _max_depth(enq[every], started[every], warmup, end),
            "wait": wait_of(rows),
        }

    def count(name: str) -> int:
        return int((measured & outcome[name]).sum()) if name in outcome else 0

    summary: Summary = {
        "scenario": scenario,
        "source": source,
        "seed": int(seed),
        "jobs": {
            "arrived": int(measured.sum()),
            "completed": count("completed"),
            "dead": count("dead"),
            "failed_attempts": int(jobs["failed_attempts"].to_numpy()[measured].sum()),
            "stalled": int(jobs["stalled"].to_numpy()[measured].sum()),
            "unfinished": count("unfinished"),
            "lost": count("lost"),
        },
        "throughput": float(done.sum() / span_s) if span_s > 0 else 0.0,
        "wait": wait_of(measured),
        "latency": latency_of(done, measured),
        "utilization": float(_busy(span, warmup, end) / capacity) if capacity > 0 else 0.0,
        "by_type": by_type,
        "by_queue": by_queue,
        "windows": [],
    }
    del wait_all, latency_all, outcome, measured, done  # job-sized: freed before the windows' own
    summary["windows"] = windows_of(enqueued=enq, started=started, finished=finished, completed=completed,
                                    attempt_start=span[0], attempt_end=span[1], workers=records.workers,
                                    warmup=warmup, end=end, length=window)
    return summary


def _spans(records: Records) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every attempt (end NaN: still running); one span per job, first start to finish,
    when the source keeps no attempt table."""
    a = records.attempts
    if len(a):
        return a["start"].to_numpy(float), a["end"].to_numpy(float)
    j = records.jobs
    return j["started"].to_numpy(float), j["finished"].to_numpy(float)


def _capacity(records: Records, spans: tuple[np.ndarray, np.ndarray], start: float, end: float) -> float:
    """Slot-seconds inside [start, end]: the live processes' slots (``Records.slots``), and at every moment
    at least as many as run attempts. A signalled process's slots leave ``Records.slots`` at the signal,
    while its attempts still hold them: a draining one until it ends, a killed one (its job locked) until
    a stalled check finds it. So busy slot-seconds never exceed these, and utilization stays within 0..1."""
    live = records.slot_seconds(start, end)
    counts = [n for _, n in records.slots]
    if end <= start or all(b >= a for a, b in zip(counts, counts[1:])):
        return live  # no slot ever left: every attempt ran on a live slot
    s, e = spans
    ok = ~np.isnan(s)
    s = np.clip(s[ok], start, end)
    e = np.clip(np.where(np.isnan(e[ok]), end, e[ok]), start, end)
    s, e = s[e > s], e[e > s]
    changes = np.array([t for t, _ in records.slots], dtype=float)
    edges = np.unique(np.concatenate([s, e, np.clip(changes, start, end), [start, end]]))
    lo, width = edges[:-1], np.diff(edges)
    # attempts running on each interval [edges[i], edges[i + 1]): started at or before it, not ended by then
    running = np.searchsorted(np.sort(s), lo, side="right") - np.searchsorted(np.sort(e), lo, side="right")
    slots = np.asarray(counts, dtype=float)[np.searchsorted(changes, lo, side="right") - 1]
    return float((np.maximum(running, slots) * width).sum())


def _groups(column: pd.Series, measured: np.ndarray, every: bool = False) -> list[Any]:
    """Per value of ``column`` present among the measured rows, in sorted order: (name, measured rows
    [, all rows]) as boolean masks (what ``groupby(sort=True)`` of the measured rows gives); all rows
    is None when it is every row."""
    codes, names = _codes(column)
    present = np.unique(codes[measured])
    out: list[Any] = []
    for k in sorted((k for k in present.tolist() if k >= 0), key=lambda k: names[k]):
        mine = codes == k
        if every:
            out.append((str(names[k]), mine & measured, None if mine.all() else mine))
        else:
            mine &= measured
            out.append((str(names[k]), mine))
    return out


#: A string column with at most this many distinct values is coded by comparing with each (see :func:`_codes`).
_FEW = 64


def _codes(column: pd.Series) -> tuple[np.ndarray, Sequence[Any] | pd.Index]:
    """``(codes, names)`` of a column: row ``i`` is ``names[codes[i]]`` (-1: missing, factorized columns only).

    A category column gives its own codes. A column of a few distinct strings
    (names: types, queues, outcomes) is coded by one comparison per name: no
    hash table the size of the column (``pd.factorize`` of a million objects
    takes some 60 MB for a moment), and as fast.
    """
    if isinstance(column.dtype, pd.CategoricalDtype):  # compact: its codes as they are
        return column.cat.codes.to_numpy(), column.cat.categories
    values = column.to_numpy()
    if values.dtype == object:
        distinct: set[Any] = set()
        for lo in range(0, values.size, 1 << 16):  # by chunks: stops early when there are many
            distinct.update(values[lo:lo + (1 << 16)])
            if len(distinct) > _FEW:
                break
        if len(distinct) <= _FEW and all(isinstance(v, str) for v in distinct):
            names = sorted(distinct)
            codes = np.full(values.size, len(names) - 1, dtype=np.int8)  # every row holds one of the names
            for k, name in enumerate(names[:-1]):
                codes[values == name] = k
            return codes, names
    coded, uniques = pd.factorize(column)
    return coded, uniques


def _busy(spans: tuple[np.ndarray, np.ndarray], start: float, end: float) -> float:
    """Slot-seconds spent running attempts (:func:`_spans`) inside [start, end]."""
    s, e = spans
    span = np.where(np.isnan(e), end, e)  # in place from here: one array of the attempts' size at a time
    np.minimum(span, end, out=span)
    span -= np.maximum(s, start)
    np.clip(span, 0, None, out=span)
    ok = ~np.isnan(s)
    return float((span if ok.all() else span[ok]).sum())


# --------------------------------------------------------------------- streaming
# A run that keeps no records (``simulate(..., records=False)``) feeds its waits
# and latencies into :class:`StreamStat` histograms as it goes and builds the
# same Summary with :func:`summarize_streams`.

#: Log-spaced bins: this many per decade, from :data:`STREAM_LOW` seconds up over :data:`STREAM_DECADES` decades.
STREAM_BINS_PER_DECADE = 200
STREAM_LOW = 1e-6
STREAM_DECADES = 15
#: Relative error bound of a streamed p50/p95/p99 against ``np.percentile`` of the same values
#: (half a bin, geometrically) for values >= :data:`STREAM_LOW`; below it the error is < STREAM_LOW absolute.
STREAM_REL_ERROR = 10 ** (0.5 / STREAM_BINS_PER_DECADE) - 1

_NBINS = STREAM_BINS_PER_DECADE * STREAM_DECADES
_EDGES = STREAM_LOW * 10.0 ** (np.arange(_NBINS + 1) / STREAM_BINS_PER_DECADE)
_MIDS = np.sqrt(_EDGES[:-1] * _EDGES[1:])


class StreamStat:
    """Streaming mean, p50, p95, p99 and max of non-negative values (seconds).

    Exact count, sum, min and max; quantiles from a histogram held in numpy:
    one bucket for exact zeros, one for ``(0, STREAM_LOW)``, then
    ``STREAM_BINS_PER_DECADE`` log-spaced bins per decade (values beyond the
    last edge go to the last bin). A quantile is interpolated between order
    statistics like ``np.percentile``; each order statistic is its bin's
    geometric midpoint clamped to ``[min, max]`` (the extreme ranks are exact),
    so it is within :data:`STREAM_REL_ERROR` (about 0.58%) of the exact one.
    Memory is a fixed ~24 KB whatever the number of values.
    """

    __slots__ = ("counts", "n", "total", "lo", "hi")

    def __init__(self) -> None:
        self.counts = np.zeros(_NBINS + 2, dtype=np.int64)  # [0]: zeros, [1]: (0, LOW), [2 + i]: bin i
        self.n = 0
        self.total = 0.0
        self.lo = math.inf
        self.hi = -math.inf

    def add(self, values: Sequence[float] | np.ndarray) -> None:
        """Add values (NaNs are dropped)."""
        x = np.asarray(values, dtype=np.float64)
        x = x[~np.isnan(x)]
        if x.size == 0:
            return
        self.n += int(x.size)
        self.total += float(x.sum())
        self.lo = min(self.lo, float(x.min()))
        self.hi = max(self.hi, float(x.max()))
        idx = np.zeros(x.size, dtype=np.int64)
        pos = x > 0
        small = pos & (x < STREAM_LOW)
        idx[small] = 1
        big = pos & ~small
        if big.any():
            b = np.floor(np.log10(x[big] / STREAM_LOW) * STREAM_BINS_PER_DECADE).astype(np.int64)
            idx[big] = 2 + np.clip(b, 0, _NBINS - 1)
        self.counts += np.bincount(idx, minlength=_NBINS + 2)

    def merge(self, other: StreamStat) -> StreamStat:
        """A new StreamStat holding the values of both."""
        out = StreamStat()
        out.counts = self.counts + other.counts
        out.n, out.total = self.n + other.n, self.total + other.total
        out.lo, out.hi = min(self.lo, other.lo), max(self.hi, other.hi)
        return out

    def _order_stat(self, rank: int, cum: np.ndarray) -> float:
        if rank <= 0:
            return self.lo
        if rank >= self.n - 1:
            return self.hi
        b = int(np.searchsorted(cum, rank, side="right"))
        if b == 0:
            return 0.0
        mid = STREAM_LOW / 2 if b == 1 else float(_MIDS[b - 2])
        return min(max(mid, self.lo), self.hi)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1), interpolated like ``np.percentile``; NaN when empty."""
        if self.n == 0:
            return math.nan
        cum = np.cumsum(self.counts)
        h = (self.n - 1) * q
        k = math.floor(h)
        v = self._order_stat(k, cum)
        if h > k:
            v += (h - k) * (self._order_stat(k + 1, cum) - v)
        return v

    def stats(self) -> Stats:
        """The same keys as :func:`stats` (None when empty)."""
        if self.n == 0:
            return _no_stats()
        return {"mean": self.total / self.n, "p50": self.quantile(0.50), "p95": self.quantile(0.95),
                "p99": self.quantile(0.99), "max": self.hi}


@dataclass
class StreamCounts:
    """What a record-less run counted for one job type (or one queue), jobs enqueued at or after warmup."""

    arrived: int = 0
    completed: int = 0
    dead: int = 0
    failed_attempts: int = 0
    stalled: int = 0
    lost: int = 0
    wait: StreamStat = field(default_factory=StreamStat)
    latency: StreamStat = field(default_factory=StreamStat)


def summarize_streams(*, scenario: str, source: str, seed: int, warmup: float, end: float, busy: float,
                      slot_seconds: float, by_type: Mapping[str, StreamCounts], queue_of: Mapping[str, str],
                      max_depth: Mapping[str, int], windows: list[Window] | None = None) -> Summary:
    """The Summary of a run that kept no records (the same shape as :func:`summarize`).

    Args:
        end: the last completion (``warmup`` when nothing completed), as :func:`summarize` defines it.
        busy: slot-seconds spent running attempts inside ``[warmup, end]``.
        slot_seconds: slot-seconds available inside ``[warmup, end]``.
        by_type: counts and streams per job type (types with no job enqueued at or after warmup are left out).
        queue_of: each job type's queue.
        max_depth: per queue, as :func:`summarize` defines it.
        windows: the run's windows, as :func:`summarize` defines them (streamed, :mod:`qsim.model.windowstream`).
    """
    types = {name: c for name, c in sorted(by_type.items()) if c.arrived > 0}
    total = StreamCounts()
    wait, latency = StreamStat(), StreamStat()
    queues: dict[str, StreamCounts] = {}
    for name, c in types.items():
        for key in ("arrived", "completed", "dead", "failed_attempts", "stalled", "lost"):
            setattr(total, key, getattr(total, key) + getattr(c, key))
        wait, latency = wait.merge(c.wait), latency.merge(c.latency)
        qc = queues.setdefault(queue_of[name], StreamCounts())
        qc.completed += c.completed
        qc.dead += c.dead
        qc.wait = qc.wait.merge(c.wait)
    window = max(end - warmup, 0.0)
    unfinished = total.arrived - total.completed - total.dead - total.lost
    return {
        "scenario": scenario,
        "source": source,
        "seed": int(seed),
        "jobs": {
            "arrived": total.arrived,
            "completed": total.completed,
            "dead": total.dead,
            "failed_attempts": total.failed_attempts,
            "stalled": total.stalled,
            "unfinished": unfinished,
            "lost": total.lost,
        },
        "throughput": float(total.completed / window) if window > 0 else 0.0,
        "wait": wait.stats(),
        "latency": latency.stats(),
        "utilization": float(busy / slot_seconds) if slot_seconds > 0 else 0.0,
        "by_type": {name: {"completed": c.completed, "dead": c.dead, "wait": c.wait.stats(),
                           "latency": c.latency.stats()} for name, c in types.items()},
        "by_queue": {name: {"completed": c.completed, "dead": c.dead, "max_depth": int(max_depth.get(name, 0)),
                            "wait": c.wait.stats()} for name, c in sorted(queues.items())},
        "windows": list(windows or []),
    }
