"""The Kubernetes HorizontalPodAutoscaler on one external metric, with KEDA's scaling to and from zero.

The algorithm of ``pkg/controller/podautoscaler`` (autoscaling/v2), one
decision per sync period (``sync``, 15 s: kube-controller-manager's
``--horizontal-pod-autoscaler-sync-period``), in this order:

1. **Disabled at zero.** A target with no replica and ``min > 0`` is left
   alone (the HPA's ``ScalingDisabled``); with ``min = 0`` (the
   ``HPAScaleToZero`` gate, ``keda = false``) it is computed as any other.
2. **Bounds.** Replicas above ``max`` go to ``max``, below ``min`` to ``min``,
   before any metric is read.
3. **Proposal** (:func:`proposal`). Values are read in thousandths, as the
   HPA reads quantities (:func:`milli`). For an ``AverageValue`` target (a
   queue's length, a recommended worker count: a total shared by the
   replicas) the usage ratio is ``value / (target x current)`` and, outside
   the tolerance, the proposal is ``ceil(value / target)``; for a ``Value``
   target (a latency: the same whatever the replicas) the ratio is ``value /
   target`` and the proposal ``ceil(ratio x ready)`` (``ceil(ratio)`` from
   zero replicas, where the tolerance does not apply). The tolerance holds
   the count while ``1 - down <= ratio <= 1 + up`` (Kubernetes 1.33: both ends
   included, a ratio of exactly 1.1 holds; ``up``/``down`` are the
   per-direction ``behavior.scale{Up,Down}.tolerance``, else ``tolerance``,
   0.1). The arithmetic is Go's float64, so ``ceil(1.1 x 10)`` is 12.
4. **Normalisation**, which depends on whether the HPA has a ``behavior``:

   *With* ``behavior`` (``behavior = true``, Kubernetes' defaults filled in
   where a part is absent: up by at most ``max(4 pods, 100%)`` per 15 s with
   no stabilisation; down by up to 100% per 15 s after a 300 s window):

   - **Stabilisation** (:class:`Stabilizer`). Every proposal is kept with its
     time. The result is ``current`` raised to the *lowest* proposal of the
     scale-up window and lowered to the *highest* proposal of the scale-down
     window (proposals made strictly within the window, the new one
     included). The first decision counts the replicas it finds as a
     proposal (the HPA's initial recommendation), so a fresh controller does
     not scale down before one window has passed.
   - **Rate limits** (:func:`scale_up_limit`, :func:`scale_down_limit`). Each
     scaling policy (``pods`` or ``percent`` per ``period``) allows a change
     from the replica count at the start of its period (``current`` minus what
     was added plus what was removed strictly within the last ``period`` s);
     ``select = "max"`` takes the policy allowing the most change, ``"min"``
     the least, ``"disabled"`` none. Percent is float arithmetic:
     ``ceil(start x (1 + p/100))`` up, ``trunc(start x (1 - p/100))`` down.
     A limit never reverses the direction; then ``min``/``max``.
   - **Scale events** (:class:`ScaleEvents`). Each change is stored in its
     direction's list; an event older than that direction's longest policy
     period is marked outdated, and the next event of that direction takes
     the place of the last outdated one (the limits of the other direction,
     which may look back further, no longer see it).

   *Without* ``behavior`` (``behavior = false``: an HPA whose ``behavior`` is
   absent, which KEDA creates when a ScaledObject has no
   ``advanced.horizontalPodAutoscalerConfig.behavior``): the proposal is
   raised to the highest proposal of the last 300 s (those exactly 300 s
   old included; the controller's ``--horizontal-pod-autoscaler-downscale-
   stabilization``), then held within ``min`` and ``min(max, max(2 x
   current, 4))``: no scaling policies and no scale events.

**KEDA** (``min = 0`` with ``keda = true``, the default):
:class:`~qsim.autoscale.keda.KedaActivation` moves the target between 0 and
1 at each ``poll`` (``pollingInterval``), and the HPA works with ``min = 1``
in between. :meth:`HPA.decide` runs each part when the observation's time is
on its schedule (multiples of ``sync`` and ``poll``; both parts at every call
when they are not given), KEDA first.

**A series that vanishes** (``metric_from = "workers"``: no ready worker, no
series): the read is 0 or an error, and KEDA's ``fallback`` may stand in for
it (:mod:`qsim.autoscale.nulls`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qsim.autoscale.keda import KedaActivation
from qsim.autoscale.nulls import MetricReads
from qsim.autoscale.observe import Observation
from qsim.spec import autoscaler as spec
from qsim.spec.autoscaler import HPA_METRICS, METRIC_TYPES, SCALE_POLICY_TYPES, SELECTS, ScalePolicySpec, \
    default_metric_type

__all__ = ["ScalingRules", "HPA", "hpa_arguments", "proposal", "scale_up_limit", "scale_down_limit", "milli", "Tolerances",
           "Stabilizer", "ScaleEvents", "ScaleEvent", "DEFAULT_SCALE_UP", "DEFAULT_SCALE_DOWN", "DEFAULT_TOLERANCE",
           "METRIC_TYPES", "SELECTS", "POLICY_TYPES", "HPA_METRICS", "default_metric_type", "Recommend",
           "SCALE_UP_LIMIT_FACTOR", "SCALE_UP_LIMIT_MINIMUM", "DOWNSCALE_STABILIZATION"]

POLICY_TYPES = SCALE_POLICY_TYPES
DEFAULT_TOLERANCE = 0.1
#: Without ``behavior`` a decision raises the count to at most ``max(factor x current, minimum)``.
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
#: Without ``behavior``: seconds of proposals a decision never goes below (``--horizontal-pod-autoscaler-
#: downscale-stabilization``'s default).
DOWNSCALE_STABILIZATION = 300.0
#: A recommendation made from an observation: a worker count, or None when none can be made.
Recommend = Callable[[Observation], "int | None"]


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


@dataclass(frozen=True)
class Tolerances:
    """How far the usage ratio may stray from 1 without a change, down and up."""

    down: float = DEFAULT_TOLERANCE
    up: float = DEFAULT_TOLERANCE

    def within(self, ratio: float) -> bool:
        """Whether ``1 - down <= ratio <= 1 + up`` (False for NaN and infinity)."""
        return (1.0 - self.down) <= ratio <= (1.0 + self.up)


def milli(x: float) -> int:
    """``x`` in thousandths, as a metric's value reaches the HPA (KEDA truncates; noise of the float product aside)."""
    return math.floor(x * 1000 + 1e-6)


def proposal(current: int, ready: int, value: float, target: float, *, metric_type: str = "AverageValue",
             tolerance: float | Tolerances = DEFAULT_TOLERANCE) -> int:
    """The replica count the metric asks for, before stabilisation and limits (step 3 of the module docstring)."""
    tol = tolerance if isinstance(tolerance, Tolerances) else Tolerances(tolerance, tolerance)
    usage, goal = milli(value), max(1, milli(target))
    if metric_type == "AverageValue":
        if current > 0:
            ratio = usage / (goal * current)
        else:
            ratio = math.nan if usage == 0 else math.inf
        return current if tol.within(ratio) else math.ceil(usage / goal)
    ratio = usage / goal
    if current == 0:
        return math.ceil(ratio)
    return current if tol.within(ratio) else math.ceil(ratio * ready)


class Stabilizer:
    """The recent proposals and the stabilised recommendation (step 4 of the module docstring)."""

    def __init__(self, up_window: float, down_window: float) -> None:
        self.up_window, self.down_window = up_window, down_window
        self.history: deque[tuple[float, int]] = deque()
        self.seeded = False

    def seed(self, now: float, current: int) -> None:
        """The HPA's first sight of its target counts as a proposal of its replicas."""
        if not self.seeded:
            self.seeded = True
            self.history.append((now, current))

    def __call__(self, now: float, current: int, desired: int) -> int:
        """With ``behavior``: ``current`` within the lowest recent proposal (up) and the highest (down)."""
        self.seed(now, current)
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

    def highest(self, now: float, desired: int) -> int:
        """Without ``behavior``: the highest proposal of the down window, those exactly its length old included."""
        while self.history and self.history[0][0] < now - self.down_window:
            self.history.popleft()
        top = max([desired, *(r for _, r in self.history)])
        self.history.append((now, desired))
        return top


@dataclass
class ScaleEvent:
    """Replicas added or removed at ``time``; ``outdated``: older than its direction's longest period once."""

    time: float
    change: int
    outdated: bool = False


@dataclass
class ScaleEvents:
    """Replicas added and removed, with their times, for the rate limits (kept as the HPA keeps them)."""

    up: list[ScaleEvent] = field(default_factory=list)
    down: list[ScaleEvent] = field(default_factory=list)

    def changed(self, now: float, before: int, after: int, keep: float) -> None:
        """Remember a change from ``before`` to ``after`` replicas; ``keep``: the longest policy period of its
        direction. Its direction's events older than that are outdated; the last of them makes room for it."""
        if after == before:
            return
        events = self.up if after > before else self.down
        slot = None
        for i, e in enumerate(events):
            if e.time < now - keep:
                e.outdated = True
            if e.outdated:
                slot = i
        new = ScaleEvent(now, abs(after - before))
        if slot is None:
            events.append(new)
        else:
            events[slot] = new

    @staticmethod
    def within(events: list[ScaleEvent], now: float, period: float) -> int:
        """Replicas changed strictly within the last ``period`` seconds."""
        return sum(e.change for e in events if e.time > now - period)

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
        allowed.append(start + p.value if p.type == "pods" else math.ceil(start * (1 + p.value / 100)))
    return max(allowed) if rules.select == "max" else min(allowed)


def scale_down_limit(now: float, current: int, events: ScaleEvents, rules: ScalingRules) -> int:
    """The fewest replicas the scale-down policies allow now."""
    if rules.select == "disabled":
        return current
    allowed: list[int] = []
    for p in rules.policies:
        start = events.period_start(now, current, p.period)
        allowed.append(start - p.value if p.type == "pods" else int(start * (1 - p.value / 100)))
    return min(allowed) if rules.select == "max" else max(allowed)


def _due(now: float, period: float | None) -> bool:
    """Whether ``now`` is a multiple of ``period`` (every time when there is none)."""
    if period is None:
        return True
    k = now / period
    return abs(k - round(k)) < 1e-6


#: An HPA-like policy's typed spec: its behaviour keys are the HPA's.
HpaLike = spec.HpaSpec | spec.QsimSpec | spec.ScheduleSpec | spec.PredictiveSpec


def hpa_arguments(p: HpaLike, *, min: int, max: int, recommend: Recommend | None, poll: float | None,
                  placeholder: bool = False) -> dict[str, Any]:
    """:class:`HPA`'s arguments from an HPA-like policy's typed spec (the qsim policy: an HPA on the advisor's
    count, one per replica; ``placeholder``: a metric never read, for floors without a reactive trigger)."""
    if isinstance(p, spec.QsimSpec):
        target, metric, metric_type = 1.0, "recommended_workers", "AverageValue"
    elif placeholder:
        target, metric, metric_type = 1.0, "list_length", None
    else:
        target, metric, metric_type = p.target if p.target is not None else 1.0, p.metric, p.metric_type
    tol = p.tolerance
    down = tol if p.scale_down_tolerance is None else p.scale_down_tolerance
    up = tol if p.scale_up_tolerance is None else p.scale_up_tolerance
    return dict(min=min, max=max, target=target, metric=metric, metric_type=metric_type, tolerance=Tolerances(down, up),
                scale_up=ScalingRules(policies=p.scale_up, select=p.scale_up_select,
                                      stabilization=p.scale_up_stabilization),
                scale_down=ScalingRules(policies=p.scale_down, select=p.scale_down_select,
                                        stabilization=p.scale_down_stabilization),
                behavior=p.behavior, keda=p.keda, activation=p.activation, cooldown=p.cooldown,
                initial_cooldown=p.initial_cooldown, sync=p.sync, poll=poll, recommend=recommend,
                reads=MetricReads(metric_from=p.metric_from, ignore_null=p.ignore_null,
                                  fallback_replicas=p.fallback_replicas, fallback_failures=p.fallback_failures,
                                  average=metric_type == "AverageValue"))


class HPA:
    """One HPA (and, with ``min = 0``, KEDA's activation) on one metric; :meth:`decide` per call.

    Args:
        min, max: replica bounds (``min = 0``: scale to and from zero, by KEDA unless ``keda`` is False).
        target: the metric's target (per replica for ``AverageValue``).
        metric: which :class:`~qsim.autoscale.observe.Observation` metric to read.
        metric_type: ``AverageValue`` or ``Value`` (default: :func:`default_metric_type`).
        tolerance: no change while the ratio is within ``[1 - tolerance, 1 + tolerance]``; a
            :class:`Tolerances` gives each direction its own.
        scale_up, scale_down: the behaviour of each direction (with ``behavior``).
        behavior: False: an HPA without ``behavior`` (the module docstring's fixed rules).
        keda: with ``min = 0``: True, KEDA scales 0 <-> 1; False, the HPA alone (``minReplicas: 0``).
        activation, cooldown, initial_cooldown: KEDA's (used with ``min = 0`` and ``keda``).
        sync, poll: the HPA's and KEDA's periods (s) for :meth:`decide` (None: each call).
        recommend: for ``metric = "recommended_workers"``: the recommendation at a poll (None: none can
            be made now; the replicas stay, as the HPA does when it cannot read its metric).
        reads: where the metric's series comes from, null reads and KEDA's fallback
            (:class:`~qsim.autoscale.nulls.MetricReads`; default: the queue's, never null).
    """

    def __init__(self, *, min: int, max: int, target: float, metric: str = "list_length",
                 metric_type: str | None = None, tolerance: float | Tolerances = DEFAULT_TOLERANCE,
                 scale_up: ScalingRules = DEFAULT_SCALE_UP, scale_down: ScalingRules = DEFAULT_SCALE_DOWN,
                 behavior: bool = True, keda: bool = True, activation: float = 0.0, cooldown: float = 300.0,
                 initial_cooldown: float = 0.0, sync: float | None = None, poll: float | None = None,
                 recommend: Recommend | None = None, reads: MetricReads | None = None) -> None:
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
        self.tolerance = tolerance if isinstance(tolerance, Tolerances) else Tolerances(tolerance, tolerance)
        self.scale_up, self.scale_down, self.behavior = scale_up, scale_down, behavior
        self.keda = KedaActivation(activation=activation, cooldown=cooldown, initial_cooldown=initial_cooldown,
                                   max=max) if keda and min == 0 else None
        self.low = 1 if self.keda is not None else min  # the HPA's minReplicas
        self.sync, self.poll = sync, poll
        self.stabilize = (Stabilizer(scale_up.stabilization, scale_down.stabilization) if behavior
                          else Stabilizer(0.0, DOWNSCALE_STABILIZATION))
        self.events = ScaleEvents()
        if metric == "recommended_workers" and recommend is None:
            raise ValueError("metric recommended_workers needs a recommend function")
        self.recommend = recommend
        self.needs = _NEEDS.get(metric, frozenset({metric}))
        self.reads = reads if reads is not None else MetricReads(average=self.metric_type == "AverageValue")
        self.reads_metric = True  # a subclass whose only triggers are others says False

    @classmethod
    def from_spec(cls, p: spec.HpaSpec | spec.QsimSpec, *, min: int, max: int, recommend: Recommend | None = None,
                  poll: float | None = None) -> HPA:
        """The law for one ``[[autoscalers]]`` table: ``p`` is its policy's typed spec
        (:attr:`qsim.spec.autoscaler.AutoscalerSpec.law`); a new parameter of the policy is read here
        (:func:`hpa_arguments`)."""
        return cls(**hpa_arguments(p, min=min, max=max, recommend=recommend, poll=poll))

    @property
    def periods(self) -> tuple[float, ...]:
        """The periods (s) :meth:`decide` acts on: the HPA's sync, and KEDA's poll when KEDA scales to zero."""
        polls = self.keda is not None or self.reads.polls
        out = [x for x in (self.sync, self.poll if polls else None) if x is not None]
        return tuple(dict.fromkeys(out))

    def read(self, obs: Observation) -> float | None:
        """The metric's value in ``obs`` (None: it cannot be read now)."""
        if self.metric == "list_length":
            return float(obs.list_length)
        if self.metric == "in_flight":
            return float(obs.in_flight)
        if self.metric == "oldest_age":
            return obs.oldest_age
        if self.metric == "p95_wait":
            return obs.p95_wait if obs.p95_wait is not None else 0.0  # nothing started: no wait seen
        assert self.recommend is not None
        n = self.recommend(obs)
        return None if n is None else float(n)

    def decide(self, obs: Observation) -> int:
        """The replica count after this call: KEDA's check when ``obs.now`` is on its ``poll`` schedule, the
        HPA's when it is on its ``sync`` schedule."""
        keda, hpa = self.keda is not None and _due(obs.now, self.poll), _due(obs.now, self.sync)
        polled = self.reads.polls and _due(obs.now, self.poll)  # KEDA's poll counting failed reads
        if not (keda or hpa or polled):
            return obs.workers
        if self.reads_metric and self.reads.null(obs.ready):
            return self._null(obs, keda=keda, polled=polled, hpa=hpa)
        if keda or polled or (hpa and self._hpa_reads(obs.workers)):
            self.reads.read()
        if not (keda or hpa):
            return obs.workers
        value = self.reading(obs)
        if value is None:
            return obs.workers
        return self.step(obs.now, obs.workers, obs.ready, value, keda=keda, hpa=hpa)

    def _hpa_reads(self, current: int) -> bool:
        """Whether the HPA reads its metric at a sync with ``current`` replicas (not disabled, within bounds)."""
        return not (current == 0 and self.low != 0) and self.low <= current <= self.max

    def _null(self, obs: Observation, *, keda: bool, polled: bool, hpa: bool) -> int:
        """A decision when the series is not there (:mod:`qsim.autoscale.nulls`): 0, or an error."""
        now, current, ready = obs.now, obs.workers, obs.ready
        if self.reads.ignore_null:
            return self.step(now, current, ready, 0.0, keda=keda, hpa=hpa) if (keda or hpa) else current
        if keda or polled:
            per = self.reads.failed(current)
            if keda and self.keda is not None:
                decided = (self.keda.check(now, current, True) if per is not None
                           else self.keda.check(now, current, self.active(now, math.nan), error=self.reads.holds))
                if decided is not None:
                    return decided
        if not hpa:
            return current
        if not self._hpa_reads(current):
            return self.step(now, current, ready, math.nan, keda=False)  # bounds or disabled: no read
        per = self.reads.failed(current)
        if per is not None:
            return self.step(now, current, ready, per * self.target, keda=False)
        return self.unread(now, current, ready)

    def unread(self, now: float, current: int, ready: int) -> int:
        """The HPA's sync when its metric's read failed: no change (its first sight of the target is taken)."""
        self.stabilize.seed(now, current)
        return current

    def reading(self, obs: Observation) -> float | None:
        """The value :meth:`decide` steps with (None: no decision now); a subclass with other triggers
        steps without it."""
        return self.read(obs)

    def propose(self, now: float, current: int, ready: int, value: float) -> int:
        """Step 2: the replica count the metric asks for (a subclass adds other triggers' proposals by max)."""
        return proposal(current, ready, value, self.target, metric_type=self.metric_type, tolerance=self.tolerance)

    def active(self, now: float, value: float) -> bool:
        """KEDA's activation: whether the metric is above the activation threshold (a subclass adds triggers)."""
        return self.keda is not None and value > self.keda.activation

    def step(self, now: float, current: int, ready: int, value: float, *, keda: bool = True,
             hpa: bool = True) -> int:
        """One decision with the metric at ``value``: KEDA's check (``keda``), then the HPA's (``hpa``)."""
        if keda and self.keda is not None:
            decided = self.keda.check(now, current, self.active(now, value))
            if decided is not None:
                return decided
        if not hpa:
            return current
        self.stabilize.seed(now, current)
        if current == 0 and self.low != 0:
            return 0  # ScalingDisabled: the HPA leaves a target with no replica alone
        if current > self.max:
            desired = self.max
        elif current < self.low:
            desired = self.low
        else:
            desired = self._normalize(now, current, self.propose(now, current, ready, value))
        if self.behavior and desired != current:
            rules = self.scale_up if desired > current else self.scale_down
            self.events.changed(now, current, desired, rules.longest_period)
        return desired

    def _normalize(self, now: float, current: int, raw: int) -> int:
        if not self.behavior:
            return self.bounded(current, self.stabilize.highest(now, raw))
        return self.limited(now, current, self.stabilize(now, current, raw))

    def bounded(self, current: int, desired: int) -> int:
        """Without ``behavior``: ``desired`` held within ``min`` and ``min(max, max(2 x current, 4))``."""
        top = min(self.max, int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM)))
        return self.low if desired < self.low else top if desired > top else desired

    def limited(self, now: float, current: int, desired: int) -> int:
        """With ``behavior``: ``desired`` (stabilised) within the scaling policies' limits, then the bounds."""
        if desired > current:
            top = min(self.max, max(scale_up_limit(now, current, self.events, self.scale_up), current))
            return min(desired, top)
        if desired < current:
            bottom = max(self.low, min(scale_down_limit(now, current, self.events, self.scale_down), current))
            return max(desired, bottom)
        return desired


_NEEDS = {"recommended_workers": frozenset({"arrival_rate", "service"})}
