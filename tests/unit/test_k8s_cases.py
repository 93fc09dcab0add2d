"""Kubernetes' and KEDA's own test cases, as facts, driving qsim's HPA and KEDA controller (qsim.autoscale).

Each row names the upstream test it comes from (Go test name, and the row's
name for table tests), its inputs and the replica count upstream expects.
Sources: kubernetes ``pkg/controller/podautoscaler/horizontal_test.go`` and
``replica_calculator_test.go`` (the 1.33+ versions, with per-direction
tolerances), and KEDA ``pkg/scaling/executor/scale_scaledobjects_test.go``.
Metric values and targets are the upstream milli-values (8600 is 8.6): qsim
reads thousandths as the HPA does, so the float arithmetic is upstream's.

Ported: 113 cases, all passing (:data:`PORTED` counts them; a test checks
the count):

- horizontal_test.go, whole decisions on External/Object metrics and the
  bounds (21: ``TestScaleUpCMObject`` ... ``TestScaleDownRCImmediately``), run
  as upstream's harness runs them: an HPA without ``behavior`` and the
  scale-up limit factor raised to 8 (its ``init``); ``recommendations: []``
  (no initial recommendation) where upstream gives it;
- horizontal_test.go, the normalisation tables: ``TestConvertDesiredReplicasWithRules``
  (5), ``TestCalculateScaleUpLimitWithScalingRules`` (1),
  ``TestCalculateScaleDownLimitWithBehaviors`` (1), ``TestNormalizeDesiredReplicas``
  (5), ``TestScalingWithRules`` (41), ``TestStoreScaleEvents`` (8),
  ``TestNormalizeDesiredReplicasWithBehavior`` (11);
- replica_calculator_test.go, Object and External metrics (17), tolerance
  and configurable tolerance included;
- scale_scaledobjects_test.go (3): to zero when not active, to the minimum
  from below, from zero when active.

Left out, and why:

- horizontal_test.go / replica_calculator_test.go cases on CPU, container
  resource and Pods metrics (utilization of requests, unready and missing
  pods, hot CPU), events, conditions, selectors, multiple HPAs, invalid or
  failing metrics, int32/int64 overflows (``TestReplicaCalcScaleUpOverflow``,
  ``TestExternalPerPodMetric*Overflow``): qsim's HPA reads one External
  metric its driver always has, in Python integers;
- ``TestScalingWithRules`` "scaleDownLimit is the limit because scaleDownLimit >
  minReplicas with user defined policies": skipped upstream (``testThis``);
- ``TestNormalizeDesiredReplicas`` / ``TestNormalizeDesiredReplicasWithBehavior``
  log lengths: upstream reuses a stale slot, qsim drops stale proposals; the
  stabilised counts are ported;
- scale_scaledobjects_test.go: ``idleReplicaCount`` above 0 or with a minimum
  above 1 (``TestScaleToIdleReplicasWhenNotActive``,
  ``TestScaleFromIdleToMinReplicasWhenActive``: qsim's ``min = 0`` is idle 0
  with minimum 1), the pause and forced-activation annotations (5 tests), the
  event text and the HPA health conditions (14 tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from qsim.autoscale import hpa as hpa_module
from qsim.autoscale.hpa import HPA, ScaleEvent, ScaleEvents, ScalingRules, Stabilizer, Tolerances, proposal, \
    scale_down_limit, scale_up_limit
from qsim.spec.autoscaler import ScalePolicySpec

NOW = 10_000.0  # the decision's time; upstream's "now"
EPS = 1e-3  # upstream makes a test's events a moment before its decision


def rules(pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0, window: int = 0,
          select: str = "max") -> ScalingRules:
    """Upstream's generateScalingRules: a Pods and/or a Percent policy (0: none), Max select, a window."""
    policies = []
    if pods:
        policies.append(ScalePolicySpec(type="pods", value=pods, period=float(pods_period)))
    if percent:
        policies.append(ScalePolicySpec(type="percent", value=percent, period=float(percent_period)))
    return ScalingRules(policies=tuple(policies), select=select, stabilization=float(window))


UP_DEFAULT = hpa_module.DEFAULT_SCALE_UP
DOWN_DEFAULT = hpa_module.DEFAULT_SCALE_DOWN


def uniform(changes: list[int], period: float = 120.0) -> list[ScaleEvent]:
    """Upstream's generateEventsUniformDistribution: the changes spread over the last ``period`` s, each at
    the middle of its share (for 3 over 120 s: 100, 60 and 20 s ago), a moment before the decision."""
    share = period / len(changes)
    return [ScaleEvent(NOW - (period - share * (i + 1) + share / 2) - EPS, c) for i, c in enumerate(changes)]


# ------------------------------------------------------------------ horizontal_test.go: whole decisions


@dataclass(frozen=True)
class Decision:
    test: str
    min: int
    max: int
    current: int
    metric_type: str = "Value"
    target: float = 1000.0
    value: float = 0.0
    fresh: bool = True  # upstream's recommendations: nil (the first sight seeds a proposal of the current count)
    want: int = 0


DECISIONS = [
    Decision("TestScaleUpCMObject", 2, 6, 3, "Value", 15000, 20000, want=4),
    Decision("TestScaleUpFromZeroCMObject", 0, 6, 0, "Value", 15000, 20000, want=2),
    Decision("TestScaleUpFromZeroIgnoresToleranceCMObject", 0, 6, 0, "Value", 1000, 1000, want=1),
    Decision("TestScaleUpPerPodCMObject", 2, 6, 3, "AverageValue", 10000, 40000, want=4),
    Decision("TestScaleUpCMExternal", 2, 6, 3, "Value", 6666, 8600, want=4),
    Decision("TestScaleUpPerPodCMExternal", 2, 6, 3, "AverageValue", 2222, 8600, want=4),
    Decision("TestScaleDownCMObject", 2, 6, 5, "Value", 20000, 12000, fresh=False, want=3),
    Decision("TestScaleDownToZeroCMObject", 0, 6, 5, "Value", 20000, 0, fresh=False, want=0),
    Decision("TestScaleDownPerPodCMObject", 2, 6, 5, "AverageValue", 20000, 60000, fresh=False, want=3),
    Decision("TestScaleDownCMExternal", 2, 6, 5, "Value", 14400, 8600, fresh=False, want=3),
    Decision("TestScaleDownToZeroCMExternal", 0, 6, 5, "Value", 14400, 0, fresh=False, want=0),
    Decision("TestScaleDownPerPodCMExternal", 2, 6, 5, "AverageValue", 3000, 8600, fresh=False, want=3),
    Decision("TestToleranceCMObject", 1, 5, 3, "Value", 20000, 20050, want=3),
    Decision("TestToleranceCMExternal", 2, 6, 4, "Value", 8666, 8600, want=4),
    Decision("TestTolerancePerPodCMObject", 2, 6, 4, "AverageValue", 2200, 8600, want=4),
    Decision("TestTolerancePerPodCMExternal", 2, 6, 4, "AverageValue", 2200, 8600, want=4),
    Decision("TestZeroReplicas", 3, 5, 0, want=0),             # scaling disabled at zero replicas
    Decision("TestTooFewReplicas", 3, 5, 2, want=3),
    Decision("TestTooManyReplicas", 3, 5, 10, want=5),
    Decision("TestScaleUpRCImmediately", 2, 6, 1, want=2),
    Decision("TestScaleDownRCImmediately", 2, 5, 6, want=5),
]


@pytest.fixture
def upstream_limit_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    """horizontal_test.go raises the scale-up limit factor to 8 for its whole package."""
    monkeypatch.setattr(hpa_module, "SCALE_UP_LIMIT_FACTOR", 8.0)


@pytest.mark.usefixtures("upstream_limit_factor")
@pytest.mark.parametrize("case", DECISIONS, ids=lambda c: c.test)
def test_horizontal_decisions(case: Decision) -> None:
    # a plain HPA (minReplicas 0 is the HPAScaleToZero gate, not KEDA), without behavior, as upstream's harness
    hpa = HPA(min=case.min, max=case.max, target=case.target, metric_type=case.metric_type, behavior=False,
              keda=False)
    if not case.fresh:
        hpa.stabilize.seeded = True
    assert hpa.step(NOW, case.current, case.current, case.value) == case.want


CONVERT = [  # TestConvertDesiredReplicasWithRules: (current, desired, min, max) -> replicas
    ("prenormalized desired replicas within range", 5, 7, 3, 8, 7),
    ("prenormalized desired replicas < minReplicas", 3, 1, 2, 8, 2),
    ("prenormalized desired zeroed replicas within range", 1, 0, 0, 10, 0),
    ("maxReplicas is the limit because maxReplicas < scaleUpLimit", 20, 1000, 1, 10, 10),
    ("scaleUpLimit is the limit because scaleUpLimit < maxReplicas", 3, 1000, 1, 2000, 24),  # max(8 x 3, 4)
]


@pytest.mark.usefixtures("upstream_limit_factor")
@pytest.mark.parametrize("name, current, desired, low, high, want", CONVERT, ids=[c[0] for c in CONVERT])
def test_convert_desired_replicas_with_rules(name: str, current: int, desired: int, low: int, high: int,
                                             want: int) -> None:
    assert HPA(min=low, max=high, target=1, behavior=False, keda=False).bounded(current, desired) == want


def test_calculate_scale_limits_with_scaling_rules() -> None:
    # TestCalculateScaleUpLimitWithScalingRules / TestCalculateScaleDownLimitWithBehaviors: Min select of
    # 2 pods and 50% per 60 s, no events
    both = rules(2, 60, 50, 60, window=300, select="min")
    assert scale_up_limit(NOW, 1, ScaleEvents(), both) == 2
    assert scale_down_limit(NOW, 5, ScaleEvents(), both) == 3


NORMALIZE = [  # TestNormalizeDesiredReplicas (no behavior, 300 s): (proposals as (replicas, age s), raw) -> replicas
    ("empty log", [], 5, 5),
    ("stabilize", [(4, 120), (5, 60)], 3, 5),
    ("no stabilize", [(1, 120), (2, 60)], 3, 3),
    ("no stabilize - old recommendations", [(10, 600), (9, 540)], 3, 3),
    ("stabilize - old recommendations", [(10, 600), (4, 60), (5, 120), (9, 540)], 3, 5),
]


@pytest.mark.parametrize("name, log, raw, want", NORMALIZE, ids=[c[0] for c in NORMALIZE])
def test_normalize_desired_replicas(name: str, log: list[tuple[int, float]], raw: int, want: int) -> None:
    s = Stabilizer(0.0, hpa_module.DOWNSCALE_STABILIZATION)
    s.seeded = True
    s.history.extend(sorted((NOW - age, r) for r, age in log))
    assert s.highest(NOW, raw) == want


@dataclass(frozen=True)
class Rate:
    name: str
    current: int
    desired: int
    min: int
    max: int
    want: int
    up: ScalingRules = UP_DEFAULT
    down: ScalingRules = DOWN_DEFAULT
    ups: tuple[int, ...] = ()
    downs: tuple[int, ...] = ()
    period: float = 120.0  # of the uniform events


RATES = [  # TestScalingWithRules: convertDesiredReplicasWithBehaviorRate
    Rate("prenormalized desired replicas within range", 5, 7, 3, 8, 7),
    Rate("prenormalized desired replicas < minReplicas", 3, 1, 2, 8, 2),
    Rate("prenormalized desired replicas within range when minReplicas is 0", 1, 0, 0, 10, 0),
    Rate("maxReplicas is the limit because maxReplicas < scaleUpLimit", 20, 1000, 1, 10, 10),
    Rate("desired replica count is more than the maximum replica count", 100, 1000, 100, 150, 150),
    Rate("scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies", 3, 1000, 1, 2000, 4,
         up=rules(0, 0, 1, 60)),
    Rate("scaleUp with default behavior", 10, 50, 1, 1000, 20),
    Rate("scaleUp with pods policy larger than percent policy", 10, 500, 1, 1000, 110, up=rules(100, 60, 100, 60)),
    Rate("scaleUp with percent policy larger than pods policy", 10, 500, 1, 1000, 20, up=rules(2, 60, 100, 60)),
    Rate("scaleUp with spec MaxReplicas limitation with large pod policy", 10, 50, 1, 1000, 50,
         up=rules(100, 60)),
    Rate("scaleUp with spec MaxReplicas limitation with large percent policy", 10, 50, 1, 1000, 50,
         up=rules(10000, 60)),
    Rate("scaleUp with pod policy limitation", 10, 50, 1, 1000, 40, up=rules(30, 60)),
    Rate("scaleUp with percent policy limitation", 10, 50, 1, 1000, 30, up=rules(0, 0, 200, 60)),
    Rate("scaleDown with percent policy larger than pod policy", 100, 2, 1, 1000, 80,
         down=rules(20, 60, 1, 60, 300)),
    Rate("scaleDown with pod policy larger than percent policy", 100, 2, 1, 1000, 98,
         down=rules(2, 60, 1, 60, 300)),
    Rate("scaleDown with spec MinReplicas=nil limitation with large pod policy", 10, 0, 1, 1000, 1,
         down=rules(100, 60, window=300)),
    Rate("scaleDown with spec MinReplicas limitation with large pod policy", 10, 0, 1, 1000, 1,
         down=rules(100, 60, window=300)),
    Rate("scaleDown with spec MinReplicas limitation with large percent policy", 10, 2, 5, 1000, 5,
         down=rules(0, 0, 100, 60, 300)),
    Rate("scaleDown with pod policy limitation", 10, 2, 1, 1000, 5, down=rules(5, 60, window=300)),
    Rate("scaleDown with percent policy limitation", 10, 5, 1, 1000, 5, down=rules(0, 0, 50, 60, 300)),
    Rate("scaleUp with spec MaxReplicas limitation with large pod policy and events", 100, 500, 1, 200, 200,
         up=rules(300, 60), ups=(1, 5, 9)),
    Rate("scaleUp with spec MaxReplicas limitation with large percent policy and events", 100, 500, 1, 200, 200,
         up=rules(0, 0, 10000, 60), ups=(1, 5, 9)),
    Rate("scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
         100, 500, 1, 1000, 100, up=rules(5, 120), ups=(1, 5, 9)),
    Rate("scaleUp with pod policy and previous scale up events", 100, 500, 1, 1000, 235, up=rules(150, 120),
         ups=(1, 5, 9)),
    Rate("scaleUp with percent policy and previous scale up events", 100, 500, 1, 1000, 255,
         up=rules(0, 0, 200, 120), ups=(1, 5, 9)),
    Rate("scaleUp with percent policy and previous scale up and down events", 6, 24, 1, 1000, 16,
         up=rules(0, 0, 300, 300), ups=(4,), downs=(2,)),
    Rate("scaleDown with default policy and previous events", 10, 5, 1, 1000, 5, downs=(1, 5, 9)),
    Rate("scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events", 100, 0, 1,
         1000, 1, down=rules(115, 120, window=300), downs=(1, 5, 9)),
    Rate("scaleDown with spec MinReplicas limitation with large pod policy and previous events", 100, 0, 5, 1000,
         5, down=rules(130, 120, window=300), downs=(1, 5, 9)),
    Rate("scaleDown with spec MinReplicas limitation with large percent policy and previous events", 100, 2, 5,
         1000, 5, down=rules(0, 0, 100, 120, 300), downs=(1, 5, 9)),
    Rate("scaleDown with pod policy limitation and previous events", 100, 2, 1, 1000, 100,
         down=rules(5, 120, window=300), downs=(1, 5, 9)),
    Rate("scaleDown with percent policy limitation and previous events", 100, 0, 1, 1000, 56,
         down=rules(0, 0, 50, 120, 300), downs=(2, 4, 6)),
    Rate("scaleDown with percent policy and previous scale up and down events", 10, 1, 1, 1000, 6,
         down=rules(0, 0, 50, 180), ups=(2,), downs=(4,)),
    Rate("scaleDown with previous events preventing further scale down", 100, 0, 1, 1000, 100,
         down=rules(0, 0, 10, 120, 300), downs=(10, 10, 10)),
    Rate("scaleDown with with previous events still allowing more scale down", 10, 5, 1, 1000, 5,
         down=rules(0, 0, 1000, 120, 300), downs=(10, 10, 10)),
    Rate("check 'outdated' flag for events for one behavior for up", 100, 200, 1, 1000, 200,
         up=rules(1000, 60), ups=(8, 12, 9, 11)),
    Rate("check that events were not marked 'outdated' for two different policies in the behavior for up", 100,
         200, 1, 1000, 200, up=rules(1000, 120, 100, 60), ups=(8, 12, 9, 11)),
    Rate("check that events were marked 'outdated' for two different policies in the behavior for up", 100, 200,
         1, 1000, 200, up=rules(1000, 30, 100, 60), ups=(8, 12, 9, 11)),
    Rate("check 'outdated' flag for events for one behavior for down", 100, 5, 1, 1000, 5,
         down=rules(1000, 60, window=300), downs=(8, 12, 9, 11)),
    Rate("check that events were not marked 'outdated' for two different policies in the behavior for down", 100,
         5, 1, 1000, 5, down=rules(1000, 120, 100, 60, 300), downs=(8, 12, 9, 11)),
    Rate("check that events were marked 'outdated' for two different policies in the behavior for down", 100, 5,
         1, 1000, 5, down=rules(1000, 30, 100, 60, 300), downs=(8, 12, 9, 11)),
]


@pytest.mark.parametrize("case", RATES, ids=lambda c: c.name)
def test_scaling_with_rules(case: Rate) -> None:
    hpa = HPA(min=case.min, max=case.max, target=1, scale_up=case.up, scale_down=case.down, keda=False)
    hpa.events.up = uniform(list(case.ups), case.period) if case.ups else []
    hpa.events.down = uniform(list(case.downs), case.period) if case.downs else []
    assert hpa.limited(NOW, case.current, case.desired) == case.want


STORE = [  # TestStoreScaleEvents: (events as (change, age s), rules or None: no behavior, changed within 60 s,
    #                                 events after a change of 5 as (change, outdated))
    ("empty entries with default behavior", [], None, 0, []),
    ("empty entries with two-policy-behavior", [], rules(10, 60, 100, 60), 0, [(5, False)]),
    ("one outdated entry to be kept untouched without behavior", [(7, 61)], None, 0, [(7, False)]),
    ("one outdated entry to be replaced with behavior", [(7, 61)], rules(10, 60, 100, 60), 0, [(5, False)]),
    ("one actual entry to be not touched with behavior", [(7, 58)], rules(10, 60, 100, 60), 7,
     [(7, False), (5, False)]),
    ("two entries, one of them to be replaced", [(7, 61), (6, 59)], rules(10, 60), 6, [(5, False), (6, False)]),
    ("replace one entry, use policies with different periods", [(8, 29), (6, 59), (7, 61), (9, 61)],
     rules(10, 60, 100, 30), 14, [(8, False), (6, False), (7, True), (5, False)]),
    ("two entries, both actual", [(7, 58), (6, 59)], rules(10, 120, 100, 30), 13,
     [(7, False), (6, False), (5, False)]),
]


@pytest.mark.parametrize("name, before, behaviour, within, after", STORE, ids=[c[0] for c in STORE])
@pytest.mark.parametrize("way", ["up", "down"])
def test_store_scale_events(name: str, before: list[tuple[int, float]], behaviour: ScalingRules | None,
                            within: int, after: list[tuple[int, bool]], way: str) -> None:
    events = [ScaleEvent(NOW - age, change) for change, age in before]
    assert ScaleEvents.within(events, NOW, 60.0) == within
    if behaviour is None:  # a decision from 10 to 10 +- 5 replicas of an HPA without behavior stores nothing
        hpa = HPA(min=1, max=100, target=1, behavior=False, keda=False)
        setattr(hpa.events, way, events)
        hpa.stabilize.seeded = True
        assert hpa.step(NOW, 10, 10, 15.0 if way == "up" else 5.0) == (15 if way == "up" else 5)
        stored = getattr(hpa.events, way)
    else:  # with behavior the change is stored, its direction's longest policy period telling what is outdated
        store = ScaleEvents(**{way: events})
        store.changed(NOW, 10, 15 if way == "up" else 5, behaviour.longest_period)
        stored = getattr(store, way)
    assert [(e.change, e.outdated) for e in stored] == after


WITH_BEHAVIOR = [  # TestNormalizeDesiredReplicasWithBehavior: (proposals as (replicas, age s), current, raw,
    #                                                           up window, down window) -> replicas
    ("empty recommendations for scaling down", [], 100, 5, 0, 0, 5),
    ("simple scale down stabilization", [(4, 120), (5, 60)], 100, 3, 0, 180, 5),
    ("simple scale up stabilization", [(4, 120), (5, 60)], 1, 7, 300, 0, 4),
    ("no scale down stabilization", [(1, 120), (2, 60)], 100, 3, 300, 0, 3),
    ("no scale up stabilization", [(4, 120), (5, 60)], 1, 3, 0, 300, 3),
    ("no scale down stabilization, reuse recommendation element", [(10, 600), (9, 540)], 100, 3, 0, 0, 3),
    ("no scale up stabilization, reuse recommendation element", [(10, 600), (9, 540)], 1, 100, 0, 0, 100),
    ("scale down stabilization, reuse one of obsolete recommendation element",
     [(10, 600), (4, 60), (5, 120), (9, 540)], 100, 3, 0, 180, 5),
    ("scale up stabilization, reuse one of obsolete recommendation element",
     [(10, 6000), (6, 60), (5, 120), (9, 180)], 1, 100, 300, 0, 5),
    ("scale up and down stabilization, do not scale up when prenormalized rec goes down", [(2, 6000), (3, 180)],
     2, 1, 300, 300, 2),
    ("scale up and down stabilization, do not scale down when prenormalized rec goes up", [(2, 6000), (1, 180)],
     2, 3, 300, 300, 2),
]


@pytest.mark.parametrize("name, log, current, raw, up, down, want", WITH_BEHAVIOR, ids=[c[0] for c in WITH_BEHAVIOR])
def test_normalize_desired_replicas_with_behavior(name: str, log: list[tuple[int, float]], current: int, raw: int,
                                                   up: float, down: float, want: int) -> None:
    s = Stabilizer(up, down)
    s.seeded = True
    s.history.extend(sorted((NOW - age, r) for r, age in log))
    assert s(NOW, current, raw) == want


# ------------------------------------------------------------------ replica_calculator_test.go


CALC = [  # (test, metric type, current, ready, target, value, tolerances (down, up) or None: 0.1) -> replicas
    ("TestReplicaCalcScaleUpCMObject", "Value", 3, 3, 15000, 20000, None, 4),
    ("TestReplicaCalcScaleUpCMPerPodObject", "AverageValue", 3, 3, 5000, 20000, None, 4),
    ("TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods", "Value", 3, 1, 10000, 50000, None, 5),
    ("TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods", "Value", 3, 1, 4400, 8600, None, 2),
    ("TestReplicaCalcScaleUpPerPodCMExternal", "AverageValue", 3, 3, 2150, 8600, None, 4),
    ("TestReplicaCalcScaleDownPerPodCMObject", "AverageValue", 5, 5, 2000, 6000, None, 3),
    ("TestReplicaCalcScaleDownCMObject", "Value", 5, 5, 20000, 12000, None, 3),
    ("TestReplicaCalcScaleDownCMExternal", "Value", 5, 5, 14334, 8600, None, 3),
    ("TestReplicaCalcScaleDownPerPodCMExternal", "AverageValue", 5, 5, 2867, 8600, None, 3),
    ("TestReplicaCalcToleranceCMObject", "Value", 3, 3, 20000, 20666, None, 3),
    ("TestReplicaCalcTolerancePerPodCMObject", "AverageValue", 4, 4, 5000, 20166, None, 4),
    ("TestReplicaCalcToleranceCMExternal", "Value", 3, 3, 8888, 8600, None, 3),
    ("TestReplicaCalcTolerancePerPodCMExternal", "AverageValue", 3, 3, 2900, 8600, None, 3),
    ("TestReplicaCalcConfigurableToleranceCMObject", "Value", 3, 3, 20000, 20666, (0.1, 0.01), 4),
    ("TestReplicaCalcConfigurableTolerancePerPodCMObject", "AverageValue", 4, 4, 5000, 20208, (0.1, 0.01), 5),
    ("TestReplicaCalcConfigurableToleranceCMExternal", "Value", 3, 3, 8800, 8900, (0.1, 0.01), 4),
    ("TestReplicaCalcConfigurableTolerancePerPodCMExternal", "AverageValue", 3, 3, 2800, 8600, (0.1, 0.01), 4),
]


@pytest.mark.parametrize("test, kind, current, ready, target, value, tolerances, want", CALC,
                         ids=[c[0] for c in CALC])
def test_replica_calculator(test: str, kind: str, current: int, ready: int, target: float, value: float,
                            tolerances: tuple[float, float] | None, want: int) -> None:
    tol = Tolerances(*tolerances) if tolerances else Tolerances()
    # the values in thousandths as upstream gives them, and the same in units: qsim reads thousandths
    assert proposal(current, ready, value, target, metric_type=kind, tolerance=tol) == want
    assert proposal(current, ready, value / 1000, target / 1000, metric_type=kind, tolerance=tol) == want


def test_the_tolerance_band_includes_both_ends() -> None:
    # replica_calculator.go's Tolerances.isWithin: 1 - down <= ratio <= 1 + up; 88 jobs on 10 replicas at 8
    # each is a ratio of exactly 1.1 and holds (|1 - ratio| <= 0.1 in floats would have scaled to 11)
    assert proposal(10, 10, 88, 8) == 10
    assert proposal(10, 10, 72, 8) == 10                               # 0.9 holds too
    assert proposal(10, 10, 89, 8) == 12                               # ceil(11.125)
    assert proposal(10, 10, 88, 8, tolerance=Tolerances(0.1, 0.05)) == 11


# ------------------------------------------------------------------ KEDA scale_scaledobjects_test.go


KEDA = [  # (test, min, current, metric value (activation 0: active above it), replicas after KEDA and the HPA)
    ("TestScaleToMinReplicasWhenNotActive", 0, 10, 0.0, 0),  # never active, initialCooldownPeriod 0
    ("TestScaleToMinReplicasFromLowerInitialReplicaCount", 5, 1, 0.0, 5),
    ("TestScaleFromMinReplicasWhenActive", 0, 0, 1.0, 1),
]


@pytest.mark.parametrize("test, low, current, value, want", KEDA, ids=[c[0] for c in KEDA])
def test_keda_executor(test: str, low: int, current: int, value: float, want: int) -> None:
    assert HPA(min=low, max=100, target=5).step(NOW, current, current, value) == want


# ------------------------------------------------------------------ the count


PORTED = (len(DECISIONS) + len(CONVERT) + 2 + len(NORMALIZE) + len(RATES) + len(STORE) + len(WITH_BEHAVIOR)
          + len(CALC) + len(KEDA))


def test_the_count_in_the_docstring() -> None:
    assert f"Ported: {PORTED} cases" in (__doc__ or "")
