"""A controller from a scenario's ``[[autoscalers]]`` table (:class:`~qsim.scenario.AutoscalerSpec`).

The ``qsim`` policy (and an ``hpa`` on ``recommended_workers``) scales on
``qsim advise``'s recommendation; the caller passes it in as ``recommend``
(:class:`qsim.advise.load.LoadAdvisor` for a measured load, or a real
advisor's gauge on the engine): policy code never imports the planner.
"""

from __future__ import annotations

from qsim.autoscale.hpa import HPA, Recommend, ScalingRules
from qsim.autoscale.step import Step
from qsim.autoscale.tracking import TargetTracking
from qsim.scenario import AutoscalerSpec, PoolSpec

__all__ = ["controller", "needs_advice", "metric_window", "Controller"]

Controller = HPA | Step | TargetTracking


def needs_advice(spec: AutoscalerSpec) -> bool:
    """Whether the autoscaler scales on ``qsim advise``'s recommendation."""
    return spec.policy == "qsim" or (spec.policy == "hpa" and spec.params()["metric"] == "recommended_workers")


def metric_window(spec: AutoscalerSpec) -> float:
    """Seconds of the window its p95 wait, arrival rate and service time are measured over."""
    return float(spec.params()["window"])


def controller(spec: AutoscalerSpec, pool: PoolSpec, *, recommend: Recommend | None = None) -> Controller:
    """The controller for ``spec`` on ``pool`` (a fresh one: controllers keep state between polls).

    Raises:
        ValueError: the policy scales on the recommendation (:func:`needs_advice`) and ``recommend`` is None.
    """
    p = spec.params()
    if needs_advice(spec) and recommend is None:
        raise ValueError(f"the {spec.policy} autoscaler of pool {spec.pool!r} scales on qsim advise's "
                         "recommendation: pass recommend (e.g. qsim.advise.load.LoadAdvisor)")
    if spec.policy in ("hpa", "qsim"):
        return HPA(min=spec.min, max=spec.max, target=1.0 if spec.policy == "qsim" else p["target"],
                   metric="recommended_workers" if spec.policy == "qsim" else p["metric"],
                   metric_type="AverageValue" if spec.policy == "qsim" else p["metric_type"],
                   tolerance=p["tolerance"],
                   scale_up=ScalingRules(policies=p["scale_up"], select=p["scale_up_select"],
                                         stabilization=p["scale_up_stabilization"]),
                   scale_down=ScalingRules(policies=p["scale_down"], select=p["scale_down_select"],
                                           stabilization=p["scale_down_stabilization"]),
                   activation=p["activation"], cooldown=p["cooldown"], recommend=recommend)
    if spec.policy == "step":
        return Step(min=spec.min, max=spec.max, up_when=p["up_when"], down_when=p["down_when"], step=p["step"],
                    up_delay=p["up_delay"], down_delay=p["down_delay"], metric=p["metric"])
    return TargetTracking(min=spec.min, max=spec.max, acceptable_latency=p["acceptable_latency"],
                          concurrency=pool.concurrency, scale_out_cooldown=p["scale_out_cooldown"],
                          scale_in_cooldown=p["scale_in_cooldown"])
