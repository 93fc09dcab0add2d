"""What was fitted for one job type (:class:`TypeFit`), shared by the report and its plots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qsim.calibrate.arrivals import ArrivalFit
from qsim.calibrate.failures import FailureFit
from qsim.calibrate.service import ServiceFit
from qsim.spec.scenario import BackoffSpec

__all__ = ["TypeFit"]


@dataclass(frozen=True)
class TypeFit:
    """Everything fitted for one job type."""

    name: str
    queue: str
    priority: int
    attempts: int
    backoff: BackoffSpec
    timeout: float
    arrival: ArrivalFit
    service: ServiceFit
    failures: FailureFit
    jobs: int
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """This type's fits for the JSON report (``service``, ``ks`` and ``n`` at the top)."""
        return {**self.service.as_dict(), "jobs": self.jobs, "queue": self.queue, "priority": self.priority,
                "arrival": self.arrival.as_dict()["arrival"], "arrival_fit": self.arrival.as_dict(),
                "failures": self.failures.as_dict(), "attempts": self.attempts,
                "backoff": {"kind": self.backoff.kind, "delay": self.backoff.delay, "max": self.backoff.max,
                            "jitter": self.backoff.jitter},
                "timeout": self.timeout, "notes": list(self.notes)}
