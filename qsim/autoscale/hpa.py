"""The Kubernetes HorizontalPodAutoscaler on one external metric, with KEDA's scaling to and from zero.

The algorithm of ``pkg/controller/podautoscaler`` (autoscaling/v2, with
``behavior``), one decision per poll, in this order:

1. **Bounds first.** Replicas above ``max`` go to ``max``, below ``min`` to
   ``min``, before any metric is read.
2. **Proposal** (:func:`proposal`). For an ``AverageValue`` target (a queue's
   length, a recommended worker count: a total shared by the replicas) the
   usage ratio is ``value / (target x current)`` and, outside the tolerance,
   the proposal is ``ceil(value / target)``; for a ``Value`` target (a latency:
   the same whatever the replicas) the ratio is ``value / target`` and the
   proposal ``ceil(ratio x ready)``. Both are ``ceil(current x per-replica
   value / target)``. Within the tolerance (``|1 - ratio| <= 0.1`` by
   default) the proposal is ``current``.
3. **Stabilisation** (:class:`Stabilizer`). Every proposal is kept with its
   time. The result is ``current`` raised to the *lowest* proposal of the
   scale-up window and lowered to the *highest* proposal of the scale-down
   window (proposals made strictly within the window, the new one included):
   with a 300 s scale-down window the replicas never drop below what any
   proposal of the last 300 s asked for. The first poll counts the replicas
   it finds as a proposal (as the HPA does when it first sees its target), so
   a fresh controller does not scale down before one window has passed.
4. **Rate limits** (:func:`scale_up_limit`, :func:`scale_down_limit`). Each
   scaling policy (``pods`` or ``percent`` per ``period``) allows a change from
   the replica count at the start of its period (``current`` minus what was
   added plus what was removed in the last ``period`` s); ``select = "max"``
   takes the policy allowing the most change, ``"min"`` the least,
   ``"disabled"`` none. Percent rounds up when scaling up and down when
   scaling down (in whole numbers: no float artefacts). Then ``min``/``max``.
5. A change is remembered as a scale event (for the rate limits).

Defaults are Kubernetes': scale up by at most ``max(4 pods, 100%)`` per 15 s
with no stabilisation; scale down by up to 100% per 15 s after a 300 s
stabilisation window; tolerance 0.1.

**KEDA** (``min = 0``): KEDA itself scales 0 -> 1 when the metric is above the
activation threshold (``value > activation``) and 1 -> 0 once it has not been
above it for ``cooldown`` seconds (strictly more); between, the HPA works with
``min = 1``. The cooldown counts from the controller's first poll when the
metric was never active.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from qsim.autoscale.observe import Observation
from qsim import scenario_autoscale as spec
from qsim.scenario_autoscale import HPA_METRICS, METRIC_TYPES, SCALE_POLICY_TYPES, SELECTS, ScalePolicySpec, \
    default_metric_type

__all__ = ["ScalingRules", "HPA", "proposal", "scale_up_limit", "scale_down_limit",
           "Stabilizer", "ScaleEvents", "DEFAULT_SCALE_UP", "DEFAULT_SCALE_DOWN", "DEFAULT_TOLERANCE",
           "METRIC_TYPES", "SELECTS", "POLICY_TYPES", "HPA_METRICS", "default_metric_type", "Recommend"]

POLICY_TYPES = SCALE_POLICY_TYPES
DEFAULT_TOLERANCE = 0.1
#: A recommendation made from an observation: a worker count, or None when none can be made.
Recommend = Callable[[Observation], "int | None"]
_EPS = 1e-9  # a product within this of a whole number is that number (ceil(1.1 * 10) is 11)


@dataclass(frozen=True, kw_only=True)
class ScalingRules:
    """One direction's behaviour: its policies, how they combine, its stabilisation window (s)."""

    policies: tuple[ScalePolicySpec, ...]
    select: str = "max"
    stabilization: float = 0.0

    def __post_init__(self) -> None:
        if self.select not in SELECTS:
            raise ValueError(f"select must be one of {', '.join(SELECTS)}, got {self.select!r}")
        if not self.policies and self.select != "disabled":
            raise ValueError("policies must not be empty (use select = 'disabled' to forbid scaling)")
        for p in self.policies:
            if p.type not in POLICY_TYPES or p.value < 1 or not p.period > 0:
                raise ValueError(f"a scaling policy is pods or percent, value >= 1, period > 0; got {p}")

    @property
    def longest_period(self) -> float:
        return max((p.period for p in self.policies), default=0.0)


DEFAULT_SCALE_UP = ScalingRules(policies=spec.DEFAULT_SCALE_UP, select="max", stabilization=0.0)
DEFAULT_SCALE_DOWN = ScalingRules(policies=spec.DEFAULT_SCALE_DOWN, select="max", stabilization=300.0)


def _ceil(x: float) -> int:
    return math.ceil(x - _EPS * max(1.0, abs(x)))


def proposal(current: int, ready: int, value: float, target: float, *, metric_type: str = "AverageValue",
             tolerance: float = DEFAULT_TOLERANCE) -> int:
    """The replica count the metric asks for, before stabilisation and limits (see the module docstring)."""
    if metric_type == "AverageValue":
        ratio = value / (target * current) if current > 0 else math.inf
        return current if abs(1.0 - ratio) <= tolerance else _ceil(value / target)
    ratio = value / target
    return current if abs(1.0 - ratio) <= tolerance else _ceil(ratio * ready)


class Stabilizer:
    """The recent proposals and the stabilised recommendation (step 3 of the module docstring)."""

    def __init__(self, up_window: float, down_window: float) -> None:
        self.up_window, self.down_window = up_window, down_window
        self.history: deque[tuple[float, int]] = deque()
        self.seeded = False

    def __call__(self, now: float, current: int, desired: int) -> int:
        if not self.seeded:  # the HPA's first sight of its target counts as a proposal of its replicas
            self.seeded = True
            self.history.append((now, current))
        keep = max(self.up_window, self.down_window)
        while self.history and self.history[0][0] <= now - keep:
            self.history.popleft()
        up = down = desired
        for t, r in self.history:
            if t > now - self.up_window:
                up = min(up, r)
            if t > now - self.down_window:
                down = max(down, r)
        self.history.append((now, desired))
        return min(max(current, up), down)


@dataclass
class ScaleEvents:
    """Replicas added and removed, with their times (step 5), for the rate limits."""

    up: deque[tuple[float, int]] = field(default_factory=deque)
    down: deque[tuple[float, int]] = field(default_factory=deque)

    def changed(self, now: float, before: int, after: int, keep: float) -> None:
        """Remember a change from ``before`` to ``after`` replicas; forget changes older than ``keep`` s."""
        for q in (self.up, self.down):
            while q and q[0][0] <= now - keep:
                q.popleft()
        if after > before:
            self.up.append((now, after - before))
        elif after < before:
            self.down.append((now, before - after))

    @staticmethod
    def within(events: deque[tuple[float, int]], now: float, period: float) -> int:
        """Replicas changed strictly within the last ``period`` seconds."""
        return sum(c for t, c in events if t > now - period)

    def period_start(self, now: float, current: int, period: float) -> int:
        """The replica count at the start of the last ``period`` seconds."""
        return current - self.within(self.up, now, period) + self.within(self.down, now, period)


def scale_up_limit(now: float, current: int, events: ScaleEvents, rules: ScalingRules) -> int:
    """The most replicas the scale-up policies allow now."""
    if rules.select == "disabled":
        return current
    allowed: list[int] = []
    for p in rules.policies:
        start = events.period_start(now, current, p.period)
        allowed.append(start + p.value if p.type == "pods" else -(-start * (100 + p.value) // 100))
    return max(allowed) if rules.select == "max" else min(allowed)


def scale_down_limit(now: float, current: int, events: ScaleEvents, rules: ScalingRules) -> int:
    """The fewest replicas the scale-down policies allow now."""
    if rules.select == "disabled":
        return current
    allowed: list[int] = []
    for p in rules.policies:
        start = events.period_start(now, current, p.period)
        allowed.append(start - p.value if p.type == "pods" else start * max(0, 100 - p.value) // 100)
    return min(allowed) if rules.select == "max" else max(allowed)


class HPA:
    """One HPA (and, with ``min = 0``, KEDA's activation) on one metric; :meth:`decide` per poll.

    Args:
        min, max: replica bounds (``min = 0``: KEDA scales to and from zero).
        target: the metric's target (per replica for ``AverageValue``).
        metric: which :class:`~qsim.autoscale.observe.Observation` metric to read.
        metric_type: ``AverageValue`` or ``Value`` (default: :func:`default_metric_type`).
        tolerance: no change while ``|1 - ratio|`` is at most this.
        scale_up, scale_down: the behaviour of each direction.
        activation, cooldown: KEDA's activation threshold and cooldown period (used with ``min = 0``).
        recommend: for ``metric = "recommended_workers"``: the recommendation at a poll (None: none can
            be made now; the replicas stay, as the HPA does when it cannot read its metric).
    """

    def __init__(self, *, min: int, max: int, target: float, metric: str = "list_length",
                 metric_type: str | None = None, tolerance: float = DEFAULT_TOLERANCE,
                 scale_up: ScalingRules = DEFAULT_SCALE_UP, scale_down: ScalingRules = DEFAULT_SCALE_DOWN,
                 activation: float = 0.0, cooldown: float = 300.0, recommend: Recommend | None = None) -> None:
        if not 0 <= min <= max:
            raise ValueError(f"need 0 <= min <= max, got min={min}, max={max}")
        if not target > 0:
            raise ValueError(f"target must be > 0, got {target!r}")
        if metric not in HPA_METRICS:
            raise ValueError(f"metric must be one of {', '.join(HPA_METRICS)}, got {metric!r}")
        self.min, self.max, self.target, self.metric = min, max, float(target), metric
        self.metric_type = metric_type or default_metric_type(metric)
        if self.metric_type not in METRIC_TYPES:
            raise ValueError(f"metric_type must be AverageValue or Value, got {self.metric_type!r}")
        self.tolerance = tolerance
        self.scale_up, self.scale_down = scale_up, scale_down
        self.activation, self.cooldown = activation, cooldown
        self.stabilize = Stabilizer(scale_up.stabilization, scale_down.stabilization)
        self.events = ScaleEvents()
        self.last_active: float | None = None
        if metric == "recommended_workers" and recommend is None:
            raise ValueError("metric recommended_workers needs a recommend function")
        self.recommend = recommend
        self.needs = _NEEDS.get(metric, frozenset({metric}))

    def read(self, obs: Observation) -> float | None:
        """The metric's value in ``obs`` (None: it cannot be read now)."""
        if self.metric == "list_length":
            return float(obs.list_length)
        if self.metric == "oldest_age":
            return obs.oldest_age
        if self.metric == "p95_wait":
            return obs.p95_wait if obs.p95_wait is not None else 0.0  # nothing started: no wait seen
        assert self.recommend is not None
        n = self.recommend(obs)
        return None if n is None else float(n)

    def decide(self, obs: Observation) -> int:
        """The replica count after this poll."""
        value = self.read(obs)
        return obs.workers if value is None else self.step(obs.now, obs.workers, obs.ready, value)

    def step(self, now: float, current: int, ready: int, value: float) -> int:
        """One poll with the metric at ``value`` (see the module docstring)."""
        if self.min == 0:
            active = value > self.activation
            if active or self.last_active is None:  # the first poll starts the cooldown's clock
                self.last_active = now
            if current == 0:
                return 1 if active and self.max > 0 else 0
            if not active and now - self.last_active > self.cooldown:
                return 0
        low = max(self.min, 1) if self.min == 0 else self.min
        if current > self.max:
            desired = self.max
        elif current < low:
            desired = low
        else:
            desired = self.stabilize(now, current, proposal(current, ready, value, self.target,
                                                            metric_type=self.metric_type, tolerance=self.tolerance))
            desired = self._limit(now, current, desired, low)
        keep = max(self.scale_up.longest_period, self.scale_down.longest_period)
        self.events.changed(now, current, desired, keep)
        return desired

    def _limit(self, now: float, current: int, desired: int, low: int) -> int:
        if desired > current:
            top = min(self.max, max(scale_up_limit(now, current, self.events, self.scale_up), current))
            return min(desired, top)
        if desired < current:
            bottom = max(low, min(scale_down_limit(now, current, self.events, self.scale_down), current))
            return max(desired, bottom)
        return desired


_NEEDS = {"recommended_workers": frozenset({"arrival_rate", "service"})}
