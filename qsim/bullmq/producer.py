"""Add jobs to BullMQ queues through the maintained ``bullmq`` Python package (asyncio).

The package is BullMQ's own Python port: it runs the very Lua scripts of
BullMQ (Node.js) 6.x to add jobs and flows, so the job hashes, the wait list,
the prioritized set, the marker and the events stream are BullMQ's own
format, not a copy of it written by hand. What Node workers 4.x, 5.x and 6.x
read from it is checked by the test suite (``tests/e2e/test_bullmq_target.py``);
``docs/how-to/bullmq.md`` has the table, and one difference: BullMQ 4.x
workers wake for prioritized jobs only through a marker their own scripts
write, so an *idle* 4.x worker picks up a prioritized job only when its
``drainDelay`` (5 s) ends.

One asyncio client is shared by every queue and the flow producer. Install
with ``pip install 'qsim[bullmq]'``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from qsim.bullmq.options import DEFAULT_PREFIX
from qsim.errors import EngineError, RedisUnavailable

__all__ = ["BullMQProducer", "Child", "require_package"]

logger = logging.getLogger(__name__)

#: ``(queue, job name, data, options)`` of one flow child.
Child = tuple[str, str, Any, dict[str, Any]]


def require_package() -> Any:
    """The ``bullmq`` module.

    Raises:
        EngineError: It is not installed (the message says how to install it).
    """
    try:
        import bullmq
    except ImportError as e:
        raise EngineError("the BullMQ target needs the 'bullmq' Python package: pip install 'qsim[bullmq]'") from e
    return bullmq


class BullMQProducer:
    """Adds jobs and flows to the BullMQ queues under ``prefix`` (async; one client for all).

    Args:
        redis_url: The Redis of the BullMQ queues.
        prefix: BullMQ's key prefix (default ``bull``).

    Build it inside the event loop that uses it; :meth:`close` when done.
    """

    def __init__(self, redis_url: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        import redis.asyncio as aioredis

        self._bullmq = require_package()
        self.redis_url, self.prefix = redis_url, prefix
        self.client = aioredis.Redis.from_url(redis_url, decode_responses=True)
        self._queues: dict[str, Any] = {}
        self._flows: Any = None

    def queue(self, name: str) -> Any:
        """The package's ``Queue`` of ``name`` (made once)."""
        q = self._queues.get(name)
        if q is None:
            q = self._queues[name] = self._bullmq.Queue(name, {"connection": self.client, "prefix": self.prefix})
        return q

    async def add(self, queue: str, name: str, data: Any, opts: dict[str, Any]) -> str:
        """Add one job; returns its id (an existing ``jobId`` adds nothing and returns that id).

        Raises:
            RedisUnavailable: Redis cannot be reached.
            EngineError: BullMQ refused the job.
        """
        try:
            job = await self.queue(queue).add(name, data, opts)
        except OSError as e:
            raise RedisUnavailable(f"adding a BullMQ job to {queue!r}: {e}") from e
        except Exception as e:  # the package raises plain exceptions for refused jobs and Redis errors
            raise _wrapped(e, f"adding a BullMQ job to {queue!r}") from e
        return str(job.id)

    async def add_flow(self, queue: str, name: str, data: Any, opts: dict[str, Any],
                       children: Sequence[Child]) -> str:
        """Add a parent and its children as one BullMQ flow (atomically); returns the parent's id."""
        if self._flows is None:
            self._flows = self._bullmq.FlowProducer({"connection": self.client, "prefix": self.prefix})
        tree = {"name": name, "queueName": queue, "data": data, "opts": opts, "prefix": self.prefix,
                "children": [{"name": n, "queueName": q, "data": d, "opts": o, "prefix": self.prefix}
                             for q, n, d, o in children]}
        try:
            node = await self._flows.add(tree)
        except OSError as e:
            raise RedisUnavailable(f"adding a BullMQ flow to {queue!r}: {e}") from e
        except Exception as e:
            raise _wrapped(e, f"adding a BullMQ flow to {queue!r}") from e
        job = node["job"] if isinstance(node, dict) else getattr(node, "job", node)
        return str(getattr(job, "id", opts.get("jobId", "")))

    async def close(self) -> None:
        """Close the client (the queues share it)."""
        await self.client.aclose()


def _wrapped(e: Exception, what: str) -> Exception:
    import redis

    if isinstance(e, (redis.ConnectionError, redis.TimeoutError)):
        return RedisUnavailable(f"{what}: {e}")
    return EngineError(f"{what}: {type(e).__name__}: {e}")
