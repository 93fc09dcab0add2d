"""``[[autoscalers]]``: a pool's autoscaler in the Scenario, its policy and the policy's parameters.

One table per autoscaled pool (at most one per pool)::

    [[autoscalers]]
    pool = "p"
    min = 1                      # replicas; 0 lets KEDA scale to zero (hpa, qsim)
    max = 20
    start_delay = { kind = "constant", mean = 30.0 }   # cold start: any service-time distribution
    grace = 30.0                 # scale-down: SIGTERM, drain up to grace s, then cut off (as a sigterm event)
    poll = 30.0                  # s between decisions (hpa, qsim: KEDA's pollingInterval, the 0 <-> 1 check)
    flap_window = 600.0          # a reversal less than this many s after the previous scale event is a flap
    policy = "hpa"               # hpa | step | target-tracking | qsim | schedule | predictive
    metric = "list_length"       # and the policy's parameters (below)
    target = 8

Each policy's parameters and defaults are :data:`POLICY_PARAMS` (a parameter
of another policy is an error; ``REQUIRED`` ones must be given):

- ``hpa``: ``metric`` (list_length | in_flight | oldest_age | p95_wait |
  recommended_workers), ``target`` (per replica for ``AverageValue``), ``metric_type``
  (AverageValue for list_length, in_flight and recommended_workers, else Value), ``tolerance``, ``window``
  (s of the p95 and the measured load), ``scale_up_stabilization``,
  ``scale_down_stabilization``, ``scale_up`` / ``scale_down`` (lists of ``{type =
  "pods" | "percent", value, period}``), ``scale_up_select`` / ``scale_down_select``
  (max | min | disabled), ``scale_up_tolerance`` / ``scale_down_tolerance`` (the
  HPA's per-direction ``behavior.scale{Up,Down}.tolerance``; ``tolerance`` when not
  given), ``sync`` (s between the HPA's decisions: kube-controller-manager's
  ``--horizontal-pod-autoscaler-sync-period``, 15 s), ``behavior`` (false: an HPA
  without ``behavior``, as KEDA creates when a ScaledObject gives none: Kubernetes'
  fixed rules, see :mod:`qsim.autoscale.hpa`; the behaviour keys then keep their
  defaults), ``keda`` (with ``min = 0``: true, KEDA scales 0 <-> 1 every ``poll`` s;
  false, a plain HPA with ``minReplicas: 0`` scales to and from 0 itself), KEDA's
  ``activation``, ``cooldown`` and ``initial_cooldown`` (with ``min = 0``),
  ``metric_from`` (``queue``, or ``workers``: the series vanishes when no worker of
  the pool is ready), ``ignore_null`` (such a read is 0, else an error), KEDA's
  ``fallback_replicas``, ``fallback_failures`` and ``fallback_behavior`` (static |
  currentReplicas | currentReplicasIfHigher | currentReplicasIfLower;
  :mod:`qsim.autoscale.nulls`),
  ``metric_lag`` (s: the metric read is as it was this long before the decision,
  Prometheus' scrape and rule delay; 0) and ``p95_buckets`` (the p95 wait read as
  Prometheus' ``histogram_quantile`` over the workers' wait buckets, not from the
  waits themselves; false), see :mod:`qsim.autoscale.observe`, and
  ``slo`` (required for ``recommended_workers``: the advisor's SLO);
- ``step``: ``metric`` (oldest_age | p95_wait), ``up_when``, ``down_when`` (s),
  ``step``, ``up_delay``, ``down_delay``, ``window``;
- ``target-tracking``: ``acceptable_latency`` (s), ``window``, ``scale_out_cooldown``,
  ``scale_in_cooldown``;
- ``qsim``: ``slo`` (``qsim advise --slo``), ``window`` (the advice window, 15 min),
  and the HPA behaviour of ``deploy/kubernetes/keda-scaledobject.yaml`` (scale down
  one pod per 120 s after a 600 s window), every key of it adjustable as for ``hpa``;
- ``schedule``: ``floors`` (a list of ``{start = "08:00", end = "18:00", replicas = 6}``:
  KEDA ``cron`` triggers, times of day of the scenario's clock) and ``timezone`` (the
  IANA zone the scenario's clock is the local time of: written on the cron triggers),
  beside every ``hpa`` key; ``target`` is optional there: without it the floors are
  the only triggers (:mod:`qsim.autoscale.schedule`);
- ``predictive``: ``lead`` (s the floors are raised ahead of the load; default the
  cold start's mean) and ``utilization`` (the share of the floor's slots the expected
  load fills, 0.8), beside every ``hpa`` key, ``target`` optional
  (:mod:`qsim.autoscale.predictive`).

Each policy has its own typed spec (:data:`PolicySpec`, a tagged union on
``policy``: :class:`HpaSpec`, :class:`StepSpec`, :class:`TargetTrackingSpec`,
:class:`QsimSpec`, :class:`ScheduleSpec`, :class:`PredictiveSpec`): its fields
are the policy's parameters with their defaults, the TOML parser's reading of
each (kind, bounds, choices) is the field's metadata, and its ``check`` is the
policy's own validation. :data:`POLICY_PARAMS` and :data:`AUTOSCALER_KEYS` are
read from them. A new parameter is a field of its policy's spec (and of the
flat :class:`AutoscalerSpec`, the public constructor), read by the policy's
control law (:mod:`qsim.autoscale`) and mapped by the manifest writer and
reader (:mod:`qsim.autoscale.manifest`, :mod:`qsim.autoscale.k8s_read`).

The dataclasses here are part of the Scenario tree; :mod:`qsim.spec.scenario`
parses the tables, :attr:`AutoscalerSpec.law` is the checked typed spec and
:mod:`qsim.autoscale.build` makes the controllers from it.
"""

from __future__ import annotations

import dataclasses
import re
import zoneinfo
from dataclasses import MISSING, dataclass, field, fields
from collections.abc import Mapping
from typing import Any, ClassVar

from qsim.errors import ScenarioError
from qsim.results.display import plain
from qsim.spec import dists

__all__ = ["AutoscalerSpec", "ScalePolicySpec", "Param", "POLICY_PARAMS", "AUTOSCALE_POLICIES", "HPA_METRICS",
           "STEP_METRICS", "METRIC_TYPES", "SELECTS", "SCALE_POLICY_TYPES", "REQUIRED", "COMMON_KEYS", "problem",
           "DEFAULT_SCALE_UP", "DEFAULT_SCALE_DOWN", "QSIM_SCALE_DOWN", "SLO_SHAPE", "default_metric_type", "owner",
           "AUTOSCALER_KEYS", "FloorSpec", "FLOOR_POLICIES", "HPA_LIKE", "CLOCK", "clock_minutes", "DEFAULT_SYNC",
           "BEHAVIOR_KEYS", "KEDA_KEYS", "METRIC_FROM", "NULL_KEYS", "READ_KEYS", "QUIET_KEYS", "FALLBACK_BEHAVIORS",
           "PolicySpec", "POLICY_SPECS", "policy_spec",
           "HpaSpec", "StepSpec", "TargetTrackingSpec", "QsimSpec", "ScheduleSpec", "PredictiveSpec"]

#: Policies with replica floors (KEDA cron triggers) beside the reactive trigger.
FLOOR_POLICIES = ("schedule", "predictive")
#: Policies that are an HPA (with KEDA's activation): their behaviour keys are the HPA's.
HPA_LIKE = ("hpa", "qsim", "schedule", "predictive")
HPA_METRICS = ("list_length", "in_flight", "oldest_age", "p95_wait", "recommended_workers")
#: A time of day on the scenario's clock: ``HH:MM`` (a KEDA cron trigger is minute-grained).
CLOCK = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])$")
STEP_METRICS = ("oldest_age", "p95_wait")
METRIC_TYPES = ("AverageValue", "Value")
#: Where the trigger's series comes from: ``queue`` (always there: Redis, the advisor Deployment) or ``workers``
#: (exported by the pool's ready workers only: none ready, none read).
METRIC_FROM = ("queue", "workers")
#: KEDA's ``fallback.behavior``: the replicas a fallback asks for (qsim.autoscale.nulls).
FALLBACK_BEHAVIORS = ("static", "currentReplicas", "currentReplicasIfHigher", "currentReplicasIfLower")
SELECTS = ("max", "min", "disabled")
SCALE_POLICY_TYPES = ("pods", "percent")
#: An SLO's shape (``p95_wait<=2``); its metric is checked where it is used (qsim.analysis.plan.planner).
SLO_SHAPE = re.compile(r"^\s*[a-z0-9_]+(?:\[[^\]]+\])?\s*(?:<=|>=|<|>)\s*[-+0-9.eE]+\s*$")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that must be given.
REQUIRED: Any = _Required()


def default_metric_type(metric: str) -> str:
    """``AverageValue`` for totals shared by the replicas (list length, jobs in flight, recommended workers),
    else ``Value``."""
    return "AverageValue" if metric in ("list_length", "in_flight", "recommended_workers") else "Value"


def clock_minutes(text: str) -> int:
    """Minutes after 00:00 of a time of day ``HH:MM``.

    Raises:
        ValueError: not ``HH:MM`` within 00:00..23:59.
    """
    m = CLOCK.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"must be a time of day HH:MM (00:00 to 23:59), got {text!r}")
    return int(m.group(1)) * 60 + int(m.group(2))


@dataclass(frozen=True, kw_only=True)
class FloorSpec:
    """A replica floor (a KEDA ``cron`` trigger): at least ``replicas`` from ``start`` (inclusive) to ``end``
    (exclusive) every day, times ``HH:MM`` of the scenario's clock; ``end`` before ``start`` crosses midnight.

    Raises:
        ValueError: a time not ``HH:MM``, ``start == end`` (KEDA refuses it), ``replicas < 1``.
    """

    start: str
    end: str
    replicas: int

    def __post_init__(self) -> None:
        wrong = _floor_problem(self.start, self.end, self.replicas)
        if wrong is not None:
            raise ValueError(f"{wrong[0]} {wrong[1]}")


def _floor_problem(start: Any, end: Any, replicas: Any) -> tuple[str, str] | None:
    for key, text in (("start", start), ("end", end)):
        try:
            clock_minutes(text)
        except ValueError as e:
            return key, str(e)
    if start == end:
        return "end", f"must differ from start (KEDA refuses a cron trigger whose start and end are equal), got {end!r}"
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        return "replicas", f"must be a whole number >= 1, got {replicas!r}"
    return None


@dataclass(frozen=True, kw_only=True)
class ScalePolicySpec:
    """One HPA scaling policy: at most ``value`` pods (or percent) of change per ``period`` seconds."""

    type: str
    value: int
    period: float


#: Kubernetes' defaults: up by max(4 pods, 100%) per 15 s; down by up to 100% per 15 s.
DEFAULT_SCALE_UP = (ScalePolicySpec(type="pods", value=4, period=15.0),
                    ScalePolicySpec(type="percent", value=100, period=15.0))
DEFAULT_SCALE_DOWN = (ScalePolicySpec(type="percent", value=100, period=15.0),)
#: Seconds between the HPA controller's decisions (``--horizontal-pod-autoscaler-sync-period``'s default).
DEFAULT_SYNC = 15.0
#: The keys of an HPA's ``behavior`` (with ``behavior = false`` they keep their defaults).
BEHAVIOR_KEYS = ("scale_up_stabilization", "scale_down_stabilization", "scale_up", "scale_down", "scale_up_select",
                 "scale_down_select", "scale_up_tolerance", "scale_down_tolerance")
#: What only KEDA's 0 <-> 1 scaling reads (with ``keda = false`` they keep their defaults).
KEDA_KEYS = ("activation", "cooldown", "initial_cooldown", "fallback_replicas", "fallback_failures",
             "fallback_behavior")
#: A series that may vanish with the workers (qsim.autoscale.nulls): written only when not at their defaults.
NULL_KEYS = ("metric_from", "ignore_null", "fallback_replicas", "fallback_failures", "fallback_behavior")
#: How Prometheus shows the metric (qsim.autoscale.observe): written only when not at their defaults.
READ_KEYS = ("metric_lag", "p95_buckets")
#: Keys written only when they differ from their defaults (older scenarios' tables and outputs stay as they were).
QUIET_KEYS = NULL_KEYS + READ_KEYS
#: deploy/kubernetes/keda-scaledobject.yaml: one pod per 120 s.
QSIM_SCALE_DOWN = (ScalePolicySpec(type="pods", value=1, period=120.0),)


@dataclass(frozen=True)
class Param:
    """A policy parameter: its name, kind (number | integer | choice | slo | rules | bool | floors | timezone),
    default and bounds.

    A ``number`` whose default is None may be left out (it then follows another parameter)."""

    name: str
    kind: str
    default: Any = REQUIRED
    low: float = 0.0
    strict: bool = False
    choices: tuple[str, ...] = ()


def _param(kind: str, default: Any = REQUIRED, *, low: float = 0.0, strict: bool = False,
           choices: tuple[str, ...] = ()) -> Any:
    """A policy parameter's field: its default (none when ``REQUIRED``) and, as metadata, how the TOML parser
    reads it (:class:`Param`)."""
    meta = {"param": (kind, low, strict, choices)}
    return field(metadata=meta) if default is REQUIRED else field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class _Trigger:
    """The HPA's metric (``target`` REQUIRED for ``hpa``; None where the trigger is optional)."""

    metric: str = _param("choice", "list_length", choices=HPA_METRICS)
    target: float | None = _param("number", strict=True)
    metric_type: str | None = _param("choice", None, choices=METRIC_TYPES)


@dataclass(frozen=True, kw_only=True)
class _Behaviour:
    """An HPA's behaviour, KEDA's 0 <-> 1 scaling and a series that may vanish: the keys of every HPA-like
    policy."""

    tolerance: float = _param("number", 0.1)
    window: float = _param("number", 60.0, strict=True)
    scale_up_stabilization: float = _param("number", 0.0)
    scale_down_stabilization: float = _param("number", 300.0)
    scale_up: tuple[ScalePolicySpec, ...] = _param("rules", DEFAULT_SCALE_UP)
    scale_down: tuple[ScalePolicySpec, ...] = _param("rules", DEFAULT_SCALE_DOWN)
    scale_up_select: str = _param("choice", "max", choices=SELECTS)
    scale_down_select: str = _param("choice", "max", choices=SELECTS)
    scale_up_tolerance: float | None = _param("number", None)
    scale_down_tolerance: float | None = _param("number", None)
    sync: float = _param("number", DEFAULT_SYNC, strict=True)
    behavior: bool = _param("bool", True)
    keda: bool = _param("bool", True)
    activation: float = _param("number", 0.0)
    cooldown: float = _param("number", 300.0)
    initial_cooldown: float = _param("number", 0.0)
    metric_from: str = _param("choice", "queue", choices=METRIC_FROM)
    ignore_null: bool = _param("bool", True)
    fallback_replicas: int | None = _param("integer", None)
    fallback_failures: int = _param("integer", 3)
    fallback_behavior: str = _param("choice", "static", choices=FALLBACK_BEHAVIORS)
    metric_lag: float = _param("number", 0.0)
    p95_buckets: bool = _param("bool", False)

    def check(self) -> tuple[str, str] | None:
        """What is wrong with the behaviour keys, as ``(key, what)``, or None."""
        p = self.__dict__
        defaults = {x.name: x.default for x in fields(self)}
        for off, keys, why in (("behavior", BEHAVIOR_KEYS, "an HPA without behavior has Kubernetes' fixed rules"),
                               ("keda", KEDA_KEYS, "a plain HPA has no KEDA activation, cooldown or fallback")):
            changed = [k for k in keys if p[off] is False and _differs(p[k], defaults[k])]
            if changed:
                return changed[0], f"needs {off} = true ({why}), got {_shown(p[changed[0]])}"
        wrong = _null_problem(p, defaults)
        if wrong is not None:
            return wrong
        for way in ("up", "down"):
            if not p[f"scale_{way}"] and p[f"scale_{way}_select"] != "disabled":
                return f"scale_{way}", f"must list at least one scaling policy (or set scale_{way}_select = \"disabled\")"
        return None


@dataclass(frozen=True, kw_only=True)
class _Reactive(_Behaviour, _Trigger):
    """The HPA's keys: its metric and behaviour, and the advisor's SLO (for ``recommended_workers``)."""

    slo: str | None = _param("slo", None)

    def __post_init__(self) -> None:
        if self.metric_type is None and isinstance(self.metric, str):
            object.__setattr__(self, "metric_type", default_metric_type(self.metric))

    def check(self) -> tuple[str, str] | None:
        if self.target is not None and self.metric == "recommended_workers" and not self.slo:
            return "slo", "is required for metric recommended_workers (the advisor's SLO)"
        if self.slo and (self.target is None or self.metric != "recommended_workers"):
            return "slo", (f"is the advisor's SLO, read only by a trigger on metric recommended_workers (this one "
                           f"{'has no trigger' if self.target is None else f'scales on {self.metric}'}); leave it "
                           f"out, or use policy \"qsim\", got {self.slo!r}")
        if self.fallback_replicas is not None and self.target is not None and self.metric_type == "Value":
            return "fallback_replicas", ("needs metric_type = \"AverageValue\": KEDA applies a fallback only to "
                                         "AverageValue triggers (for a Value one it turns it off), got "
                                         f"{self.fallback_replicas}")
        if self.p95_buckets and (self.target is None or self.metric != "p95_wait"):
            return "p95_buckets", (f"reads the p95 wait from the histogram's buckets, so it needs metric p95_wait "
                                   f"(this one {'has no trigger' if self.target is None else f'scales on {self.metric}'})"
                                   ", got true")
        return super().check()


@dataclass(frozen=True, kw_only=True)
class HpaSpec(_Reactive):
    """``policy = "hpa"``: a KEDA-driven HPA on one metric (:mod:`qsim.autoscale.hpa`)."""

    policy: ClassVar[str] = "hpa"
    target: float | None = _param("number", strict=True)


@dataclass(frozen=True, kw_only=True)
class StepSpec:
    """``policy = "step"``: steps on queue latency (:mod:`qsim.autoscale.step`)."""

    policy: ClassVar[str] = "step"
    metric: str = _param("choice", "oldest_age", choices=STEP_METRICS)
    up_when: float = _param("number")
    down_when: float = _param("number")
    step: int = _param("integer", 1, low=1)
    up_delay: float = _param("number", 60.0)
    down_delay: float = _param("number", 600.0)
    window: float = _param("number", 60.0, strict=True)

    def check(self) -> tuple[str, str] | None:
        """What is wrong, as ``(key, what)``, or None."""
        if not self.down_when < self.up_when:
            return "down_when", (f"must be < up_when ({plain(self.up_when)}): between the two the step policy holds "
                                 f"its count, got {plain(self.down_when)}")
        return None


@dataclass(frozen=True, kw_only=True)
class TargetTrackingSpec:
    """``policy = "target-tracking"``: backlog per worker (:mod:`qsim.autoscale.tracking`)."""

    policy: ClassVar[str] = "target-tracking"
    acceptable_latency: float = _param("number", strict=True)
    window: float = _param("number", 60.0, strict=True)
    scale_out_cooldown: float = _param("number", 60.0)
    scale_in_cooldown: float = _param("number", 300.0)

    def check(self) -> tuple[str, str] | None:
        """What is wrong, as ``(key, what)``, or None (the parameters' bounds say it all)."""
        return None


@dataclass(frozen=True, kw_only=True)
class _Slo:
    slo: str = _param("slo")


@dataclass(frozen=True, kw_only=True)
class QsimSpec(_Behaviour, _Slo):
    """``policy = "qsim"``: an HPA on ``qsim advise``'s recommendation, with the behaviour of
    ``deploy/kubernetes/keda-scaledobject.yaml``."""

    policy: ClassVar[str] = "qsim"
    window: float = _param("number", 900.0, strict=True)
    scale_down_stabilization: float = _param("number", 600.0)
    scale_down: tuple[ScalePolicySpec, ...] = _param("rules", QSIM_SCALE_DOWN)


@dataclass(frozen=True, kw_only=True)
class _Floors:
    floors: tuple[FloorSpec, ...] = _param("floors")
    timezone: str = _param("timezone", "Etc/UTC")


@dataclass(frozen=True, kw_only=True)
class ScheduleSpec(_Reactive, _Floors):
    """``policy = "schedule"``: replica floors by the clock beside an optional HPA trigger
    (:mod:`qsim.autoscale.schedule`)."""

    policy: ClassVar[str] = "schedule"
    target: float | None = _param("number", None, strict=True)

    def check(self) -> tuple[str, str] | None:
        wrong = super().check()
        if wrong is not None:
            return wrong
        floors = self.floors
        if not isinstance(floors, (tuple, list)) or not floors:
            return "floors", "must list at least one floor {start = \"HH:MM\", end = \"HH:MM\", replicas = N}"
        for i, f in enumerate(floors):
            if not isinstance(f, FloorSpec):
                return f"floors[{i}]", f"must be a FloorSpec (start, end, replicas), got {f!r}"
        if not isinstance(self.timezone, str) or not _known_zone(self.timezone):
            return "timezone", f"must be an IANA time zone like \"Europe/Paris\" or \"Etc/UTC\", got {self.timezone!r}"
        return None


@dataclass(frozen=True, kw_only=True)
class _Lead:
    lead: float | None = _param("number", None)
    utilization: float = _param("number", 0.8, strict=True)


@dataclass(frozen=True, kw_only=True)
class PredictiveSpec(_Reactive, _Lead):
    """``policy = "predictive"``: floors raised ``lead`` s ahead of the scenario's rate profile beside an
    optional HPA trigger (:mod:`qsim.autoscale.predictive`); ``lead`` None: the cold start's mean."""

    policy: ClassVar[str] = "predictive"
    target: float | None = _param("number", None, strict=True)

    def check(self) -> tuple[str, str] | None:
        wrong = super().check()
        if wrong is not None:
            return wrong
        if self.lead is not None and not (isinstance(self.lead, (int, float)) and self.lead >= 0):
            return "lead", f"must be >= 0 s, got {self.lead!r}"
        if not 0 < self.utilization <= 1:
            return "utilization", f"must be in (0, 1] (the share of the floor's slots the load fills), got " \
                                  f"{plain(self.utilization)}"
        return None


#: One typed spec per policy (a tagged union on ``policy``): its parameters, defaults filled in.
PolicySpec = HpaSpec | StepSpec | TargetTrackingSpec | QsimSpec | ScheduleSpec | PredictiveSpec
#: The spec class of each policy, in the order the policies are listed.
POLICY_SPECS: dict[str, type[PolicySpec]] = {
    c.policy: c for c in (HpaSpec, StepSpec, TargetTrackingSpec, QsimSpec, ScheduleSpec, PredictiveSpec)}


def _params_of(cls: type[PolicySpec]) -> tuple[Param, ...]:
    out = []
    for f in fields(cls):
        kind, low, strict, choices = f.metadata["param"]
        out.append(Param(f.name, kind, REQUIRED if f.default is MISSING else f.default, low, strict, choices))
    return tuple(out)


#: Every policy's parameters, in the order they are written (read from its spec class).
POLICY_PARAMS: dict[str, tuple[Param, ...]] = {policy: _params_of(cls) for policy, cls in POLICY_SPECS.items()}
#: The policies, in the order they are listed.
AUTOSCALE_POLICIES = tuple(POLICY_SPECS)
#: Keys every autoscaler has, whatever its policy.
COMMON_KEYS = ("pool", "min", "max", "start_delay", "grace", "poll", "flap_window", "policy")
#: Every key an ``[[autoscalers]]`` table may hold, in the order they are written.
AUTOSCALER_KEYS = COMMON_KEYS + tuple(dict.fromkeys(p.name for ps in POLICY_PARAMS.values() for p in ps))


@dataclass(frozen=True, kw_only=True)
class AutoscalerSpec:
    """A pool's autoscaler: bounds, cold start, grace, poll, and a policy with its parameters.

    The parameters are given flat (the TOML table's keys, every policy's: the
    public constructor); those of the policy left None take their defaults, those
    of other policies must be None. :attr:`law` is the policy's typed spec
    (:data:`PolicySpec`), made and checked once here; code reads that.

    Raises:
        ScenarioError: an unknown policy, ``min > max``, a parameter of another
            policy, or a required one missing.
    """

    pool: str
    min: int = 1
    max: int = 100
    start_delay: dists.Distribution = field(default_factory=lambda: dists.Constant(mean=0.0))
    grace: float = 30.0
    poll: float = 30.0
    flap_window: float = 600.0
    policy: str = "hpa"
    metric: str | None = None
    target: float | None = None
    metric_type: str | None = None
    tolerance: float | None = None
    window: float | None = None
    scale_up_stabilization: float | None = None
    scale_down_stabilization: float | None = None
    scale_up: tuple[ScalePolicySpec, ...] | None = None
    scale_down: tuple[ScalePolicySpec, ...] | None = None
    scale_up_select: str | None = None
    scale_down_select: str | None = None
    scale_up_tolerance: float | None = None
    scale_down_tolerance: float | None = None
    sync: float | None = None
    behavior: bool | None = None
    keda: bool | None = None
    activation: float | None = None
    cooldown: float | None = None
    initial_cooldown: float | None = None
    metric_from: str | None = None
    ignore_null: bool | None = None
    fallback_replicas: int | None = None
    fallback_failures: int | None = None
    fallback_behavior: str | None = None
    metric_lag: float | None = None
    p95_buckets: bool | None = None
    slo: str | None = None
    up_when: float | None = None
    down_when: float | None = None
    step: int | None = None
    up_delay: float | None = None
    down_delay: float | None = None
    acceptable_latency: float | None = None
    scale_out_cooldown: float | None = None
    scale_in_cooldown: float | None = None
    floors: tuple[FloorSpec, ...] | None = None
    timezone: str | None = None
    lead: float | None = None
    utilization: float | None = None

    def __post_init__(self) -> None:
        for p in POLICY_PARAMS.get(self.policy, ()):  # a quiet key at its default is one left out: one spelling
            if p.name in QUIET_KEYS and getattr(self, p.name) is not None and getattr(self, p.name) == p.default:
                object.__setattr__(self, p.name, None)
        given = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in COMMON_KEYS}
        law = policy_spec(self.policy, given, low=self.min, high=self.max)
        if isinstance(law, tuple):
            raise ScenarioError(f"{law[0]} {law[1]}")
        if isinstance(law, PredictiveSpec) and law.lead is None:
            law = dataclasses.replace(law, lead=float(self.start_delay.mean))
        object.__setattr__(self, "_law", law)  # not a field: built once, from the fields

    @property
    def law(self) -> PolicySpec:
        """The policy's typed spec: its parameters, defaults filled in (``metric_type`` derived from ``metric``;
        a predictive policy's ``lead`` from the cold start's mean), checked once when this spec was made."""
        law: PolicySpec = self.__dict__["_law"]
        return law

    def params(self) -> dict[str, Any]:
        """:attr:`law` as a dict, parameter name -> value."""
        return {f.name: getattr(self.law, f.name) for f in fields(self.law)}

    def filled(self) -> dict[str, Any]:
        """Keyword arguments for an equal spec with every parameter of its policy given (those of
        :data:`QUIET_KEYS` only when they differ from their defaults)."""
        defaults = {p.name: p.default for p in POLICY_PARAMS[self.policy]}
        return {"policy": self.policy, **{k: v for k, v in self.params().items()
                                          if v is not None and (k not in QUIET_KEYS or v != defaults[k])}}


def owner(name: str) -> str:
    """The policies a parameter belongs to, e.g. ``step`` or ``hpa or qsim``."""
    return " or ".join(p for p, params in POLICY_PARAMS.items() if any(x.name == name for x in params))


def _filled(policy: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The policy's parameters: those given (not None), else their defaults (``REQUIRED`` where there is none)."""
    return {p.name: p.default if given.get(p.name) is None else given[p.name] for p in POLICY_PARAMS[policy]}


def _differs(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return [_rule(r) for r in value] != [_rule(r) for r in default]
    return bool(value != default)


def _rule(r: Any) -> tuple[Any, ...]:
    return (r["type"], r["value"], float(r["period"])) if isinstance(r, Mapping) else (r.type, r.value, float(r.period))


def _shown(value: Any) -> str:
    return plain(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def problem(policy: str, given: Mapping[str, Any], *, low: int, high: int) -> tuple[str, str] | None:
    """What is wrong with an autoscaler, as ``(key, what)``, or None: the one check of its policy and parameters.

    The TOML parser (which adds the table's place) and :class:`AutoscalerSpec` (built in Python) both run it.
    ``given``: the parameters other than :data:`COMMON_KEYS`, None (or absent) when not given; ``low``,
    ``high``: the replica bounds.
    """
    out = policy_spec(policy, given, low=low, high=high)
    return out if isinstance(out, tuple) else None


def policy_spec(policy: str, given: Mapping[str, Any], *, low: int, high: int) -> PolicySpec | tuple[str, str]:
    """The policy's typed spec (its parameters, defaults filled in), or what is wrong as ``(key, what)``:
    the common checks here, the policy's own in its spec's ``check``."""
    if policy not in POLICY_SPECS:
        return "policy", f"must be one of {', '.join(AUTOSCALE_POLICIES)}, got {policy!r}"
    for key, value in given.items():
        if key not in COMMON_KEYS and all(p.name != key for p in POLICY_PARAMS[policy]) and value is not None:
            return key, f"is a parameter of policy {owner(key)}, not {policy}"
    if low < 0:
        return "min", f"must be >= 0, got {low}"
    if low > high:
        return "min", f"must be <= max ({high}), got {low}"
    p = _filled(policy, given)
    missing = next((name for name, value in p.items() if value is REQUIRED), None)
    if missing is not None:
        return missing, f"is required for policy {policy}"
    spec = POLICY_SPECS[policy](**p)
    wrong = spec.check()
    return spec if wrong is None else wrong


def _null_problem(p: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[str, str] | None:
    """What is wrong with the keys of a metric that may vanish (``metric_from``, ``ignore_null``, ``fallback_*``)."""
    if p["fallback_replicas"] is not None and p["fallback_replicas"] < 0:
        return "fallback_replicas", f"must be >= 0 (KEDA's fallback.replicas), got {p['fallback_replicas']!r}"
    if p["fallback_failures"] < 0:
        return "fallback_failures", f"must be >= 0 (KEDA's fallback.failureThreshold), got {p['fallback_failures']!r}"
    if p["fallback_replicas"] is None and p["fallback_behavior"] != defaults["fallback_behavior"]:
        return "fallback_behavior", ("needs fallback_replicas (without it there is no fallback), got "
                                     f"{p['fallback_behavior']!r}")
    if p["fallback_replicas"] is None and p["fallback_failures"] != defaults["fallback_failures"]:
        return "fallback_failures", ("needs fallback_replicas (without it there is no fallback), got "
                                     f"{p['fallback_failures']!r}")
    if p.get("keda") is False and p["metric_from"] == "workers" and p["ignore_null"]:
        return "ignore_null", ("must be false with keda = false and metric_from = \"workers\": a plain HPA has no "
                               "ignoreNullValues, a series that is not there is an error it does not scale on")
    return None


def _known_zone(name: str) -> bool:
    """Whether ``name`` is a time zone of the IANA database (as KEDA's ``time.LoadLocation`` takes it)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
