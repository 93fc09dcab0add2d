"""Arrivals: every job of a run is drawn before it starts, then fed in on time.

Randomness comes in independent streams, one per (job type, purpose), keyed by
the job type's *name* (not its position), so adding, removing or reordering a
job type never changes the draws of the others::

    rng = stream(seed, "cut", "arrival")   # numpy Generator, the same for the same seed

:func:`draw_jobs` draws each type's arrival times in ``[0, duration)`` from its
``"arrival"`` stream and, in one vectorised call, the service time of each of
its jobs' first attempts from its ``"service"`` stream (the k-th job of a type
always gets the k-th sample). The types are merged in time order (ties: the
type listed first), and ``max_jobs`` keeps the earliest ``max_jobs``.

Tests and notebooks can call :func:`draw_jobs` to get exactly the samples a run
uses (e.g. to feed an independent reference). Later mechanisms take their own
purposes from :data:`PURPOSES` (append, never reorder).
"""

from __future__ import annotations

import math
import zlib
from array import array
from collections.abc import Callable, MutableSequence
from heapq import heappush
from dataclasses import dataclass

import numpy as np
import simpy
from simpy.events import NORMAL

from qsim.scenario import Scenario

__all__ = ["PURPOSES", "JobDraws", "stream", "draw_jobs", "ArrivalFeed", "rearm"]

#: Stream purposes; a stream is keyed by (job type name, purpose index).
PURPOSES = ("arrival", "service", "failure", "backoff", "retry_service")


def stream(seed: int, job_name: str, purpose: str) -> np.random.Generator:
    """The random stream of one job type for one purpose (see :data:`PURPOSES`)."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {PURPOSES}, got {purpose!r}")
    key = (zlib.crc32(job_name.encode("utf-8")), PURPOSES.index(purpose))
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=key))


@dataclass(frozen=True)
class JobDraws:
    """The jobs of one run, in arrival order (parallel arrays)."""

    time: np.ndarray  # float64, sorted arrival times in [0, duration)
    type: np.ndarray  # int64, index into scenario.jobs
    service: np.ndarray  # float64, service time of the first attempt

    def __len__(self) -> int:
        return int(self.time.size)


def draw_jobs(scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None) -> JobDraws:
    """Draw every job of a run: arrival times, types and first-attempt service times."""
    seed = scenario.seed if seed is None else seed
    if max_jobs is not None and max_jobs < 0:
        raise ValueError(f"max_jobs must be >= 0, got {max_jobs}")
    times, types, services = [], [], []
    for k, job in enumerate(scenario.jobs):
        if job.arrival is None:
            continue
        t = np.asarray(job.arrival.times(stream(seed, job.name, "arrival"), scenario.duration), dtype=float)
        times.append(t)
        types.append(np.full(t.size, k, dtype=np.int64))
        services.append(np.asarray(job.service.sample(stream(seed, job.name, "service"), t.size), dtype=float))
    if not times:
        empty = np.zeros(0)
        return JobDraws(empty, np.zeros(0, dtype=np.int64), empty)
    if len(times) == 1 and bool(np.all(times[0][1:] >= times[0][:-1])):  # one type, in order: no merge
        end = None if max_jobs is None else max_jobs
        return JobDraws(time=times[0][:end], type=types[0][:end], service=services[0][:end])
    t, kinds, s = np.concatenate(times), np.concatenate(types), np.concatenate(services)
    order = np.lexsort((kinds, t))  # by time, then by type index; stable within a type
    if max_jobs is not None:
        order = order[:max_jobs]
    return JobDraws(time=t[order], type=kinds[order], service=s[order])


def exact_delay(now: float, at: float) -> float:
    """A delay ``d >= 0`` with ``now + d == at`` in floating point, or else ``== nextafter(at)``.

    ``at - now`` is off by at most half an ulp of the difference, so a few
    one-ulp nudges find ``at`` when it can be reached; when rounding ties skip
    it (ties-to-even), the sum lands on the next float above (one ulp later).
    Each loop runs at most a few times.
    """
    d = at - now
    for _ in range(4):
        total = now + d
        if total == at:
            return d
        d = math.nextafter(d, math.inf if total < at else -math.inf)
    d = at - now
    while now + d < at:
        d = math.nextafter(d, math.inf)
    return max(d, 0.0)


class ArrivalFeed:
    """Feeds drawn arrivals into the simulation, one timeout event per distinct time.

    At time ``times[i]`` the feed calls ``on_arrival(i)``; jobs arriving at the
    same instant (a burst, added in bulk) go together to ``on_batch([i, ...])``,
    so they are all queued before any of them starts and the best priority
    runs first. If floating point cannot reach a drawn time from the previous
    event, the arrival fires one ulp later and ``arrived[i]`` (the jobs'
    ``enqueued`` column) is set to the actual time, so that ``enqueued <=
    started`` always holds.
    """

    def __init__(self, env: simpy.Environment, times: np.ndarray, *, on_arrival: Callable[[int], None],
                 on_batch: Callable[[list[int]], None], arrived: MutableSequence[float]) -> None:
        self.env = env
        # an array("d") is used as is (it may be ``arrived`` itself: a time is only rewritten once read)
        self.times = times if isinstance(times, array) else array("d", np.asarray(times, dtype=np.float64).tobytes())
        self.on_arrival = on_arrival
        self.on_batch = on_batch
        self.arrived = arrived
        self.next = 0

    def start(self) -> None:
        """Schedule the first arrival (nothing when there are no jobs)."""
        if self.times:
            self._schedule(self.times[0])

    def _schedule(self, at: float) -> None:
        now = self.env.now
        d = at - now
        if now + d != at:
            d = exact_delay(now, at)
        simpy.events.Timeout(self.env, d).callbacks.append(self._fire)

    def _fire(self, event: simpy.events.Event) -> None:
        times, i = self.times, self.next
        at = times[i]
        env = self.env
        now = env._now  # == at, or one ulp later (see exact_delay)
        n = len(times)
        j = i + 1
        while j < n and times[j] == at:
            j += 1
        if now != at:
            for k in range(i, j):
                self.arrived[k] = now
        if j == i + 1:
            self.on_arrival(i)
        else:
            self.on_batch(list(range(i, j)))
        self.next = j
        if j < n:  # schedule the next arrival (self._schedule, inlined)
            at = times[j]
            d = at - now
            if now + d != at:
                d = exact_delay(now, at)
            event.callbacks = [self._fire]  # rearm(env, event, d, self._fire), inlined
            heappush(env._queue, (now + d, NORMAL, next(env._eid), event))  # type: ignore[attr-defined]


def rearm(env: simpy.Environment, event: simpy.events.Event, delay: float,
          callback: Callable[[simpy.events.Event], None]) -> None:
    """Schedule a processed event again, ``delay`` from now, with one callback.

    What ``Timeout(env, delay).callbacks.append(callback)`` does (same time,
    same priority, the next event id, hence the same order), without a new
    object: the model's hot paths (the next arrival, a slot's next attempt end)
    reuse their event. It writes SimPy's queue directly (``env._queue``,
    ``env._eid``, as ``Environment.schedule`` does; SimPy 4). Only for an
    event that has been processed (its callbacks ran) and succeeded.
    """
    event.callbacks = [callback]
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), event))  # type: ignore[attr-defined]
