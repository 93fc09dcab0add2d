"""Flows (a parent job that runs after its children) and fan-out from a handler.

A flow is added atomically by one script (``lua/add_flow.lua``)::

    flows = FlowProducer(redis=url)
    added = await flows.add(
        parent=("invoicing", "generate-invoice", {"order": 17}),
        children=[("data", "fetch-line-items", {"order": 17}),
                  ("data", "fetch-tax", {"order": 17}, {"attempts": 3, "on_failure": "ignore"})])

:class:`SyncFlowProducer` does the same with a sync client (web apps,
Locust). The parent waits in ``waiting-children`` (``counts()["waiting_children"]``)
until every child is done, then moves to waiting and runs; its handler reads
``await job.children_values()``: every completed child's return value keyed
by ``"<queue>:<child id>"`` (:attr:`FlowJobs.refs` lists them in order).

Child failure policy (per flow, ``on_child_failure=``, or per child, the
``on_failure`` option): ``"fail"`` (default) -- when a child goes to the DLQ
(attempts spent, unrecoverable, or stalled too often) the parent goes to the
DLQ with error ``ChildFailed: child <queue>:<id> failed: <error>``; its other
children still run. ``"ignore"`` -- the parent runs once the other children
are done; ``children_values()`` lacks the dead child and
``children_failures()`` maps it to its error. A child is reported to its
parent once: completing it later (``retry_dead``) records its value.

Retrying from the DLQ (``retry_dead``): a retried child is outstanding again
(its failure is taken off its parent: ``children_failures()`` and the
parent's ``child_failed`` mark forget it). A retried parent waits in
waiting-children again while any child is pending or a "fail" child is still
dead, and runs once they are done: retry the dead child too, in any order
(``qsim dlq retry --all`` retries both when they share a queue).

Fan-out: a running handler adds children in one round trip and waits for
them, reporting progress as they complete::

    async def split(job):
        await job.add_children([("parts", "render", {"page": p}) for p in range(50)])
        values = await job.wait_children()   # progress {"children_done", "children_total"}
        return sum(values.values())

To free the slot instead, ``await job.move_to_waiting_children()`` (after
``add_children``) parks the job in waiting-children and ends this run (it
raises :class:`~qsim.errors.WaitingForChildren`, which the worker handles);
the handler runs again from the start, in the same attempt, once the children
are done, and this time ``add_children`` adds nothing and
``move_to_waiting_children`` returns at once::

    async def split(job):
        await job.add_children([("parts", "render", {"page": p}, {"job_id": f"{job.id}-{p}"})
                                for p in range(50)])
        await job.move_to_waiting_children()
        return sum((await job.children_values()).values())

Give fan-out children ids derived from the parent's (``{"job_id":
f"{job.id}-{i}"}``) and a retried handler's ``add_children`` skips the
children it added before (they are counted once). ``wait_children`` polls the parent's counter (a few commands every 20-500 ms)
while the parent keeps its worker slot and its lock: give the children
another queue, or enough concurrency, so waiting parents cannot take every
slot their children need.

Redis Cluster: the flow scripts touch the parent's and every child's queue
keys at once, so those queues must live in one slot. Keys are tagged with the
queue name, so on a cluster a flow either stays in one queue or its queues
share a group (``group=`` on the producer, the queues and the workers; see
:mod:`qsim.engine.keys`). A flow whose queues are in different slots is
refused with :class:`~qsim.errors.FlowError` before anything is written (on a
single Redis server any queues may be mixed). Fan-out children likewise use
the parent's worker's group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qsim.engine import fanout
from qsim.engine.connection import DEFAULT_REDIS_URL, check_decoded, connect, connect_async
from qsim.engine.fanout import (
    CHILD_POLICIES,
    ChildSpecs,
    check_one_slot,
    child_args,
    make_keys,
    rate_fields,
    rekeyed,
    taken,
)
from qsim.engine.job import Job
from qsim.engine.jobinfo import EnqueuedJob
from qsim.engine.keys import DEFAULT_PREFIX, QueueKeys
from qsim.engine.payload import DEFAULT_MAX_PAYLOAD, DEFAULT_WARN_PAYLOAD
from qsim.engine.protocol import JobSpec
from qsim.engine.queue import DEFAULT_EVENTS_MAXLEN
from qsim.engine.scripts import Call, Op, ScriptSet, run_op, run_op_async
from qsim.errors import FlowError

__all__ = [
    "FlowProducer",
    "SyncFlowProducer",
    "FlowCore",
    "FlowJobs",
    "CHILD_POLICIES",
    "add_children",
    "wait_children",
    "move_to_waiting_children",
    "children_values",
    "children_failures",
]

@dataclass(frozen=True)
class FlowJobs:
    """What :meth:`FlowProducer.add` returns.

    ``created`` is False when a job with the parent's id already existed
    (nothing was added; ``children`` is then empty).
    """

    parent: EnqueuedJob
    children: list[EnqueuedJob]
    created: bool

    @property
    def refs(self) -> list[str]:
        """The children's keys in ``children_values()``: ``"<queue>:<id>"``."""
        return [f"{c.queue}:{c.id}" for c in self.children]


class FlowCore:
    """Configuration and the pure ``add`` operation shared by both flow producers.

    Args:
        prefix: Key prefix.
        group: Hash-tag group of every queue of the flows (see :mod:`qsim.engine.keys`).
        on_child_failure: Default child policy, ``"fail"`` or ``"ignore"``.
        max_payload, warn_payload: Payload limits, as for a Queue.
        events_maxlen: Approximate cap of the event streams.
    """

    def __init__(
        self,
        *,
        prefix: str = DEFAULT_PREFIX,
        group: str | None = None,
        on_child_failure: str = "fail",
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        warn_payload: int = DEFAULT_WARN_PAYLOAD,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
    ) -> None:
        if on_child_failure not in CHILD_POLICIES:
            raise ValueError(f"on_child_failure must be one of {', '.join(CHILD_POLICIES)}, got {on_child_failure!r}")
        self.on_child_failure = on_child_failure
        self.events_maxlen = events_maxlen
        self._specs = ChildSpecs(prefix, group, max_payload, warn_payload)
        make_keys("_", prefix, group)  # validates prefix and group

    def op_add(self, client: Any, parent: tuple[Any, ...], children: Sequence[tuple[Any, ...]],
               on_child_failure: str | None) -> Op[FlowJobs]:
        pkeys, _, pspec = self._specs.one(parent, "parent", None)
        if pspec.delay_ms:
            raise ValueError("a flow's parent cannot have a delay: it runs when its children are done")
        kids = self._specs.children(children, on_child_failure or self.on_child_failure)
        check_one_slot(client, [pkeys, *(k for k, _, _ in kids)])
        return self._op_add(pkeys, pspec, kids, 0)

    def _op_add(self, pkeys: QueueKeys, pspec: JobSpec, kids: list[tuple[QueueKeys, str, JobSpec]],
                tries: int) -> Op[FlowJobs]:
        call = Call("add_flow", (pkeys.waiting_children, *dict.fromkeys(k.wait for k, _, _ in kids)),
                    (pkeys.base, *pspec, self.events_maxlen, len(kids), *child_args(kids)))

        def parse(replies: list[Any]) -> Any:
            reply = replies[0]
            pid, code = str(reply[0]), int(reply[1])
            if code == -4:  # a queue's rate-limit key changed: read the values again, resend
                if tries >= 3:
                    raise FlowError("the rate-limit key of a flow's queue keeps changing; nothing was added")
                fields = rate_fields(reply[2:])
                self._specs.learn(fields)
                return self._op_add(pkeys, rekeyed(pkeys, pspec, fields),
                                    [(k, p, rekeyed(k, s, fields)) for k, p, s in kids], tries + 1)
            if code == -3:
                raise taken(str(reply[2]))
            if code == 0:  # the parent's id is taken: describe the stored job
                return FlowJobs(EnqueuedJob(pid, str(reply[2]) or pspec.name, pkeys.queue, False), [], False)
            p = EnqueuedJob(pid, pspec.name, pkeys.queue, True)
            return FlowJobs(p, [EnqueuedJob(str(cid), s.name, k.queue, True)
                                for cid, (k, _, s) in zip(reply[2:], kids)], True)

        return Op([call], parse)


class FlowProducer(FlowCore):
    """Adds flows (a parent job and its children, atomically) from asyncio code.

    Args:
        redis: A ``redis://`` / ``redis+cluster://`` URL, or an asyncio client
            (``redis.asyncio.Redis`` or ``RedisCluster``) made with ``decode_responses=True``.
        **options: See :class:`FlowCore` (``prefix``, ``group``, ``on_child_failure``, ...).
    """

    def __init__(self, *, redis: Any = DEFAULT_REDIS_URL, **options: Any) -> None:
        super().__init__(**options)
        if isinstance(redis, str):
            self.client: Any = connect_async(redis, socket_connect_timeout=5.0)
            self._owns = True
        else:
            check_decoded(redis)
            self.client, self._owns = redis, False
        self.scripts = ScriptSet(self.client)

    async def add(self, parent: tuple[Any, ...], children: Sequence[tuple[Any, ...]], *,
                  on_child_failure: str | None = None) -> FlowJobs:
        """Add ``parent`` and ``children`` (``(queue, name, data[, options])`` tuples) in one script.

        Options are those of ``Queue.add`` (``priority``, ``attempts``,
        ``backoff``, ``timeout``, ``job_id``; ``delay`` for children only)
        plus ``on_failure`` for a child.

        Raises:
            FlowError: a child id is taken, or (Cluster) the queues are in different slots.
            PayloadError / ValueError: a job is invalid (nothing is written).
            RedisUnavailable: Redis cannot be reached.
        """
        op = self.op_add(self.client, parent, children, on_child_failure)
        return await run_op_async(self.client, self.scripts, op, "add flow")

    async def close(self) -> None:
        """Close the client this producer made (a client passed in is left open)."""
        if self._owns:
            await self.client.aclose()

    async def __aenter__(self) -> FlowProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SyncFlowProducer(FlowCore):
    """Adds flows with a sync client (web apps, Locust/gevent); same as :class:`FlowProducer`, not awaited.

    Args:
        redis: A ``redis://`` / ``redis+cluster://`` URL, or a ``redis.Redis`` /
            ``redis.cluster.RedisCluster`` made with ``decode_responses=True``.
        **options: See :class:`FlowCore`.
    """

    def __init__(self, *, redis: Any = DEFAULT_REDIS_URL, **options: Any) -> None:
        super().__init__(**options)
        if isinstance(redis, str):
            self.client: Any = connect(redis, socket_connect_timeout=5.0)
            self._owns = True
        else:
            check_decoded(redis)
            self.client, self._owns = redis, False
        self.scripts = ScriptSet(self.client)

    def add(self, parent: tuple[Any, ...], children: Sequence[tuple[Any, ...]], *,
            on_child_failure: str | None = None) -> FlowJobs:
        """Add ``parent`` and ``children`` in one script (see :meth:`FlowProducer.add`)."""
        op = self.op_add(self.client, parent, children, on_child_failure)
        return run_op(self.client, self.scripts, op, "add flow")

    def close(self) -> None:
        """Close the client this producer made (a client passed in is left open)."""
        if self._owns:
            self.client.close()

    def __enter__(self) -> SyncFlowProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the handler's side: Job's methods, as functions of the job -------------------------
async def add_children(job: Job, children: Sequence[tuple[Any, ...]], *, on_failure: str = "fail") -> list[EnqueuedJob]:
    """Add ``children`` (``(queue, name, data[, options])``) of the running ``job`` in one script call."""
    return await fanout.add_children(job.context, job, children, on_failure=on_failure)


async def children_values(job: Job) -> dict[str, Any]:
    """Return values of ``job``'s completed children, keyed by ``"<queue>:<id>"``."""
    return await fanout.children_values(job.context, job)


async def children_failures(job: Job) -> dict[str, str]:
    """Errors of ``job``'s children that went to the DLQ, keyed by ``"<queue>:<id>"``."""
    return await fanout.children_failures(job.context, job)


async def wait_children(job: Job, *, progress: bool = True, max_poll: float = 0.5) -> dict[str, Any]:
    """Wait until every child of the running ``job`` is done (see :meth:`Job.wait_children`)."""
    return await fanout.wait_children(job.context, job, progress=progress, max_poll=max_poll)


async def move_to_waiting_children(job: Job) -> None:
    """Park the running ``job`` while children are pending (see :meth:`Job.move_to_waiting_children`)."""
    await fanout.move_to_waiting_children(job.context, job)
