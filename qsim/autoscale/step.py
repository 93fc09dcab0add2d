"""The step policy on queue latency (the Judoscale / HireFire style).

At each poll the controller reads the queue's latency (``oldest_age``: how long
the oldest waiting job has waited, or ``p95_wait``: the p95 wait of the jobs
started in the last window) and:

- **scales up** by ``step`` workers (up to ``max``) when the latency is above
  ``up_when`` and at least ``up_delay`` seconds have passed since its last
  scale-up;
- **scales down** by ``step`` workers (down to ``min``) when the latency is
  below ``down_when`` and at least ``down_delay`` seconds have passed since its
  last scale event of either direction;
- else holds. Replicas outside ``[min, max]`` are brought inside first.

Before the first scale event no delay applies. A short ``down_delay`` removes
workers as soon as the backlog is gone, and adds them back a poll later: the
flapping the delays are there to prevent.
"""

from __future__ import annotations

import math

from qsim.autoscale.observe import Observation
from qsim.spec.autoscaler import STEP_METRICS, StepSpec

__all__ = ["Step", "STEP_METRICS"]


class Step:
    """The step policy (see the module docstring); :meth:`decide` per poll."""

    def __init__(self, *, min: int, max: int, up_when: float, down_when: float, step: int = 1,
                 up_delay: float = 60.0, down_delay: float = 600.0, metric: str = "oldest_age") -> None:
        if not 0 <= min <= max:
            raise ValueError(f"need 0 <= min <= max, got min={min}, max={max}")
        if not down_when < up_when:
            raise ValueError(f"down_when must be < up_when, got down_when={down_when}, up_when={up_when}")
        if step < 1:
            raise ValueError(f"step must be >= 1, got {step!r}")
        if metric not in STEP_METRICS:
            raise ValueError(f"metric must be one of {', '.join(STEP_METRICS)}, got {metric!r}")
        self.min, self.max, self.up_when, self.down_when = min, max, up_when, down_when
        self.size, self.up_delay, self.down_delay, self.metric = step, up_delay, down_delay, metric
        self.last_up = self.last_change = -math.inf
        self.needs = frozenset({metric})

    @classmethod
    def from_spec(cls, p: StepSpec, *, min: int, max: int) -> Step:
        """The law for one ``[[autoscalers]]`` table: ``p`` is its policy's typed spec
        (:attr:`qsim.spec.autoscaler.AutoscalerSpec.law`); a new parameter of the policy is read here."""
        return cls(min=min, max=max, up_when=p.up_when, down_when=p.down_when, step=p.step,
                   up_delay=p.up_delay, down_delay=p.down_delay, metric=p.metric)

    def decide(self, obs: Observation) -> int:
        """The replica count after this poll."""
        latency = obs.oldest_age if self.metric == "oldest_age" else (obs.p95_wait or 0.0)
        return self.step(obs.now, obs.workers, latency)

    def step(self, now: float, current: int, latency: float) -> int:
        """One poll with the queue's latency at ``latency`` seconds."""
        if current < self.min or current > self.max:
            desired = min(max(current, self.min), self.max)
        elif latency > self.up_when and current < self.max and now - self.last_up >= self.up_delay:
            desired = min(current + self.size, self.max)
        elif latency < self.down_when and current > self.min and now - self.last_change >= self.down_delay:
            desired = max(current - self.size, self.min)
        else:
            return current
        if desired > current:
            self.last_up = now
        self.last_change = now
        return desired
