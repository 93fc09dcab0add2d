"""KEDA's scaling to and from zero: the ScaledObject executor's 0 <-> 1 decision at each ``pollingInterval``.

With ``min = 0`` KEDA, not the HPA, moves a target between zero and one
replica; it checks its triggers every ``pollingInterval`` (the autoscaler's
``poll``) and the HPA it creates works with ``minReplicas: 1`` in between.
At a check, as ``pkg/scaling/executor/scale_scaledobjects.go`` does:

- the trigger is **active** when its value is above the activation threshold
  (``value > activation``); an active trigger records the check's time as the
  last active time;
- active with no replica: one replica (``max(minReplicaCount, 1)``);
- inactive with replicas: zero once the cooldown has passed since the last
  active time (strictly: ``last + cooldown < now``) or, for a target never
  active, once ``initialCooldownPeriod`` has passed since the ScaledObject was
  created (created just before the first check: with the default of 0 a
  never-active target goes to zero at the first check);
- otherwise KEDA leaves the count to the HPA.

A trigger whose read failed (:mod:`qsim.autoscale.nulls`) is inactive; with
such an error KEDA neither scales an inactive target to zero nor marks an
active one with replicas as active (unless a fallback of 0 replicas is set).
"""

from __future__ import annotations

__all__ = ["KedaActivation"]


class KedaActivation:
    """KEDA's 0 <-> 1 scaling for one ScaledObject (see the module docstring).

    Args:
        activation: the trigger is active above this value.
        cooldown: ``cooldownPeriod`` (s).
        initial_cooldown: ``initialCooldownPeriod`` (s).
        max: ``maxReplicaCount`` (0: never scale from zero).
    """

    def __init__(self, *, activation: float = 0.0, cooldown: float = 300.0, initial_cooldown: float = 0.0,
                 max: int = 1) -> None:
        self.activation, self.cooldown, self.initial_cooldown, self.max = activation, cooldown, initial_cooldown, max
        self.created: float | None = None
        self.last_active: float | None = None

    def check(self, now: float, current: int, active: bool, *, error: bool = False) -> int | None:
        """The replica count KEDA sets at the check at ``now`` with the triggers ``active`` (one above its
        activation threshold) or not (None: it leaves the count to the HPA). ``error``: a trigger's read
        failed and KEDA holds the count (no fallback, or one of > 0 replicas): an active target with
        replicas is not marked active, an inactive one is not scaled to zero."""
        if self.created is None:
            self.created = now
        if active:
            if current == 0 or not error:
                self.last_active = now
            return (1 if self.max > 0 else 0) if current == 0 else None
        if current == 0 or error:
            return None
        if self.last_active is None:
            done = now - self.created >= self.initial_cooldown  # created just before its first check
        else:
            done = self.last_active + self.cooldown < now
        return 0 if done else None
