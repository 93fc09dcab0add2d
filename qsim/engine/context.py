"""What a running job may use of the worker that runs it: :class:`JobContext`.

The worker hands one context to each :class:`~qsim.engine.job.Job` it runs, to
the fan-out helpers (:mod:`qsim.engine.fanout`) and to its side tasks
(:mod:`qsim.engine.maintenance`), instead of itself: they see the Redis
client and scripts, the keys of a queue, the payload limits, the shared
rate-limit fields and progress reporting, and nothing else of the worker.
:class:`RunContext` is the worker's implementation (one per ``run()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from qsim.engine.keys import QueueKeys
from qsim.engine.payload import encode_payload, redact
from qsim.engine.protocol import progress_call
from qsim.engine.scripts import REDIS_ERRORS, ScriptSet, run_calls_async
from qsim.errors import LockLost, RedisUnavailable

__all__ = ["JobContext", "JobRef", "Limits", "RunContext"]


@dataclass(frozen=True)
class Limits:
    """The worker's limits on what a job writes.

    Attributes:
        max_payload: Largest return value, progress value or child payload in bytes.
        events_maxlen: Approximate cap of the queues' event streams.
        redact: Normalized sensitive field names (hidden in logs, events and errors).
    """

    max_payload: int
    events_maxlen: int
    redact: frozenset[str]


class JobRef(Protocol):
    """The few things of a running job the context's users need (a :class:`~qsim.engine.job.Job` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def queue(self) -> str: ...

    @property
    def token(self) -> str: ...

    @property
    def lock_lost(self) -> bool: ...

    async def progress(self, value: Any) -> None: ...


class JobContext(Protocol):
    """What a worker lends the jobs it runs, the fan-out helpers and its side tasks."""

    @property
    def client(self) -> Any:
        """The worker's asyncio Redis client (``redis.asyncio.Redis`` or its ``RedisCluster``)."""

    @property
    def scripts(self) -> ScriptSet:
        """The engine's scripts registered on :attr:`client`."""

    @property
    def limits(self) -> Limits:
        """Payload and event-stream limits."""

    @property
    def rate_fields(self) -> dict[str, str]:
        """Rate-limit key field of a queue, by key base, as last heard from Redis (learnt, shared)."""

    def keys(self, queue: str) -> QueueKeys:
        """The keys of ``queue`` (the worker's prefix and group)."""

    async def report_progress(self, job: JobRef, value: Any) -> None:
        """Store and publish ``job``'s progress; raises LockLost / RedisUnavailable."""

    def emit(self, event: str, *args: Any) -> None:
        """Call the callbacks registered for ``event`` (see :data:`qsim.engine.events.EVENTS`)."""


@dataclass
class RunContext:
    """The worker's :class:`JobContext` for one run (made once the client exists).

    Args:
        client: The asyncio Redis client.  scripts: Scripts registered on it.
        limits: Payload limits.  prefix, group: Key layout.
        served: The keys of the queues the worker serves, by queue name.
        emit: Calls an event's callbacks.
    """

    client: Any
    scripts: ScriptSet
    limits: Limits
    prefix: str
    group: str | None
    served: dict[str, QueueKeys]
    emit: Callable[..., None]
    rate_fields: dict[str, str] = field(default_factory=dict)

    def keys(self, queue: str) -> QueueKeys:
        k = self.served.get(queue)
        return k if k is not None else QueueKeys(queue, self.prefix, self.group)

    async def report_progress(self, job: JobRef, value: Any) -> None:
        lim = self.limits
        text = encode_payload(redact(value, lim.redact), what="progress", max_bytes=lim.max_payload,
                              warn_bytes=lim.max_payload)
        try:
            code = (await run_calls_async(self.client, self.scripts, [
                progress_call(self.keys(job.queue), lim.events_maxlen, job.id, job.token, text)]))[0]
        except REDIS_ERRORS as e:
            raise RedisUnavailable(f"cannot report progress of job {job.id}: {e}") from e
        if code < 0:
            raise LockLost(f"job {job.id}: this worker no longer holds its lock")
        self.emit("progress", job, value)
