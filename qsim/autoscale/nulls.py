"""A trigger's series that vanishes with the workers: KEDA's ``ignoreNullValues`` and ``fallback``.

qsim's workers export the queue's series (``qsim_queue_jobs``, the oldest
waiting age, the wait histogram, the advice of ``qsim worker --advise-slo``).
With ``metric_from = "workers"`` the autoscaler's trigger reads one of them,
and the read is **null** at a decision where the pool has **no ready
worker** (``Observation.ready == 0``: none running and taking work; those
starting and those draining export nothing here, and Prometheus' five
minutes of staleness are not modelled). ``metric_from = "queue"`` (Redis itself, the advisor
Deployment: always there) never reads null. A null read is, as KEDA's
prometheus scaler makes it:

- with ``ignore_null = true`` (``ignoreNullValues``, KEDA's default): the
  value 0, an ordinary read. A pool at zero then never activates on it;
- with ``ignore_null = false``: an **error**. The HPA makes no change at a
  sync whose metric errs (it still takes its first sight of the target);
  KEDA's check treats the trigger as inactive and does not scale to zero on
  an error (unless a fallback of 0 replicas is set). Without a fallback a
  pool at zero stays there.

**Fallback** (``fallback_replicas``, ``fallback_failures``,
``fallback_behavior``: KEDA's ``spec.fallback.replicas``, ``failureThreshold``
and ``behavior``).
KEDA counts the consecutive failed reads of the metric: one at each of its
polls (every ``poll`` s, whatever the replicas) and one at each HPA sync that
reads the metric (not while the HPA is disabled at zero replicas, nor when
the count is out of its bounds); a good read resets the count. Once the count
is **more than** ``fallback_failures``, a failed read gives the trigger as
active with the value ``target x R`` (an ``AverageValue`` target: the HPA's
proposal is then ``R``, through its tolerance, stabilisation and rate
limits), where ``R`` is, by ``fallback_behavior``: ``fallback_replicas``
(``static``, the default), the current replica count (``currentReplicas``),
the higher of the two (``currentReplicasIfHigher``) or the lower
(``currentReplicasIfLower``). So a pool at zero wakes: KEDA's
poll scales it 0 -> 1, and the HPA takes it to ``fallback_replicas`` while
no worker is ready. A ``Value`` target's fallback divides by the ready
replicas, none at a null read: KEDA cannot compute it, the read stays an
error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MetricReads"]

#: The replicas a fallback asks for, by KEDA's ``fallback.behavior``: f(current replicas, fallback.replicas).
_BEHAVIORS: dict[str, Callable[[int, int], int]] = {
    "static": lambda current, replicas: replicas,
    "currentReplicas": lambda current, replicas: current,
    "currentReplicasIfHigher": max,
    "currentReplicasIfLower": min,
}


@dataclass
class MetricReads:
    """Whether the trigger's series is there, and KEDA's count of failed reads (see the module docstring).

    Args:
        metric_from: ``queue`` or ``workers``.
        ignore_null: a null read is 0 (True) or an error (False).
        fallback_replicas: KEDA's ``fallback.replicas`` (None: no fallback).
        fallback_failures: KEDA's ``fallback.failureThreshold``.
        fallback_behavior: KEDA's ``fallback.behavior`` (static | currentReplicas | currentReplicasIfHigher |
            currentReplicasIfLower).
        average: the trigger's target is an ``AverageValue`` (a fallback can be computed with no ready replica).
    """

    metric_from: str = "queue"
    ignore_null: bool = True
    fallback_replicas: int | None = None
    fallback_failures: int = 3
    fallback_behavior: str = "static"
    average: bool = True
    failures: int = 0

    def __post_init__(self) -> None:
        if self.metric_from not in ("queue", "workers"):
            raise ValueError(f"metric_from must be queue or workers, got {self.metric_from!r}")
        if self.fallback_replicas is not None and self.fallback_replicas < 0:
            raise ValueError(f"fallback_replicas must be >= 0, got {self.fallback_replicas}")
        if self.fallback_behavior not in _BEHAVIORS:
            raise ValueError(f"fallback_behavior must be one of {', '.join(_BEHAVIORS)}, got {self.fallback_behavior!r}")
        if self.fallback_failures < 0:
            raise ValueError(f"fallback_failures must be >= 0, got {self.fallback_failures}")

    @property
    def may_fail(self) -> bool:
        """Whether a read can be an error (the series may vanish and nulls are not ignored)."""
        return self.metric_from == "workers" and not self.ignore_null

    @property
    def polls(self) -> bool:
        """Whether KEDA's polls count failures whatever the replicas (a fallback on a series that may fail)."""
        return self.may_fail and self.fallback_replicas is not None

    def null(self, ready: int) -> bool:
        """Whether a read now finds no series: it comes from the workers and none is ready."""
        return self.metric_from == "workers" and ready == 0

    def read(self) -> None:
        """A good read: the count of failures starts again."""
        self.failures = 0

    def failed(self, current: int) -> float | None:
        """A failed read with ``current`` replicas: counted; the fallback's value per target unit (the replicas
        ``fallback_behavior`` asks for) once the count is more than ``fallback_failures`` and the target is an
        AverageValue, else None (an error)."""
        self.failures += 1
        if self.fallback_replicas is None or not self.average or self.failures <= self.fallback_failures:
            return None
        return float(_BEHAVIORS[self.fallback_behavior](current, self.fallback_replicas))

    @property
    def holds(self) -> bool:
        """Whether KEDA leaves a failing, inactive target alone (no fallback, or one of > 0 replicas)."""
        return self.fallback_replicas != 0
