"""Every use the model makes of SimPy's internals, in this one module.

Why there are any: the model's event budget (see :mod:`qsim.model.run`) is one
SimPy event per distinct arrival time and one per attempt. Creating a
``Timeout`` object for each costs a fifth of a run, so the arrival feed and
each worker slot reuse one event, an :class:`Alarm`, scheduled again and again
at an absolute time. SimPy has no public call for that: :meth:`Alarm.set`
pushes the event onto the environment's event heap as
``Environment.schedule`` does (``(time, NORMAL, next event id, event)`` into
``env._queue``, ids from ``env._eid``), so an alarm keeps exactly the order a
fresh ``Timeout`` of the same time would have; and it presents itself as an
event that has succeeded (``_ok``, ``_value``), as a ``Timeout`` does.

Written against SimPy 4 (tested with 4.1). A SimPy upgrade that changes these
internals changes this file only; everything else in the model uses SimPy's
public API (``Timeout``, ``Event``, ``env.now``, ``env.process``, ``event.value``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from heapq import heappush

import simpy
from simpy.events import NORMAL, URGENT, Event

__all__ = ["Alarm", "exact_delay"]


class Alarm(Event):
    """A reusable timer event: ``alarm.set(at)`` makes it fire at time ``at`` (absolute).

    When it fires, SimPy calls ``callback(alarm)``; the callback reads the time
    as ``alarm.at`` and its payload as ``alarm.data`` (e.g. a slot number). Set
    it again only after it fired (one pending firing at a time), and add no
    other callbacks. ``set`` is a closure over what it needs (the heap, the id
    counter, a callback list shared by every firing), so scheduling costs one
    call and no allocation beyond the heap entry.

    ``urgent=True``: at a given instant it fires before every other event of
    that instant (SimPy's ``URGENT`` priority), e.g. a window boundary that must
    see the state before anything happening at the boundary.
    """

    def __init__(self, env: simpy.Environment, callback: Callable[[Alarm], None], data: int = 0, *,
                 urgent: bool = False) -> None:
        super().__init__(env)
        self._ok = True  # a succeeded event, as a Timeout is from its creation
        self._value = data
        self.data = data
        self.at = math.nan
        callbacks: list[Callable[[Event], None]] = [callback]  # type: ignore[list-item]  # SimPy passes the Alarm
        heap = env._queue
        eid = env._eid
        alarm = self
        priority = URGENT if urgent else NORMAL

        def set_at(at: float) -> None:
            alarm.at = at
            alarm.callbacks = callbacks  # SimPy takes the list and sets None; it never changes the list
            heappush(heap, (at, priority, next(eid), alarm))

        self.set: Callable[[float], None] = set_at


def exact_delay(now: float, at: float) -> float:
    """A delay ``d >= 0`` with ``now + d == at`` in floating point, or else ``== nextafter(at)``.

    For SimPy's relative delays (``Timeout(env, d)`` fires at ``now + d``):
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
