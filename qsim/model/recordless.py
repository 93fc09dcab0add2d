"""Record-less core runs (``simulate(..., records=False)``): only what the Summary needs.

A core run (no mechanism beyond pools, priorities, policies and the
concurrency limit) with ``records=False`` swaps the three per-job hooks of
:class:`~qsim.model.run.Model` for the ones below. They write no per-job
record; instead they

- append each measured job's wait (at its start) and latency (at its end) to
  a small buffer per job type, folded every :data:`FLUSH` settled jobs into a
  :class:`~qsim.summary.StreamStat` (log-spaced histogram bins, exact count,
  mean and max), so the buffers stay bounded;
- count completions per type and add up busy slot-seconds (each slot keeps
  the start of its running attempt);
- track each queue's ``max_depth`` as :func:`~qsim.summary.summarize` defines
  it: the depth after each instant at which the queue grew (a pop at the same
  instant updates it), from ``warmup`` on, plus the depth at ``warmup``; the
  running maxima keep their time so that those after the last completion can
  be dropped at the end.

What stays O(jobs): the drawn jobs (arrival time, type, first service time:
every job is drawn before the run, so that runs are reproducible and the
engine harness plays the same draws; 24 bytes a job, freed once the model is
built) and the job-table columns dispatch reads (type, queue, priority as
lists, enqueued and service as arrays: about 41 bytes a job, the arrival feed
reads the enqueued column itself). Measured with tracemalloc at 10^6 M/M/c
jobs: about 82 MB at the peak (while the model is built from the draws),
41 MB while it runs, against about 525 MB with records. The record columns
(started, finished, attempts, worker, outcome, ...), the DataFrames and the
time series are never built; the statistics are bounded (a histogram per job
type and statistic, and buffers of at most :data:`FLUSH` values). The waiting
lines hold the jobs waiting, as with records.
"""

from __future__ import annotations

import math
from array import array
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

import numpy as np
from simpy.events import NORMAL, Event

from qsim.summary import StreamCounts, StreamStat, summarize_streams

if TYPE_CHECKING:
    from qsim.model.run import Model

__all__ = ["StreamHooks", "FLUSH"]

#: Settled jobs between two folds of the wait/latency buffers into their histograms.
FLUSH = 1 << 15


class StreamHooks:
    """The record-less core hooks, mixed into :class:`~qsim.model.run.Model`."""

    def _init_stream(self: Model) -> None:
        nt, nq = len(self.type_names), len(self.queue_names)
        self._warmup = float(self.scenario.warmup)
        self._wbuf = [array("d") for _ in range(nt)]
        self._lbuf = [array("d") for _ in range(nt)]
        self._counts = [StreamCounts() for _ in range(nt)]
        self._done_by_type = [0] * nt
        self._slot_start = [0.0] * self.n_slots
        self._busy = 0.0
        self._last_end = -math.inf  # the last completion
        self._pend_t = [-math.inf] * nq  # per queue: the last instant it grew, and its depth after that instant
        self._pend_n = [0] * nq
        self._peaks: list[list[tuple[float, int]]] = [[] for _ in range(nq)]  # running maxima (time, depth)
        self._at_warmup = [0] * nq
        self._enq = self.jobs.enqueued
        self._types = self.jobs.type
        self.enqueue = self._enqueue_stream  # type: ignore[method-assign]
        self.enqueue_batch = self._enqueue_batch_stream  # type: ignore[method-assign]
        self.start_attempt = self._start_stream  # type: ignore[method-assign]
        self.dispatcher.start = self._start_stream
        self.feed.on_arrival, self.feed.on_batch = self._enqueue_stream, self._enqueue_batch_stream

    def _grew(self: Model, q: int, now: float) -> None:
        """Queue ``q`` grew at ``now``: close the last instant it grew at, open this one."""
        if now != self._pend_t[q]:
            self._close_instant(q)
            self._pend_t[q] = now
        self._pend_n[q] = len(self._heaps[q])

    def _close_instant(self: Model, q: int) -> None:
        t, n = self._pend_t[q], self._pend_n[q]
        if t >= self._warmup:
            peaks = self._peaks[q]
            if not peaks or n > peaks[-1][1]:
                peaks.append((t, n))

    def _enqueue_stream(self: Model, job: int) -> None:
        q = self._job_queue[job]
        heap = self._heaps[q]
        pool = self._solo[q]
        if pool is not None and pool.free and not heap and self._open[q]:
            self._start_stream(job, q, pool.free.popleft())
            return
        queues = self.queues
        queues.seq += 1
        heappush(heap, (self._job_priority[job], queues.seq, job))
        now = self.env._now  # self._grew(q, now), inlined
        if now != self._pend_t[q]:
            self._close_instant(q)
            self._pend_t[q] = now
        self._pend_n[q] = len(heap)
        if pool is None:
            self._offer(q)
        elif pool.free:
            self._fill(pool)

    def _enqueue_batch_stream(self: Model, jobs: list[int]) -> None:
        queues, heaps, queue_of, priority_of = self.queues, self._heaps, self._job_queue, self._job_priority
        now = self.env.now
        touched: list[int] = []
        for job in jobs:
            q = queue_of[job]
            queues.seq += 1
            heappush(heaps[q], (priority_of[job], queues.seq, job))
            if q not in touched:
                touched.append(q)
        for q in touched:
            self._grew(q, now)
        for q in touched:
            self._offer(q)

    def _start_stream(self: Model, job: int, q: int, slot: int) -> None:
        now = self.env._now
        e = self._enq[job]
        if e >= self._warmup:
            self._wbuf[self._types[job]].append(now - e)
        if now == self._pend_t[q]:  # taken from the queue in the instant it grew
            self._pend_n[q] = len(self._heaps[q])
        self._active[q] += 1
        if self._gates[q]:
            self.queues.gates_started(q, now)
        self._running[slot] = job
        self._slot_start[slot] = now
        ev = self._slot_events[slot]  # Timeout(env, service, slot), reused (see Model.start_attempt)
        ev.callbacks = [self._ended_stream]
        heappush(self._queue, (now + self._service[job], NORMAL, next(self._eid), ev))

    def _ended_stream(self: Model, event: Event) -> None:
        slot = event._value
        running = self._running
        job = running[slot]
        running[slot] = -1
        now = self.env._now
        q = self._job_queue[job]
        self._active[q] -= 1
        reopened = self.queues.gates_ended(q, now) if self._gates[q] else False
        # settle: completed
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
        self.settled += 1
        if self.settled >= self._next_tick:
            self._stream_tick()
        if self.settled == self.jobs.n and not self.done.triggered:
            self.done.succeed()
        pool = self._pool_of_slot[slot]
        if pool.only >= 0 and not reopened:
            heap = self._heaps[q]
            if heap and self._open[q]:
                self._start_stream(heappop(heap)[2], q, slot)
            else:
                pool.free.append(slot)
                self._idle_since[slot] = now
            return
        pool.free.append(slot)
        self._idle_since[slot] = now
        self._fill(pool)
        if reopened:
            self._offer(q)

    def _stream_tick(self: Model) -> None:
        self._flush()
        if self._progress is not None and self.settled >= self._next_progress:
            self._progress(min(self.settled / max(self.jobs.n, 1), 1.0))
            self._next_progress += self._tick
        self._next_tick = min(self.settled + FLUSH, self._next_progress)

    def _flush(self: Model) -> None:
        for k, c in enumerate(self._counts):
            if self._wbuf[k]:
                c.wait.add(self._wbuf[k])
                self._wbuf[k] = array("d")
            if self._lbuf[k]:
                c.latency.add(self._lbuf[k])
                self._lbuf[k] = array("d")

    def _at_warmup_cb(self: Model, _event: Event) -> None:
        self._at_warmup = [len(h) for h in self._heaps]

    def stream_summary(self: Model) -> dict[str, Any]:
        """The Summary of a record-less core run (see the module docstring)."""
        s = self.scenario
        warmup = self._warmup
        self._flush()
        for q in range(len(self.queue_names)):
            self._close_instant(q)
        end = self._last_end if self._last_end > -math.inf else warmup
        # (a run with completions only before warmup has end < warmup: summarize clamps the window to 0)
        busy = self._busy
        # attempts still running when the run stopped count up to the end
        for slot, job in enumerate(self._running):
            if job >= 0:
                busy += max(end - max(self._slot_start[slot], warmup), 0.0)
        times = np.frombuffer(self._enq, dtype=np.float64) if len(self._enq) else np.zeros(0)
        arrived = np.zeros(len(self.type_names), dtype=np.int64)
        for lo in range(0, times.size, FLUSH):  # in chunks: no O(jobs) temporary
            kinds = np.asarray(self._types[lo:lo + FLUSH], dtype=np.int64)
            arrived += np.bincount(kinds[times[lo:lo + FLUSH] >= warmup], minlength=arrived.size)
        by_type = {}
        for k, name in enumerate(self.type_names):
            c = self._counts[k]
            c.arrived, c.completed = int(arrived[k]), self._done_by_type[k]
            by_type[name] = c
        max_depth = {}
        for q, name in enumerate(self.queue_names):
            inside = [n for t, n in self._peaks[q] if t <= end]
            max_depth[name] = max([self._at_warmup[q], *inside])
        return summarize_streams(
            scenario=s.name, source="model", seed=self.seed, warmup=warmup, end=end, busy=busy,
            slot_seconds=self.n_slots * max(end - warmup, 0.0),
            by_type=by_type, queue_of={j.name: j.queue for j in s.jobs}, max_depth=max_depth)
