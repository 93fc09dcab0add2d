"""Did the machine pause this process while the engine was being measured?

A run's waits and throughput are only the engine's when the machine let the
run go on: a virtual machine frozen by its host, a process swapped out or
stopped (SIGSTOP) adds its pause to every job in flight, and a check of the
engine against the model would blame the engine. :class:`PauseWatch` is a
thread that wakes every 10 ms and records the longest gap beyond that; on a
busy but running machine the gap stays within milliseconds (the kernel gives
every runnable thread its turn, CPU hog or not), so a gap of
:data:`PAUSE_LIMIT` or more means the run was paused, not slow.
:func:`qsim.analysis.fidelity.compare.compare_async` measures such a run again.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

__all__ = ["PauseWatch", "PAUSE_LIMIT"]

#: A pause at least this long (seconds) spoils a measured run.
PAUSE_LIMIT = 0.25


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
