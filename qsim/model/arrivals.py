"""The arrival feed: a run's drawn jobs (:mod:`qsim.spec.workload`) fed into the simulation on time.

One event for the whole feed (an :class:`~qsim.model.schedule.Alarm`), set
again for each distinct arrival time.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

import numpy as np
import simpy

from qsim.model.schedule import Alarm, exact_delay

__all__ = ["ArrivalFeed"]


class ArrivalFeed:
    """Feeds drawn arrivals into the simulation, one firing per distinct time.

    At time ``times[i]`` the feed calls ``on_arrival(i, now)``; jobs arriving at
    the same instant (a burst, added in bulk) go together to ``on_batch([i, ...],
    now)``, so they are all queued before any of them starts and the best
    priority runs first. The feed moves from one arrival to the next by a
    relative delay, as a SimPy ``Timeout`` would: if floating point cannot
    reach a drawn time from the previous one, the arrival fires one ulp later
    (:func:`~qsim.model.schedule.exact_delay`) and ``retime(i, now)`` tells the
    run the job's actual arrival time, so that ``enqueued <= started`` always
    holds.
    """

    def __init__(self, env: simpy.Environment, times: np.ndarray | array[float], *,
                 on_arrival: Callable[[int, float], None], on_batch: Callable[[list[int], float], None],
                 retime: Callable[[int, float], None]) -> None:
        # an array("d") is used as is (it may be the job table's column: retime writes a time once it is read)
        self.times = times if isinstance(times, array) else array("d", np.asarray(times, dtype=np.float64).tobytes())
        self.n = len(self.times)
        self.on_arrival = on_arrival
        self.on_batch = on_batch
        self.retime = retime
        self.next = 0  # the first job not yet arrived
        self._alarm = Alarm(env, self._fire)
        self._set = self._alarm.set

    def start(self) -> None:
        """Schedule the first arrival (nothing when there are no jobs); the clock is at 0."""
        if self.n:
            self._set(self.times[0])

    def _fire(self, alarm: Alarm) -> None:
        times, i, n = self.times, self.next, self.n
        at = times[i]
        now = alarm.at  # == at, or one ulp later (see exact_delay)
        j = i + 1
        while j < n and times[j] == at:
            j += 1
        if now != at:
            for k in range(i, j):
                self.retime(k, now)
        if j == i + 1:
            self.on_arrival(i, now)
        else:
            self.on_batch(list(range(i, j)), now)
        self.next = j
        if j < n:  # the next arrival, a relative delay from now (as Timeout(env, at - now) would fire)
            at = times[j]
            t = now + (at - now)
            if t != at:
                t = now + exact_delay(now, at)
            self._set(t)
