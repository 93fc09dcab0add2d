"""Record-less core runs (``simulate(..., records=False)``): only what the Summary needs.

A core run (no mechanism beyond pools, priorities, policies and the
concurrency limit) with ``records=False`` runs with :class:`StreamRecords`
as its :class:`~qsim.model.hooks.Recorder` (the records-off strategy, chosen
once). It writes no per-job record; instead it

- appends each measured job's wait (at its start) and latency (at its end) to
  a small buffer per job type, folded every :data:`FLUSH` settled jobs into a
  :class:`~qsim.results.summary.StreamStat` (log-spaced histogram bins, exact count,
  mean and max), so the buffers stay bounded;
- counts completions per type and adds up busy slot-seconds (each slot keeps
  the start of its running attempt);
- tracks each queue's ``max_depth`` as :func:`~qsim.results.summary.summarize` defines
  it: the depth after each instant at which the queue grew (a pop at the same
  instant updates it), from ``warmup`` on, plus the depth at ``warmup``; the
  running maxima keep their time so that those after the last completion can
  be dropped at the end;
- gathers the Summary's ``windows`` (:mod:`qsim.results.windows`) in a
  :class:`~qsim.model.windowstream.WindowSeries`: an urgent alarm at each
  window edge reads the busy slot-seconds, completions and total depth so far
  and the oldest waiting job (the head of each waiting line: lines are FIFO
  within a priority and a core run never puts a job back, so a line of one
  priority has its oldest job at its head; a line mixing priorities is searched
  for its least sequence number); the depth after each instant a line grew is
  the waiting lines' total then (one line: its own instants, at no cost; several:
  a strategy chosen at start adds the total); each edge hands the waits buffered
  since the last one to the open window. About 4% of a record-less run's CPU
  time (10^6 M/M/10 jobs, 60 s windows).

What stays O(jobs): the drawn jobs (arrival time, type, first service time:
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
from operator import itemgetter
from collections.abc import Callable

import numpy as np
from simpy.events import Event, Timeout

from qsim.model.core import ModelCore
from qsim.model.lanes import Lanes
from qsim.model.schedule import Alarm
from qsim.model.windowstream import WindowSeries
from qsim.results.summary import StreamCounts, Summary, summarize_streams
from qsim.results.windows import window_count

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
        # the windows: the series, the open window's most jobs waiting so far; with several lines, the
        # last instant one grew and their total depth after it (with one line, its own instants say it)
        self.windows = WindowSeries(warmup=self._warmup, length=core.scenario.window_length)
        self._edge = Alarm(core.env, self._at_edge, urgent=True)
        self._win_depth = 0
        self._win_from = [0] * nt  # per type: where the open window's waits start in its buffer
        self._tot_t = -math.inf
        self._tot_n = 0
        self._one_lane = len(self._heaps) == 1
        if not self._one_lane:  # strategies chosen once: a single line pays nothing for the total
            self.queued = self._queued_lanes
            self.started = self._started_lanes  # type: ignore[method-assign]
        lane_of = Lanes.of(core.scenario).of_type  # a line mixing priorities: its oldest job is not its head
        self._mixed = [len({j.priority for k, j in enumerate(core.scenario.jobs) if lane_of[k] == q}) > 1
                       for q in range(len(self._heaps))]

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

    def _queued_lanes(self, q: int, depth: int, now: float) -> None:
        """:meth:`_queued` with several lines: their total depth after each instant too (the windows')."""
        self._queued(q, depth, now)
        if now != self._tot_t:
            if self._tot_t >= self._warmup and self._tot_n > self._win_depth:
                self._win_depth = self._tot_n
            self._tot_t = now
        self._tot_n = self._depth()

    def _close_instant(self, q: int) -> None:
        t, n = self._pend_t[q], self._pend_n[q]
        if t >= self._warmup:
            peaks = self._peaks[q]
            if not peaks or n > peaks[-1][1]:
                peaks.append((t, n))
            if self._one_lane and n > self._win_depth:  # one line: its depth is the windows' too
                self._win_depth = n

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt started: its wait (measured jobs), the queue's depth, the slot's start."""
        e = self._enq[job]
        if e >= self._warmup:
            self._wbuf[self._types[job]].append(now - e)
        elif now >= self._warmup:
            self.windows.longest(now - e)
        if now == self._pend_t[q]:  # taken from the queue in the instant it grew
            self._pend_n[q] = len(self._heaps[q])
        self._slot_start[slot] = now

    def _started_lanes(self, job: int, q: int, slot: int, now: float) -> None:
        """:meth:`started` with several lines: a start in the instant one grew lowers their total after it."""
        self.__class__.started(self, job, q, slot, now)
        if now == self._tot_t:
            self._tot_n = self._depth()

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
        """Fold the wait and latency buffers into their histograms (the waits of the open window into it too)."""
        self._window_waits()
        for k, c in enumerate(self._counts):
            if self._wbuf[k]:
                c.wait.add(self._wbuf[k])
                self._wbuf[k] = array("d")
                self._win_from[k] = 0
            if self._lbuf[k]:
                c.latency.add(self._lbuf[k])
                self._lbuf[k] = array("d")

    def _at_warmup_cb(self, _event: Event) -> None:
        self._at_warmup = [len(h) for h in self._heaps]

    # ------------------------------------------------------------------ windows

    def _window_waits(self) -> None:
        """Hand the waits buffered since the last edge or fold to the open window."""
        for k, buf in enumerate(self._wbuf):
            if len(buf) > self._win_from[k]:
                # a slice of an array is a copy: no view of the live buffer outlives this call (a view kept
                # anywhere, e.g. in a frame a sampling profiler holds, would make the next append fail)
                self.windows.add_waits(buf[self._win_from[k]:])
                self._win_from[k] = len(buf)

    def _busy_until(self, t: float) -> float:
        """Busy slot-seconds from warmup to ``t`` (attempts running at ``t`` count up to it)."""
        busy, warmup, start = self._busy, self._warmup, self._slot_start
        core = self.core
        for slot in range(core.n_slots):
            if core.job_on(slot) >= 0:
                busy += max(t - max(start[slot], warmup), 0.0)
        return busy

    def _depth(self) -> int:
        """Jobs in every waiting line now."""
        return sum(map(len, self._heaps))

    def _oldest_age(self, t: float, *, closed: bool) -> float:
        """The age at ``t`` of the oldest job waiting then (enqueued before ``t``, or at it when ``closed``)."""
        first = math.inf
        for q, heap in enumerate(self._heaps):
            if heap:  # (key, sequence, job): the oldest of a line of one priority is its head
                entry = min(heap, key=itemgetter(1)) if self._mixed[q] else heap[0]
                first = min(first, self._enq[entry[2]])
        return t - first if (first <= t if closed else first < t) else 0.0

    def _at_edge(self, alarm: Alarm) -> None:
        """A window edge (before anything else of its instant): close the open window, open the next."""
        t = alarm.at
        w = self.windows
        if not w.opened:
            w.open(busy=0.0, done=0, depth=self._depth())
        else:
            self._window_waits()
            self._close_window_instants(t)
            w.depth(self._win_depth)
            w.close(busy=self._busy_until(t), done=sum(self._done_by_type),
                    oldest_age=self._oldest_age(t, closed=False), depth=self._depth())
        self._win_depth = 0
        self._edge.set(w.edge(w.k + 1))

    def _close_window_instants(self, t: float) -> None:
        """The last instant a line grew, if it is before ``t``, counts in the closing window (and is done)."""
        if self._one_lane:
            if self._warmup <= self._pend_t[0] < t:
                self._close_instant(0)
                self._pend_t[0] = -math.inf  # (no start of that instant can come after t)
        elif self._warmup <= self._tot_t < t:
            self._win_depth = max(self._win_depth, self._tot_n)
            self._tot_t = -math.inf

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
        """The run's windows, the open one closed at ``end`` (see :mod:`qsim.results.windows`)."""
        w = self.windows
        n = window_count(self._warmup, end, w.length)
        if n == 0:
            return []
        if not self._one_lane and self._warmup <= self._tot_t <= end:
            self._win_depth = max(self._win_depth, self._tot_n)
        w.depth(self._win_depth)
        edges = self._warmup + np.arange(n + 1, dtype=np.float64) * w.length
        arrivals = np.zeros(n, dtype=np.int64)
        for lo in range(0, times.size, FLUSH):  # in chunks: no O(jobs) temporary
            t = times[lo:lo + FLUSH]
            t = t[(t >= self._warmup) & (t <= end)]
            arrivals += np.bincount(np.searchsorted(edges[1:-1], t, side="right"), minlength=n)
        return w.finish(end=end, busy=busy, done=sum(self._done_by_type),
                        oldest_age=self._oldest_age(end, closed=True), arrivals=arrivals,
                        workers={p.name: ((0.0, p.workers),) for p in self.core.scenario.pools})
