"""Did the machine pause this process while the engine was being measured?

A run's waits and throughput are only the engine's when the machine let the
run go on: a virtual machine frozen by its host, a process swapped out or
stopped (SIGSTOP) adds its pause to every job in flight, and a check of the
engine against the model would blame the engine. :class:`PauseWatch` is a
thread that wakes every 10 ms and records the longest gap beyond that; on a
busy but running machine the gap stays within milliseconds (the kernel gives
every runnable thread its turn, CPU hog or not), so a gap of
:data:`PAUSE_LIMIT` or more means the run was paused, not slow.
:func:`remeasured` measures such a run again (``qsim compare``, on qsim's
engine and on BullMQ), and :func:`paused_part` is what the comparison says of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["PauseWatch", "PAUSE_LIMIT", "REMEASURE", "remeasured", "paused_part"]

logger = logging.getLogger(__name__)

#: A pause at least this long (seconds) spoils a measured run.
PAUSE_LIMIT = 0.25

#: How many times a comparison measures a run again when the machine paused it.
REMEASURE = 2

T = TypeVar("T")


class PauseWatch:
    """Records the longest pause of this process while open (``with PauseWatch() as w: ...; w.longest``)."""

    def __init__(self, tick: float = 0.01) -> None:
        self.tick = tick
        #: The longest time (seconds) the watch woke late, beyond its tick.
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="qsim-pause-watch", daemon=True)

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            self.longest = max(self.longest, now - last - self.tick)
            last = now

    def __enter__(self) -> PauseWatch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def paused(self) -> bool:
        """Whether a pause of :data:`PAUSE_LIMIT` or more was seen."""
        return self.longest >= PAUSE_LIMIT


async def remeasured(run: Callable[[int], Awaitable[tuple[T, float]]], who: str) -> tuple[T, list[float]]:
    """The last of ``run(0)``, ``run(1)``, ... (each returns its result and its longest pause): run again, at
    most :data:`REMEASURE` times, while the machine paused the run for :data:`PAUSE_LIMIT` or longer, since
    such a run's waits carry the pause, which is not ``who``'s (``"the engine"``, ``"BullMQ"``). Returns the
    last result, paused or not, and each run's longest pause."""
    pauses: list[float] = []
    while True:
        result, longest = await run(len(pauses))
        pauses.append(round(longest, 3))
        if longest < PAUSE_LIMIT or len(pauses) > REMEASURE:
            return result, pauses
        logger.warning("this machine paused %s's run for %.2f s (not %s's doing): measuring it again",
                       who, longest, who)


def paused_part(pauses: list[float]) -> dict[str, Any] | None:
    """A comparison's ``"paused"`` part for runs with these longest pauses: ``{"runs", "limit"}``, or None when
    no run was paused."""
    return {"runs": pauses, "limit": PAUSE_LIMIT} if max(pauses, default=0.0) >= PAUSE_LIMIT else None
