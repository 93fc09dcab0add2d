"""What the core calls of its strategy and mechanisms: the other half of :mod:`~qsim.model.context`.

:mod:`~qsim.model.context` says what a mechanism may use of the core; this
module says what the core (and the run, :mod:`~qsim.model.run`) uses of each
thing plugged into it. All are handed to
:class:`~qsim.model.core.ModelCore`'s constructor, as factories it calls
with itself once its state is built (each gets its context), so a core is
whole once constructed and nothing is plugged in afterwards:

- :class:`Recorder` — what a run keeps of its attempts (records on,
  :mod:`~qsim.model.recorders`; records off, :mod:`~qsim.model.recordless`);
- :class:`AttemptResult` — how an attempt ended (:class:`~qsim.model.retries.Retries`);
  without one, every attempt succeeds;
- :class:`FlowHooks` — how drawn jobs arrive and what follows a settled job
  (:class:`~qsim.model.flows.Flows`);
- :class:`PoolHooks` — the slots a stopping process no longer uses, and the
  scenario's pool events (:class:`~qsim.model.events.PoolEvents`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Recorder", "AttemptResult", "FlowHooks", "PoolHooks"]


class Recorder(Protocol):
    """What a run keeps of its attempts: records on or off (a strategy chosen once per run).

    ``started`` and ``completed`` run once per attempt, in the hot paths.
    """

    #: ``queued(q, depth, now)``: a job was put in queue ``q``'s waiting line (None: not needed).
    queued: Callable[[int, int, float], None] | None
    #: settled jobs between two calls of :meth:`tick` at most (``math.inf``: no periodic tick).
    every: float

    def start(self) -> None:
        """The run starts (the clock is at 0): schedule what the strategy needs."""

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt of ``job`` (from queue ``q``) started on ``slot`` at ``now``."""

    def completed(self, job: int, slot: int, now: float) -> None:
        """The attempt on ``slot`` ended at ``now`` and ``job`` completed (runs without an :class:`AttemptResult`)."""

    def settled(self, job: int, outcome: int, now: float) -> None:
        """``job`` settled with ``outcome`` at ``now`` (through :meth:`ModelCore.settle`)."""

    def tick(self) -> None:
        """Called now and then (every ``every`` settled jobs at most, and at the end of the run)."""


class AttemptResult(Protocol):
    """Decides how an attempt ended, then settles its job or sends it back."""

    def __call__(self, job: int, slot: int, now: float) -> None:
        """The attempt of ``job`` on ``slot`` ended at ``now``."""


class FlowHooks(Protocol):
    """Flows and fan-out: the arrivals' entry and what follows a settled job."""

    @property
    def parents(self) -> Sequence[int]:
        """Every flow parent that went to waiting-children (it joined its queue later, a logged requeue)."""

    def arrive(self, job: int, now: float) -> None:
        """A drawn job arrives."""

    def arrive_batch(self, jobs: list[int], now: float) -> None:
        """Drawn jobs arrive at the same instant."""

    def settled(self, job: int, outcome: int, now: float) -> None:
        """``job`` settled (called before the core counts it, so children it adds count first)."""


class PoolHooks(Protocol):
    """Pool events: processes signalled, killed and started during the run."""

    #: per slot: its process is stopping (it takes no more jobs); grows with new slots
    retired: list[bool]

    @property
    def slot_steps(self) -> Sequence[tuple[float, int]]:
        """``(time, slots)`` at each change of the slot count (``Records.slots``)."""

    @property
    def pool_steps(self) -> Mapping[str, Sequence[tuple[float, int]]]:
        """Per pool, ``(time, processes taking work)`` at each change (``Records.workers``)."""

    def start(self) -> None:
        """The run starts: schedule the events (and the stalled checks)."""

    def slot_done(self, slot: int, now: float) -> None:
        """An attempt ended on a retired slot."""

    def frame(self) -> pd.DataFrame:
        """``records.extra["drains"]``: one row per signalled process."""
