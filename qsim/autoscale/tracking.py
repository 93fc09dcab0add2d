"""Target tracking on backlog per worker (the AWS "scale on an SQS queue" recipe).

The metric is the backlog per worker, ``list_length / workers``; its target
is what one worker clears within the acceptable latency,
``acceptable_latency x concurrency / mean_service``, with ``mean_service``
measured over the window (the run times of the attempts that ended in it).
The desired count is ``ceil(workers x metric / target) = ceil(list_length /
target)`` within ``[min, max]``:

- **scale out** to it at once whenever it is above the current count (the
  capacity added by a recent scale-out is already counted in the current
  count, so a further scale-out only adds what is still missing);
- **scale in** to it only when ``scale_in_cooldown`` seconds have passed since
  the last scale-in and ``scale_out_cooldown`` since the last scale-out.

With no attempt ended in the window (no measured service time) it holds.
"""

from __future__ import annotations

import math

from qsim.autoscale.observe import Observation
from qsim.spec.autoscaler import TargetTrackingSpec

__all__ = ["TargetTracking"]

_EPS = 1e-9


class TargetTracking:
    """Target tracking on backlog per worker (see the module docstring); :meth:`decide` per poll."""

    def __init__(self, *, min: int, max: int, acceptable_latency: float, concurrency: int = 1,
                 scale_out_cooldown: float = 60.0, scale_in_cooldown: float = 300.0) -> None:
        if not 0 <= min <= max:
            raise ValueError(f"need 0 <= min <= max, got min={min}, max={max}")
        if not acceptable_latency > 0:
            raise ValueError(f"acceptable_latency must be > 0, got {acceptable_latency!r}")
        self.min, self.max, self.acceptable_latency, self.concurrency = min, max, acceptable_latency, concurrency
        self.scale_out_cooldown, self.scale_in_cooldown = scale_out_cooldown, scale_in_cooldown
        self.last_out = self.last_in = -math.inf
        self.needs = frozenset({"list_length", "service"})

    @classmethod
    def from_spec(cls, p: TargetTrackingSpec, *, min: int, max: int, concurrency: int) -> TargetTracking:
        """The law for one ``[[autoscalers]]`` table: ``p`` is its policy's typed spec
        (:attr:`qsim.spec.autoscaler.AutoscalerSpec.law`); a new parameter of the policy is read here."""
        return cls(min=min, max=max, acceptable_latency=p.acceptable_latency, concurrency=concurrency,
                   scale_out_cooldown=p.scale_out_cooldown, scale_in_cooldown=p.scale_in_cooldown)

    def target(self, mean_service: float) -> float:
        """Backlog per worker that one worker clears within the acceptable latency."""
        return self.acceptable_latency * self.concurrency / mean_service

    def decide(self, obs: Observation) -> int:
        """The replica count after this poll."""
        return self.step(obs.now, obs.workers, obs.list_length, obs.mean_service)

    def step(self, now: float, current: int, backlog: int, mean_service: float | None) -> int:
        """One poll with ``backlog`` jobs waiting and ``mean_service`` measured (None: not measured)."""
        if current < self.min or current > self.max:
            return min(max(current, self.min), self.max)
        if mean_service is None or mean_service <= 0:
            return current
        x = backlog / self.target(mean_service)
        want = min(max(math.ceil(x - _EPS * max(1.0, x)), self.min), self.max)
        if want > current:
            self.last_out = now
            return want
        if (want < current and now - self.last_in >= self.scale_in_cooldown
                and now - self.last_out >= self.scale_out_cooldown):
            self.last_in = now
            return want
        return current
