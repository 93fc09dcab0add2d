"""``[[autoscalers]]``: a pool's autoscaler in the Scenario, its policy and the policy's parameters.

One table per autoscaled pool (at most one per pool)::

    [[autoscalers]]
    pool = "p"
    min = 1                      # replicas; 0 lets KEDA scale to zero (hpa, qsim)
    max = 20
    start_delay = { kind = "constant", mean = 30.0 }   # cold start: any service-time distribution
    grace = 30.0                 # scale-down: SIGTERM, drain up to grace s, then cut off (as a sigterm event)
    poll = 30.0                  # s between decisions
    flap_window = 600.0          # a reversal less than this many s after the previous scale event is a flap
    policy = "hpa"               # hpa | step | target-tracking | qsim
    metric = "list_length"       # and the policy's parameters (below)
    target = 8

Each policy's parameters and defaults are :data:`POLICY_PARAMS` (a parameter
of another policy is an error; ``REQUIRED`` ones must be given):

- ``hpa``: ``metric`` (list_length | oldest_age | p95_wait | recommended_workers),
  ``target`` (per replica for ``AverageValue``), ``metric_type`` (AverageValue for
  list_length and recommended_workers, else Value), ``tolerance``, ``window``
  (s of the p95 and the measured load), ``scale_up_stabilization``,
  ``scale_down_stabilization``, ``scale_up`` / ``scale_down`` (lists of ``{type =
  "pods" | "percent", value, period}``), ``scale_up_select`` / ``scale_down_select``
  (max | min | disabled), KEDA's ``activation`` and ``cooldown`` (with ``min = 0``),
  and ``slo`` (required for ``recommended_workers``: the advisor's SLO);
- ``step``: ``metric`` (oldest_age | p95_wait), ``up_when``, ``down_when`` (s),
  ``step``, ``up_delay``, ``down_delay``, ``window``;
- ``target-tracking``: ``acceptable_latency`` (s), ``window``, ``scale_out_cooldown``,
  ``scale_in_cooldown``;
- ``qsim``: ``slo`` (``qsim advise --slo``), ``window`` (the advice window, 15 min),
  and the HPA behaviour of ``deploy/kubernetes/keda-scaledobject.yaml`` (scale down
  one pod per 120 s after a 600 s window), every key of it adjustable as for ``hpa``.

The dataclasses here are part of the Scenario tree; :mod:`qsim.scenario`
parses and checks the tables, :mod:`qsim.autoscale.build` makes the controllers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from qsim import dists
from qsim.errors import ScenarioError

__all__ = ["AutoscalerSpec", "ScalePolicySpec", "Param", "POLICY_PARAMS", "AUTOSCALE_POLICIES", "HPA_METRICS",
           "STEP_METRICS", "METRIC_TYPES", "SELECTS", "SCALE_POLICY_TYPES", "REQUIRED", "COMMON_KEYS",
           "DEFAULT_SCALE_UP", "DEFAULT_SCALE_DOWN", "QSIM_SCALE_DOWN", "SLO_SHAPE", "default_metric_type", "owner",
           "AUTOSCALER_KEYS"]

AUTOSCALE_POLICIES = ("hpa", "step", "target-tracking", "qsim")
HPA_METRICS = ("list_length", "oldest_age", "p95_wait", "recommended_workers")
STEP_METRICS = ("oldest_age", "p95_wait")
METRIC_TYPES = ("AverageValue", "Value")
SELECTS = ("max", "min", "disabled")
SCALE_POLICY_TYPES = ("pods", "percent")
#: An SLO's shape (``p95_wait<=2``); its metric is checked where it is used (qsim.analysis.plan).
SLO_SHAPE = re.compile(r"^\s*[a-z0-9_]+(?:\[[^\]]+\])?\s*(?:<=|>=|<|>)\s*[-+0-9.eE]+\s*$")


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: The default of a parameter that must be given.
REQUIRED: Any = _Required()


def default_metric_type(metric: str) -> str:
    """``AverageValue`` for totals shared by the replicas (list length, recommended workers), else ``Value``."""
    return "AverageValue" if metric in ("list_length", "recommended_workers") else "Value"


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
#: deploy/kubernetes/keda-scaledobject.yaml: one pod per 120 s.
QSIM_SCALE_DOWN = (ScalePolicySpec(type="pods", value=1, period=120.0),)


@dataclass(frozen=True)
class Param:
    """A policy parameter: its name, kind (number | integer | choice | slo | rules), default and bounds."""

    name: str
    kind: str
    default: Any = REQUIRED
    low: float = 0.0
    strict: bool = False
    choices: tuple[str, ...] = ()


def _hpa_like(*, window: float, stabilization: float, scale_down: tuple[ScalePolicySpec, ...]) -> tuple[Param, ...]:
    return (Param("tolerance", "number", 0.1), Param("window", "number", window, strict=True),
            Param("scale_up_stabilization", "number", 0.0), Param("scale_down_stabilization", "number", stabilization),
            Param("scale_up", "rules", DEFAULT_SCALE_UP), Param("scale_down", "rules", scale_down),
            Param("scale_up_select", "choice", "max", choices=SELECTS),
            Param("scale_down_select", "choice", "max", choices=SELECTS),
            Param("activation", "number", 0.0), Param("cooldown", "number", 300.0))


#: Every policy's parameters, in the order they are written.
POLICY_PARAMS: dict[str, tuple[Param, ...]] = {
    "hpa": (Param("metric", "choice", "list_length", choices=HPA_METRICS), Param("target", "number", strict=True),
            Param("metric_type", "choice", None, choices=METRIC_TYPES),
            *_hpa_like(window=60.0, stabilization=300.0, scale_down=DEFAULT_SCALE_DOWN),
            Param("slo", "slo", None)),
    "step": (Param("metric", "choice", "oldest_age", choices=STEP_METRICS), Param("up_when", "number"),
             Param("down_when", "number"), Param("step", "integer", 1, low=1), Param("up_delay", "number", 60.0),
             Param("down_delay", "number", 600.0), Param("window", "number", 60.0, strict=True)),
    "target-tracking": (Param("acceptable_latency", "number", strict=True), Param("window", "number", 60.0, strict=True),
                        Param("scale_out_cooldown", "number", 60.0), Param("scale_in_cooldown", "number", 300.0)),
    "qsim": (Param("slo", "slo"), *_hpa_like(window=900.0, stabilization=600.0, scale_down=QSIM_SCALE_DOWN)),
}
#: Keys every autoscaler has, whatever its policy.
COMMON_KEYS = ("pool", "min", "max", "start_delay", "grace", "poll", "flap_window", "policy")
#: Every key an ``[[autoscalers]]`` table may hold, in the order they are written.
AUTOSCALER_KEYS = COMMON_KEYS + tuple(dict.fromkeys(p.name for ps in POLICY_PARAMS.values() for p in ps))


@dataclass(frozen=True, kw_only=True)
class AutoscalerSpec:
    """A pool's autoscaler: bounds, cold start, grace, poll, and a policy with its parameters.

    Parameters of the policy left None take their :data:`POLICY_PARAMS`
    default (see :meth:`params`); parameters of other policies must be None.

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
    activation: float | None = None
    cooldown: float | None = None
    slo: str | None = None
    up_when: float | None = None
    down_when: float | None = None
    step: int | None = None
    up_delay: float | None = None
    down_delay: float | None = None
    acceptable_latency: float | None = None
    scale_out_cooldown: float | None = None
    scale_in_cooldown: float | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICY_PARAMS:
            raise ScenarioError(f"policy must be one of {', '.join(AUTOSCALE_POLICIES)}, got {self.policy!r}")
        if not 0 <= self.min <= self.max:
            raise ScenarioError(f"min must be <= max ({self.max}) and >= 0, got {self.min}")
        mine = {p.name for p in POLICY_PARAMS[self.policy]}
        for f in fields(self):
            if f.name not in COMMON_KEYS and f.name not in mine and getattr(self, f.name) is not None:
                raise ScenarioError(f"{f.name} is a parameter of policy {owner(f.name)}, not {self.policy}")
        self.params()  # required ones are there

    def params(self) -> dict[str, Any]:
        """The policy's parameters, defaults filled in (``metric_type`` derived from ``metric``)."""
        out: dict[str, Any] = {}
        for p in POLICY_PARAMS[self.policy]:
            value = getattr(self, p.name)
            if value is None:
                if p.default is REQUIRED:
                    raise ScenarioError(f"{p.name} is required for policy {self.policy}")
                value = p.default
            out[p.name] = value
        if "metric_type" in out and out["metric_type"] is None:
            out["metric_type"] = default_metric_type(out["metric"])
        if self.policy == "hpa" and out["metric"] == "recommended_workers" and not out["slo"]:
            raise ScenarioError("slo is required for metric recommended_workers (the advisor's SLO)")
        return out

    def filled(self) -> dict[str, Any]:
        """Keyword arguments for an equal spec with every parameter of its policy given."""
        return {"policy": self.policy, **{k: v for k, v in self.params().items() if v is not None}}


def owner(name: str) -> str:
    """The policies a parameter belongs to, e.g. ``step`` or ``hpa or qsim``."""
    return " or ".join(p for p, params in POLICY_PARAMS.items() if any(x.name == name for x in params))
