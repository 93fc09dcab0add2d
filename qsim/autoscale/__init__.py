"""Autoscaling policies as pure controllers: one decision per poll from what a real controller sees.

The same code decides in the model (:mod:`qsim.model.autoscaling`) and on the
real engine (:mod:`qsim.harness.autoscaling`): each poll the driver builds an
:class:`~qsim.autoscale.observe.Observation` (the pool's workers, its queues'
length, oldest job's age, recent p95 wait, arrival rate and service time) and
asks the controller for the replica count; a controller has no clock of its
own and never sees the run's future.

Policies (``[[autoscalers]] policy``):

- :mod:`~qsim.autoscale.hpa` — ``hpa``: the Kubernetes HPA algorithm (usage
  ratio with tolerance, stabilisation windows, scaling policies, or the fixed
  rules of an HPA without ``behavior``) every ``sync`` seconds, with KEDA's
  activation and cooldowns for 0 <-> 1 (:mod:`~qsim.autoscale.keda`) every ``poll``;
- :mod:`~qsim.autoscale.step` — ``step``: latency thresholds with up and down
  delays (Judoscale / HireFire);
- :mod:`~qsim.autoscale.tracking` — ``target-tracking``: backlog per worker
  against ``acceptable_latency / mean service`` (AWS);
- ``qsim``: the HPA on ``qsim advise``'s recommendation with the behaviour of
  ``deploy/kubernetes/keda-scaledobject.yaml`` (the recommendation comes from
  :mod:`qsim.advise`, passed in as a function);
- :mod:`~qsim.autoscale.schedule` — ``schedule``: time-of-day replica floors as
  KEDA ``cron`` triggers, combined by max with the HPA's own trigger;
- :mod:`~qsim.autoscale.predictive` — ``predictive``: those floors derived from
  the scenario's rate profile and raised ``lead`` seconds ahead.

:mod:`~qsim.autoscale.tally` keeps what the autoscaler did (worker-seconds,
scale events, flaps, cut jobs) for the Summary; :mod:`~qsim.autoscale.build`
makes a controller from a scenario's ``[[autoscalers]]`` table.
"""

from __future__ import annotations

from typing import Protocol

from qsim.autoscale.hpa import HPA, Recommend, ScalingRules
from qsim.autoscale.observe import Observation, WindowStats
from qsim.autoscale.schedule import Floors, Scheduled
from qsim.autoscale.step import Step
from qsim.autoscale.tally import Tally
from qsim.autoscale.tracking import TargetTracking

__all__ = ["Controller", "HPA", "Step", "TargetTracking", "Scheduled", "Floors", "ScalingRules", "Observation",
           "WindowStats", "Tally", "Recommend"]


class Controller(Protocol):
    """A policy: which metrics it reads, and its decision at each poll."""

    @property
    def needs(self) -> frozenset[str]:
        """The :data:`~qsim.autoscale.observe.METRICS` it reads (the driver measures only those)."""

    def decide(self, obs: Observation) -> int:
        """The replica count after the poll described by ``obs``."""
