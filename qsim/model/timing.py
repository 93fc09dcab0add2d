"""How long an attempt holds its slot: its service time, or ``fetch + min(service, timeout) + ack``.

In most runs an attempt holds its slot for its service time, and the core
uses the job table's ``service`` column as is. Engine overheads
(``[engine] fetch_overhead``, ``ack_overhead``) and per-type timeouts make
it differ: the slot is taken ``fetch_overhead`` before the handler starts,
the handler is stopped at ``timeout`` (``> 0``), and its result reaches
Redis ``ack_overhead`` after it returned. :class:`Timing` holds those three
and computes the hold column once (vectorised) and each later job's hold
(children, retries) with the same float operations, in the same order.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from qsim.spec.scenario import Scenario

__all__ = ["Timing"]


@dataclass(frozen=True)
class Timing:
    """Engine overheads and timeouts: what makes an attempt's hold differ from its service time."""

    fetch: float
    ack: float
    timeouts: tuple[float, ...]  # per job type, 0: none

    @classmethod
    def of(cls, scenario: Scenario, fetch: float | None = None, ack: float | None = None) -> Timing | None:
        """The scenario's timing, or None when every attempt holds its slot for its service time.

        ``fetch``/``ack``: the overheads to apply (default: the scalars of ``[engine]``; the model passes
        those of :func:`qsim.spec.offered_load.engine_overhead`, which reads ``overhead_by_load`` at its load).
        """
        eng = scenario.engine
        fetch = float(eng.fetch_overhead if fetch is None else fetch)
        ack = float(eng.ack_overhead if ack is None else ack)
        timeouts = tuple(float(j.timeout) for j in scenario.jobs)
        if fetch > 0 or ack > 0 or any(t > 0 for t in timeouts):
            return cls(fetch=fetch, ack=ack, timeouts=timeouts)
        return None

    def hold(self, type_: int, service: float) -> float:
        """How long an attempt of type ``type_`` with this service time holds its slot."""
        t = self.timeouts[type_]
        run = (t if 0 < t < service else service) + self.ack
        return self.fetch + run if self.fetch else run

    def column(self, types: Sequence[int], service: array[float]) -> array[float]:
        """Every job's hold (types and service times per job), as :meth:`hold` computes each."""
        svc = np.array(service, dtype=np.float64)  # a copy: no view of the growing column outlives this call
        t = np.asarray(self.timeouts, dtype=np.float64)[np.asarray(types, dtype=np.int64)]
        run = np.where((t > 0) & (t < svc), t, svc) + self.ack
        return array("d", (self.fetch + run if self.fetch else run).tobytes())
