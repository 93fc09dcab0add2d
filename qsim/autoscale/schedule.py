"""Replica floors as KEDA ``cron`` triggers, beside the HPA's reactive trigger (``policy = "schedule"``).

A floor ``{start = "08:00", end = "18:00", replicas = 6}`` is one KEDA cron
trigger (``start: 0 8 * * *``, ``end: 0 18 * * *``, ``desiredReplicas: "6"``),
and it acts as KEDA makes it act:

- **When.** It is active from ``start`` (inclusive) to ``end`` (exclusive) every
  day. KEDA's cron scaler is active when the next ``end`` comes before the next
  ``start`` (both strictly after now): exactly at ``start`` the next start is a
  day away, so the floor applies; exactly at ``end`` it no longer does. An
  ``end`` before ``start`` crosses midnight (``22:00``-``06:00`` holds from
  22:00 to 06:00 the next morning), as it does in KEDA.
- **Clock.** Times of day are read on the scenario's clock: ``t = 0`` is 00:00,
  a day is 86,400 s and repeats. ``timezone`` (an IANA name, ``Etc/UTC`` by
  default) says which zone's local time that clock is; it is written on every
  emitted trigger and read back. Daylight-saving changes are not modelled: every
  simulated day has 24 hours.
- **How much.** The trigger is an ``External`` metric of the HPA KEDA makes, with
  an ``AverageValue`` target of 1 and the value ``desiredReplicas`` while active,
  1 otherwise. The HPA computes each metric's proposal (``ceil(value / 1)``,
  with its tolerance: within 10 % of the current count it keeps the count, as it
  does for every metric) and takes the **largest**; stabilisation windows and
  scaling policies then apply to that largest proposal, so a floor ends as the
  scale-down window and rate allow, not at once. Overlapping floors give their
  largest replica count.
- **Activation** (``min = 0``): an active floor activates the ScaledObject, as
  any active trigger does; KEDA scales 0 -> 1 and the HPA takes it on from there.

The reactive trigger is the ``hpa`` policy's (``metric``, ``target`` and every
behaviour key). Without a ``target`` the floors are the only triggers.

:class:`Floors` is the floors' timetable in seconds (also what
:mod:`qsim.autoscale.predictive` derives from a rate profile);
:class:`Scheduled` is the HPA with the floors as its extra triggers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from qsim.autoscale.hpa import HPA, Recommend, hpa_arguments, proposal
from qsim.autoscale.observe import Observation
from qsim.spec.autoscaler import FloorSpec, PredictiveSpec, ScheduleSpec, clock_minutes

__all__ = ["Floors", "Scheduled", "DAY", "CRON_TARGET", "INACTIVE_VALUE"]

#: Seconds of one day of the scenario's clock.
DAY = 86400.0
#: The AverageValue target of a KEDA cron trigger's metric.
CRON_TARGET = 1.0
#: The value a KEDA cron trigger reports while inactive.
INACTIVE_VALUE = 1.0


class Floors:
    """A timetable of replica floors: windows ``[start, end)`` in seconds, repeating every ``period`` s.

    Within a period a window with ``end < start`` wraps around (from ``start`` to
    the period's end, then from 0 to ``end``). Without a period the windows hold
    once (``end`` may be ``inf``).

    Raises:
        ValueError: a window outside ``[0, period]``, an empty one, or ``replicas < 0``.
    """

    def __init__(self, windows: Sequence[tuple[float, float, int]], period: float | None = None) -> None:
        if period is not None and not (math.isfinite(period) and period > 0):
            raise ValueError(f"period must be > 0, got {period!r}")
        for start, end, n in windows:
            if period is not None and not (0 <= start < period and 0 <= end <= period):
                raise ValueError(f"a window must lie within [0, {period:g}], got [{start:g}, {end:g})")
            if start == end or (period is None and end < start) or n < 0:
                raise ValueError(f"a window needs start != end and replicas >= 0, got ({start:g}, {end:g}, {n})")
        self.windows = tuple((float(s), float(e), int(n)) for s, e, n in windows)
        self.period = period

    @classmethod
    def daily(cls, floors: Sequence[FloorSpec]) -> Floors:
        """The timetable of a schedule policy's ``floors`` (times of day, one day the period)."""
        return cls([(clock_minutes(f.start) * 60.0, clock_minutes(f.end) * 60.0, f.replicas) for f in floors],
                   period=DAY)

    def active(self, t: float) -> list[int]:
        """The replicas of every window active at ``t``."""
        x = t % self.period if self.period is not None else t
        out = []
        for start, end, n in self.windows:
            if (start <= x < end) if start < end else (x >= start or x < end):
                out.append(n)
        return out

    def at(self, t: float) -> int | None:
        """The largest floor active at ``t`` (None: none is)."""
        active = self.active(t)
        return max(active) if active else None

    def __repr__(self) -> str:
        return f"Floors({list(self.windows)!r}, period={self.period!r})"


class Scheduled(HPA):
    """The HPA with replica floors as extra triggers (see the module docstring); :meth:`decide` per poll.

    Args:
        floors: the timetable.
        reactive: whether the HPA's own metric is a trigger (False: the floors only).
        **hpa: the :class:`~qsim.autoscale.hpa.HPA`'s arguments (its metric's are unused when not reactive).
    """

    def __init__(self, *, floors: Floors, reactive: bool = True, **hpa: Any) -> None:
        super().__init__(**hpa)
        self.floors, self.reactive = floors, reactive
        if not reactive:
            self.needs = frozenset()
            self.reads_metric = False

    @classmethod
    def from_floor_spec(cls, p: ScheduleSpec | PredictiveSpec, *, min: int, max: int, recommend: Recommend | None = None,
                  poll: float | None = None, floors: Floors | None = None) -> Scheduled:
        """The law for one ``[[autoscalers]]`` table (see :meth:`HPA.from_spec`); ``floors``: the timetable
        (default: a schedule's ``floors`` parameter, times of day; a predictive policy's are derived)."""
        reactive = p.target is not None  # else the floors only: the HPA's metric is a placeholder never read
        if floors is None:
            if not isinstance(p, ScheduleSpec):
                raise ValueError("a predictive policy's floors are derived from the scenario: pass floors")
            floors = Floors.daily(p.floors)
        return cls(floors=floors, reactive=reactive,
                   **hpa_arguments(p, min=min, max=max, poll=poll, placeholder=not reactive,
                                   recommend=recommend if reactive and p.metric == "recommended_workers" else None))

    def reading(self, obs: Observation) -> float:
        """The reactive metric's value (NaN: none, or it cannot be read now: the floors still decide)."""
        value = self.read(obs) if self.reactive else None
        return math.nan if value is None else value

    def unread(self, now: float, current: int, ready: int) -> int:
        """The reactive metric's read failed: the floors still decide (as with a metric that cannot be read)."""
        return self.step(now, current, ready, math.nan, keda=False)

    def propose(self, now: float, current: int, ready: int, value: float) -> int:
        """The largest of the reactive metric's proposal and each floor's (an inactive one reports 1)."""
        floor = self.floors.at(now)
        out = proposal(current, ready, float(floor) if floor is not None else INACTIVE_VALUE, CRON_TARGET,
                       metric_type="AverageValue", tolerance=self.tolerance)
        if self.reactive:
            out = max(out, current if math.isnan(value) else super().propose(now, current, ready, value))
        return out

    def active(self, now: float, value: float) -> bool:
        """Active when a floor is, or the reactive metric is above its activation threshold."""
        return self.floors.at(now) is not None or (self.reactive and not math.isnan(value)
                                                   and super().active(now, value))
