"""Job events: names, and in-process callbacks registered with ``Worker.on``.

The same events also go to each queue's capped Redis stream
``<prefix>:{<queue>}:events`` (written by the Lua scripts; read it with
``Queue.events()``). Stream entries have ``event``, ``job``, ``name`` and,
per event, ``error`` / ``attempt`` (failed, dead), ``delay`` (retrying),
``stalled`` (stalled) or ``progress`` (progress, redacted JSON).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["EVENTS", "Emitter"]

logger = logging.getLogger(__name__)

#: Callback signatures: completed(job, result); failed/retrying/dead(job, exc);
#: stalled(job_id); progress(job, value); lock_lost(job).
EVENTS: tuple[str, ...] = ("completed", "failed", "retrying", "dead", "stalled", "progress", "lock_lost")


class Emitter:
    """Calls the callbacks registered for an event; a failing callback is logged, never raised."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[..., Any]]] = {}
        self._tasks: set[asyncio.Future[Any]] = set()

    def on(self, event: str, callback: Callable[..., Any]) -> None:
        """Register ``callback`` (sync or async) for ``event``."""
        if event not in EVENTS:
            raise ValueError(f"event must be one of {', '.join(EVENTS)}, got {event!r}")
        if not callable(callback):
            raise ValueError(f"callback must be callable, got {callback!r}")
        self.callbacks.setdefault(event, []).append(callback)

    def emit(self, event: str, *args: Any) -> None:
        for cb in self.callbacks.get(event, ()):
            try:
                res = cb(*args)
                if inspect.isawaitable(res):
                    fut = asyncio.ensure_future(res)
                    self._tasks.add(fut)
                    fut.add_done_callback(self._done)
            except Exception:
                logger.exception("%s callback %r failed", event, cb)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self._tasks.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            logger.error("async event callback failed: %r", fut.exception())
