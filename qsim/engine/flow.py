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

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.crc import key_slot

from qsim.engine.connection import check_decoded, connect, connect_async
from qsim.engine.job import EnqueuedJob
from qsim.engine.keys import DEFAULT_PREFIX, QueueKeys
from qsim.engine.payload import DEFAULT_MAX_PAYLOAD, DEFAULT_WARN_PAYLOAD
from qsim.engine.protocol import JobSpec, park_call, with_rate_key
from qsim.engine.queue import DEFAULT_EVENTS_MAXLEN, QueueCore
from qsim.engine.scripts import (
    Call,
    Op,
    ScriptSet,
    command,
    is_cluster,
    redis_errors,
    run_calls_async,
    run_op,
    run_op_async,
)
from qsim.errors import ChildFailed, FlowError, LockLost, WaitingForChildren

if TYPE_CHECKING:
    from qsim.engine.job import Job

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

#: What a child's death does to its parent.
CHILD_POLICIES = ("fail", "ignore")
_JOB_OPTIONS = ("priority", "delay", "attempts", "backoff", "timeout", "job_id")


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


def make_keys(queue: str, prefix: str, group: str | None) -> QueueKeys:
    """A queue's keys, in ``group`` when one is given."""
    return QueueKeys(queue, prefix, group)


class _Specs:
    """Validates and encodes the jobs of a flow (one QueueCore per queue)."""

    def __init__(self, prefix: str, group: str | None, max_payload: int, warn_payload: int) -> None:
        self.prefix, self.group = prefix, group
        self.max_payload, self.warn_payload = max_payload, warn_payload
        self.cores: dict[str, QueueCore] = {}

    def keys(self, queue: str) -> QueueKeys:
        return make_keys(queue, self.prefix, self.group)

    def one(self, item: Any, what: str, default_policy: str | None) -> tuple[QueueKeys, str, JobSpec]:
        if not isinstance(item, tuple) or len(item) not in (3, 4) or (len(item) == 4 and not isinstance(item[3], dict)):
            raise ValueError(f"{what} must be a (queue, name, data) or (queue, name, data, options) tuple, got {item!r}")
        queue, name, data = item[:3]
        opts = dict(item[3]) if len(item) == 4 else {}
        policy = opts.pop("on_failure", default_policy)
        if default_policy is None and policy is not None:
            raise ValueError(f"{what}: on_failure is an option of children, not of the parent")
        if policy is not None and policy not in CHILD_POLICIES:
            raise ValueError(f"{what}: on_failure must be one of {', '.join(CHILD_POLICIES)}, got {policy!r}")
        unknown = sorted(set(opts) - set(_JOB_OPTIONS))
        if unknown:
            raise ValueError(f"{what}: unknown options {unknown}; known: {', '.join(_JOB_OPTIONS)}, on_failure")
        keys = self.keys(queue)
        core = self.cores.get(queue)
        if core is None:
            core = self.cores[queue] = QueueCore(queue, prefix=self.prefix, max_payload=self.max_payload,
                                                 warn_payload=self.warn_payload)
        return keys, policy or "", core.spec(name, data, **opts)

    def learn(self, fields: dict[str, str]) -> None:
        """Remember the rate-limit keys an add script named (``{queue key base: key}``)."""
        for queue, core in self.cores.items():
            if self.keys(queue).base in fields:
                core.rate_field = fields[self.keys(queue).base]

    def children(self, children: Sequence[Any], policy: str) -> list[tuple[QueueKeys, str, JobSpec]]:
        if policy not in CHILD_POLICIES:
            raise ValueError(f"on_child_failure must be one of {', '.join(CHILD_POLICIES)}, got {policy!r}")
        if isinstance(children, (str, bytes)) or not isinstance(children, Sequence):
            raise ValueError(f"children must be a list of (queue, name, data[, options]) tuples, got {children!r}")
        out = [self.one(c, f"children[{i}]", policy) for i, c in enumerate(children)]
        ids = [(k.queue, s.id) for k, _, s in out if s.id]
        if len(ids) != len(set(ids)):
            raise FlowError(f"children ids repeat: {sorted(ids)}")
        return out


def _rate_fields(pairs: Sequence[Any]) -> dict[str, str]:
    """``{queue key base: rate-limit key}`` from the flat pairs of an add script's -4 reply."""
    return {str(pairs[i]): str(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)}


def _rekeyed(keys: QueueKeys, spec: JobSpec, fields: dict[str, str]) -> JobSpec:
    return with_rate_key(spec, fields[keys.base]) if keys.base in fields else spec


def _child_args(children: Sequence[tuple[QueueKeys, str, JobSpec]]) -> list[Any]:
    args: list[Any] = []
    for keys, policy, spec in children:
        args.extend((keys.base, policy, *spec))
    return args


def check_one_slot(client: Any, keys: Sequence[QueueKeys]) -> None:
    """On Redis Cluster, raise FlowError unless every queue's keys share one slot."""
    if not is_cluster(client):
        return
    slots = {k.queue: key_slot(k.wait.encode()) for k in keys}
    if len(set(slots.values())) > 1:
        raise FlowError(
            "on Redis Cluster a flow's queues must share one hash slot (the flow scripts touch all their keys "
            f"at once), got slots {slots}: use one queue, or give the queues a common group (group=...)")


def _taken(ref: str) -> FlowError:
    return FlowError(f"a job with the child id {ref!r} already exists; nothing was added")


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
        self._specs = _Specs(prefix, group, max_payload, warn_payload)
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
                    (pkeys.base, *pspec, self.events_maxlen, len(kids), *_child_args(kids)))

        def parse(replies: list[Any]) -> Any:
            reply = replies[0]
            pid, code = str(reply[0]), int(reply[1])
            if code == -4:  # a queue's rate-limit key changed: read the values again, resend
                if tries >= 3:
                    raise FlowError("the rate-limit key of a flow's queue keeps changing; nothing was added")
                fields = _rate_fields(reply[2:])
                self._specs.learn(fields)
                return self._op_add(pkeys, _rekeyed(pkeys, pspec, fields),
                                    [(k, p, _rekeyed(k, s, fields)) for k, p, s in kids], tries + 1)
            if code == -3:
                raise _taken(str(reply[2]))
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

    def __init__(self, *, redis: Any = "redis://127.0.0.1:6379/0", **options: Any) -> None:
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

    def __init__(self, *, redis: Any = "redis://127.0.0.1:6379/0", **options: Any) -> None:
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


# -- the handler's side (Job methods delegate here) ------------------------------
def _worker_of(job: Job) -> Any:
    if job._worker is None:
        raise RuntimeError("this needs a job run by a Worker")
    return job._worker


def job_keys(job: Job) -> QueueKeys:
    """The keys of ``job``'s queue (the worker's prefix and group)."""
    k = _worker_of(job).keys
    return make_keys(job.queue, k.prefix, k.group)


async def add_children(job: Job, children: Sequence[tuple[Any, ...]], *, on_failure: str = "fail") -> list[EnqueuedJob]:
    """Add ``children`` (``(queue, name, data[, options])``) of the running ``job`` in one script call."""
    w = _worker_of(job)
    pk = job_keys(job)
    specs = w.flow_state.get("specs")
    if specs is None:  # kept by the worker: the queues' rate-limit keys, once learnt, stay known
        specs = w.flow_state["specs"] = _Specs(pk.prefix, pk.group, w.max_payload, w.max_payload)
    kids = specs.children(children, on_failure)
    if not kids:
        return []
    check_one_slot(w.client, [pk, *(k for k, _, _ in kids)])
    for _ in range(4):
        call = Call("add_children", (pk.active, *dict.fromkeys(k.wait for k, _, _ in kids)),
                    (pk.base, job.id, job.token, len(kids), *_child_args(kids)))
        with redis_errors(f"add children of job {job.id}"):
            reply = (await run_calls_async(w.client, w.scripts, [call]))[0]
        if int(reply[0]) != -4:
            break
        fields = _rate_fields(reply[1:])  # a queue's rate-limit key changed: read the values again, resend
        specs.learn(fields)
        kids = [(k, p, _rekeyed(k, s, fields)) for k, p, s in kids]
    else:
        raise FlowError("the rate-limit key of a child's queue keeps changing; no child added")
    if int(reply[0]) == -1:
        raise LockLost(f"job {job.id}: this worker no longer holds its lock; no child added")
    if int(reply[0]) == -3:
        raise _taken(str(reply[1]))
    return [EnqueuedJob(str(reply[1 + 2 * i]), s.name, k.queue, bool(int(reply[2 + 2 * i])))
            for i, (k, _, s) in enumerate(kids)]


def _decode(v: str) -> Any:
    try:
        return json.loads(v)
    except ValueError:
        return v


async def children_values(job: Job) -> dict[str, Any]:
    """Return values of ``job``'s completed children, keyed by ``"<queue>:<id>"``."""
    w = _worker_of(job)
    with redis_errors(f"children of job {job.id}"):
        (h,) = await run_calls_async(w.client, w.scripts, [command("HGETALL", job_keys(job).children(job.id))])
    return {ref: _decode(v) for ref, v in h.items()}


async def children_failures(job: Job) -> dict[str, str]:
    """Errors of ``job``'s children that went to the DLQ, keyed by ``"<queue>:<id>"``."""
    w = _worker_of(job)
    with redis_errors(f"children of job {job.id}"):
        (h,) = await run_calls_async(w.client, w.scripts, [command("HGETALL", job_keys(job).children_failed(job.id))])
    return dict(h)


async def wait_children(job: Job, *, progress: bool = True, max_poll: float = 0.5) -> dict[str, Any]:
    """Wait until every child of the running ``job`` is done; return :func:`children_values`.

    Reports ``{"children_done": k, "children_total": n}`` as progress when
    ``k`` changes (``progress=True``).

    Raises:
        ChildFailed: a child with the ``fail`` policy went to the DLQ.
        LockLost: the worker lost the parent's lock (it stalled) while waiting.
    """
    w = _worker_of(job)
    k = job_keys(job)
    calls = [command("HMGET", k.job(job.id), "pending_children", "child_failed"),
             command("HLEN", k.children(job.id)), command("HLEN", k.children_failed(job.id))]
    last, delay = -1, 0.02
    while True:
        if job.lock_lost:
            raise LockLost(f"job {job.id}: this worker no longer holds its lock; stopped waiting for its children")
        with redis_errors(f"children of job {job.id}"):
            (pending, failed), ok, bad = await run_calls_async(w.client, w.scripts, calls)
        if failed:
            raise ChildFailed(f"child {failed}")
        left, finished = int(pending or 0), int(ok) + int(bad)
        if finished != last:
            if progress and (last >= 0 or finished):
                await job.progress({"children_done": finished, "children_total": finished + max(left, 0)})
            last, delay = finished, 0.02
        if left <= 0:
            return await children_values(job)
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, max_poll)


async def move_to_waiting_children(job: Job) -> None:
    """Park the running ``job`` in waiting-children while children are pending.

    Returns at once when no child is pending. Otherwise raises
    :class:`~qsim.errors.WaitingForChildren` (let it propagate: the worker
    frees the slot, and the handler runs again when the children are done).

    Raises:
        WaitingForChildren: the job was parked.
        ChildFailed: a child with the ``fail`` policy went to the DLQ.
        LockLost: the worker no longer holds the job's lock.
    """
    w = _worker_of(job)
    k = job_keys(job)
    call = park_call(k, w.events_maxlen, job.id, job.token)
    with redis_errors(f"park job {job.id}"):
        code = int((await run_calls_async(w.client, w.scripts, [call]))[0])
        if code == 2:
            (failed,) = await run_calls_async(w.client, w.scripts, [command("HGET", k.job(job.id), "child_failed")])
            raise ChildFailed(f"child {failed}")
    if code == -1:
        raise LockLost(f"job {job.id}: this worker no longer holds its lock")
    if code == 1:
        raise WaitingForChildren(f"job {job.id} waits for its children")
