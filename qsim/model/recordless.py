"""Record-less core runs (``simulate(..., records=False)``): only what the Summary needs.

A core run (no mechanism beyond pools, priorities, policies and the
concurrency limit) with ``records=False`` runs with :class:`StreamRecords`
as its :class:`~qsim.model.hooks.Recorder` (the records-off strategy, chosen
once). It writes no per-job record; instead it

- appends each measured job's wait (at its start) and latency (at its end) to
  a small buffer per job type, folded every :data:`FLUSH` settled jobs into a
  :class:`~qsim.summary.StreamStat` (log-spaced histogram bins, exact count,
  mean and max), so the buffers stay bounded;
- counts completions per type and adds up busy slot-seconds (each slot keeps
  the start of its running attempt);
- tracks each queue's ``max_depth`` as :func:`~qsim.summary.summarize` defines
  it: the depth after each instant at which the queue grew (a pop at the same
  instant updates it), from ``warmup`` on, plus the depth at ``warmup``; the
  running maxima keep their time so that those after the last completion can
  be dropped at the end;
- gathers the Summary's ``windows`` (:mod:`qsim.windows`) in a
  :class:`~qsim.model.windowstream.WindowSeries`: an urgent alarm at each
  window edge reads the busy slot-seconds, completions and total depth so far
  and the oldest waiting job (the first job, in arrival order, not yet started:
  one byte a job says which have started); the folds of the wait buffers also
  feed the open window, and they happen at every edge too.

What stays O(jobs): one byte a job (started or not, for the windows' oldest age), the drawn jobs
(arrival time, type, first service time:
every job is drawn before the run, so that runs are reproducible and the
engine harness plays the same draws; 24 bytes a job, freed once the model is
built) and the job-table columns dispatch reads (type, queue, priority as
lists, enqueued and service as arrays: about 41 bytes a job, the arrival feed
reads the enqueued column itself). Measured with tracemalloc at 10^6 M/M/c
jobs: about 82 MB at the peak (while the model is built from the draws),
41 MB while it runs, against about 285 MB with records (frames and Summary included). The record columns
(started, finished, attempts, worker, outcome, ...), the DataFrames and the
time series are never built; the statistics are bounded (a histogram per job
type and statistic, and buffers of at most :data:`FLUSH` values). The waiting
lines hold the jobs waiting, as with records.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable

import numpy as np
from simpy.events import Event, Timeout

from qsim.model.core import ModelCore
from qsim.model.schedule import Alarm
from qsim.model.windowstream import WindowSeries
from qsim.summary import StreamCounts, Summary, summarize_streams
from qsim.windows import window_count

__all__ = ["StreamRecords", "FLUSH"]

#: Settled jobs between two folds of the wait/latency buffers into their histograms.
FLUSH = 1 << 15


class StreamRecords:
    """Records off: the statistics the Summary needs, streamed (see the module docstring)."""

    def __init__(self, core: ModelCore, seed: int) -> None:
        self.core = core
        self.seed = seed
        self.every: float = FLUSH
        self.queued: Callable[[int, int, float], None] | None = self._queued
        nt, nq = len(core.type_names), len(core.queue_names)
        self._warmup = float(core.scenario.warmup)
        self._wbuf = [array("d") for _ in range(nt)]
        self._lbuf = [array("d") for _ in range(nt)]
        self._counts = [StreamCounts() for _ in range(nt)]
        self._done_by_type = [0] * nt
        self._slot_start = [0.0] * core.n_slots
        self._busy = 0.0
        self._last_end = -math.inf  # the last completion
        self._pend_t = [-math.inf] * nq  # per queue: the last instant it grew, and its depth after that instant
        self._pend_n = [0] * nq
        self._peaks: list[list[tuple[float, int]]] = [[] for _ in range(nq)]  # running maxima (time, depth)
        self._at_warmup = [0] * nq
        self._heaps = core.queues.heaps
        self._enq = core.jobs.enqueued
        self._types = core.jobs.type
        # the windows: total depth over the lanes (and its last instant), which jobs started, the series
        self._lane_len = [0] * len(self._heaps)
        self._total = 0
        self._tot_t = -math.inf
        self._tot_n = 0
        self._began = bytearray(core.jobs.n)
        self._first_waiting = 0
        self.windows = WindowSeries(warmup=self._warmup, length=core.scenario.window_length)
        self._edge = Alarm(core.env, self._at_edge, urgent=True)

    def start(self) -> None:
        """Before the run: note the depths at warmup, before anything else happens then; the first window edge."""
        if self._warmup > 0:
            Timeout(self.core.env, self._warmup).callbacks.append(self._at_warmup_cb)
        self._edge.set(self._warmup)

    def _queued(self, q: int, depth: int, now: float) -> None:
        """Queue ``q`` grew to ``depth`` at ``now``: close the last instant it grew at, open this one."""
        if now != self._pend_t[q]:
            self._close_instant(q)
            self._pend_t[q] = now
        self._pend_n[q] = depth
        self._total += depth - self._lane_len[q]
        self._lane_len[q] = depth
        if now != self._tot_t:
            if self._tot_t >= self._warmup:
                self.windows.depth(self._tot_n)
            self._tot_t = now
        self._tot_n = self._total

    def _close_instant(self, q: int) -> None:
        t, n = self._pend_t[q], self._pend_n[q]
        if t >= self._warmup:
            peaks = self._peaks[q]
            if not peaks or n > peaks[-1][1]:
                peaks.append((t, n))

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt started: its wait (measured jobs), the queue's depth, the slot's start."""
        e = self._enq[job]
        if e >= self._warmup:
            self._wbuf[self._types[job]].append(now - e)
        elif now >= self._warmup:
            self.windows.longest(now - e)
        n = len(self._heaps[q])
        if n != self._lane_len[q]:  # it came from the waiting line
            self._total -= self._lane_len[q] - n
            self._lane_len[q] = n
            if now == self._tot_t:
                self._tot_n = self._total
        if now == self._pend_t[q]:  # taken from the queue in the instant it grew
            self._pend_n[q] = n
        self._began[job] = 1
        self._slot_start[slot] = now

    def completed(self, job: int, slot: int, now: float) -> None:
        """The job completed: its latency, the type's count, the slot's busy time."""
        e = self._enq[job]
        warmup = self._warmup
        if e >= warmup:  # then it started after warmup too
            k = self._types[job]
            self._lbuf[k].append(now - e)
            self._done_by_type[k] += 1
            self._busy += now - self._slot_start[slot]
        elif now > warmup:
            s = self._slot_start[slot]
            self._busy += now - (s if s > warmup else warmup)
        self._last_end = now

    def settled(self, job: int, outcome: int, now: float) -> None:
        """Not in a core run: every job completes at the end of its one attempt."""
        raise RuntimeError("a record-less run settles jobs only as they complete (core runs only)")

    def tick(self) -> None:
        """Fold the wait and latency buffers into their histograms (the waits into the open window too)."""
        for k, c in enumerate(self._counts):
            if self._wbuf[k]:
                c.wait.add(self._wbuf[k])
                self.windows.add_waits(self._wbuf[k])
                self._wbuf[k] = array("d")
            if self._lbuf[k]:
                c.latency.add(self._lbuf[k])
                self._lbuf[k] = array("d")

    def _at_warmup_cb(self, _event: Event) -> None:
        self._at_warmup = [len(h) for h in self._heaps]

    # ------------------------------------------------------------------ windows

    def _busy_until(self, t: float) -> float:
        """Busy slot-seconds from warmup to ``t`` (attempts running at ``t`` count up to it)."""
        busy, warmup, start = self._busy, self._warmup, self._slot_start
        core = self.core
        for slot in range(core.n_slots):
            if core.job_on(slot) >= 0:
                busy += max(t - max(start[slot], warmup), 0.0)
        return busy

    def _oldest_age(self, t: float, *, closed: bool) -> float:
        """The age at ``t`` of the oldest job waiting then (enqueued before ``t``, or at it when ``closed``)."""
        p = self._began.find(0, self._first_waiting)
        if p < 0:
            self._first_waiting = len(self._began)
            return 0.0
        self._first_waiting = p
        e = self._enq[p]
        return t - e if (e <= t if closed else e < t) else 0.0

    def _at_edge(self, alarm: Alarm) -> None:
        """A window edge (before anything else of its instant): close the open window, open the next."""
        t = alarm.at
        w = self.windows
        if not w.opened:
            w.open(busy=0.0, done=0, depth=self._total)
        else:
            self.tick()
            if self._warmup <= self._tot_t < t:  # the last instant a queue grew is in the closing window
                w.depth(self._tot_n)
                self._tot_t = -math.inf
            w.close(busy=self._busy_until(t), done=sum(self._done_by_type),
                    oldest_age=self._oldest_age(t, closed=False), depth=self._total)
        self._edge.set(w.edge(w.k + 1))

    def summary(self) -> Summary:
        """The Summary of the run so far (see the module docstring)."""
        core = self.core
        s = core.scenario
        warmup = self._warmup
        self.tick()
        for q in range(len(core.queue_names)):
            self._close_instant(q)
        end = self._last_end if self._last_end > -math.inf else warmup
        # (a run with completions only before warmup has end < warmup: summarize clamps the window to 0)
        busy = self._busy
        # attempts still running when the run stopped count up to the end
        for slot in range(core.n_slots):
            if core.job_on(slot) >= 0:
                busy += max(end - max(self._slot_start[slot], warmup), 0.0)
        times = np.frombuffer(self._enq, dtype=np.float64) if len(self._enq) else np.zeros(0)
        arrived = np.zeros(len(core.type_names), dtype=np.int64)
        for lo in range(0, times.size, FLUSH):  # in chunks: no O(jobs) temporary
            kinds = np.asarray(self._types[lo:lo + FLUSH], dtype=np.int64)
            arrived += np.bincount(kinds[times[lo:lo + FLUSH] >= warmup], minlength=arrived.size)
        by_type = {}
        for k, name in enumerate(core.type_names):
            c = self._counts[k]
            c.arrived, c.completed = int(arrived[k]), self._done_by_type[k]
            by_type[name] = c
        max_depth = {}
        for q, name in enumerate(core.queue_names):
            inside = [n for t, n in self._peaks[q] if t <= end]
            max_depth[name] = max([self._at_warmup[q], *inside])
        return summarize_streams(
            scenario=s.name, source="model", seed=self.seed, warmup=warmup, end=end, busy=busy,
            slot_seconds=core.n_slots * max(end - warmup, 0.0),
            by_type=by_type, queue_of={j.name: j.queue for j in s.jobs}, max_depth=max_depth,
            windows=self._windows(end, busy, times))

    def _windows(self, end: float, busy: float, times: np.ndarray) -> list:  # type: ignore[type-arg]
        """The run's windows, the open one closed at ``end`` (see :mod:`qsim.windows`)."""
        w = self.windows
        n = window_count(self._warmup, end, w.length)
        if n == 0:
            return []
        if self._warmup <= self._tot_t <= end:
            w.depth(self._tot_n)
        edges = self._warmup + np.arange(n + 1, dtype=np.float64) * w.length
        arrivals = np.zeros(n, dtype=np.int64)
        for lo in range(0, times.size, FLUSH):  # in chunks: no O(jobs) temporary
            t = times[lo:lo + FLUSH]
            t = t[(t >= self._warmup) & (t <= end)]
            arrivals += np.bincount(np.searchsorted(edges[1:-1], t, side="right"), minlength=n)
        return w.finish(end=end, busy=busy, done=sum(self._done_by_type),
                        oldest_age=self._oldest_age(end, closed=True), arrivals=arrivals,
                        workers={p.name: ((0.0, p.workers),) for p in self.core.scenario.pools})
