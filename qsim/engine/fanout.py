"""Flow children: validating and encoding them, and a running handler's side of fan-out.

The child specs (:class:`ChildSpecs`) are shared by the flow producers
(:mod:`qsim.engine.flow`) and by fan-out from a handler; the handler's
functions here take the job's :class:`~qsim.engine.context.JobContext` and
the job (``Job.add_children`` and friends call them; :mod:`qsim.engine.flow`
documents the behaviour).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from redis.crc import key_slot

from qsim.engine.context import JobContext, JobRef
from qsim.engine.jobinfo import EnqueuedJob
from qsim.engine.keys import QueueKeys
from qsim.engine.protocol import JobSpec, park_call, with_rate_key
from qsim.engine.queue import QueueCore
from qsim.engine.scripts import Call, command, is_cluster, redis_errors, run_calls_async
from qsim.errors import ChildFailed, FlowError, LockLost, WaitingForChildren

__all__ = [
    "CHILD_POLICIES",
    "ChildSpecs",
    "make_keys",
    "check_one_slot",
    "child_args",
    "rate_fields",
    "rekeyed",
    "taken",
    "add_children",
    "wait_children",
    "move_to_waiting_children",
    "children_values",
    "children_failures",
]

#: What a child's death does to its parent.
CHILD_POLICIES = ("fail", "ignore")
_JOB_OPTIONS = ("priority", "delay", "attempts", "backoff", "timeout", "job_id")


def make_keys(queue: str, prefix: str, group: str | None) -> QueueKeys:
    """A queue's keys, in ``group`` when one is given."""
    return QueueKeys(queue, prefix, group)


class ChildSpecs:
    """Validates and encodes the jobs of a flow (one QueueCore per queue).

    ``known`` maps a queue's key base to its rate-limit key field as last heard
    from Redis; :meth:`learn` updates it (pass a dict that outlives this object
    to keep what was learnt).
    """

    def __init__(self, prefix: str, group: str | None, max_payload: int, warn_payload: int,
                 known: dict[str, str] | None = None) -> None:
        self.prefix, self.group = prefix, group
        self.max_payload, self.warn_payload = max_payload, warn_payload
        self.cores: dict[str, QueueCore] = {}
        self.known: dict[str, str] = {} if known is None else known

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
            core.rate_field = self.known.get(keys.base, "")
        return keys, policy or "", core.spec(name, data, **opts)

    def learn(self, fields: dict[str, str]) -> None:
        """Remember the rate-limit keys an add script named (``{queue key base: key}``)."""
        self.known.update(fields)
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


def rate_fields(pairs: Sequence[Any]) -> dict[str, str]:
    """``{queue key base: rate-limit key}`` from the flat pairs of an add script's -4 reply."""
    return {str(pairs[i]): str(pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)}


def rekeyed(keys: QueueKeys, spec: JobSpec, fields: dict[str, str]) -> JobSpec:
    return with_rate_key(spec, fields[keys.base]) if keys.base in fields else spec


def child_args(children: Sequence[tuple[QueueKeys, str, JobSpec]]) -> list[Any]:
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


def taken(ref: str) -> FlowError:
    return FlowError(f"a job with the child id {ref!r} already exists; nothing was added")


# -- the handler's side (Job methods call these) ------------------------------------
async def add_children(ctx: JobContext, job: JobRef, children: Sequence[tuple[Any, ...]], *,
                       on_failure: str = "fail") -> list[EnqueuedJob]:
    """Add ``children`` (``(queue, name, data[, options])``) of the running ``job`` in one script call."""
    pk = ctx.keys(job.queue)
    lim = ctx.limits
    # the queues' rate-limit keys, once learnt, stay known for the worker's run (ctx.rate_fields)
    specs = ChildSpecs(pk.prefix, pk.group, lim.max_payload, lim.max_payload, known=ctx.rate_fields)
    kids = specs.children(children, on_failure)
    if not kids:
        return []
    check_one_slot(ctx.client, [pk, *(k for k, _, _ in kids)])
    for _ in range(4):
        call = Call("add_children", (pk.active, *dict.fromkeys(k.wait for k, _, _ in kids)),
                    (pk.base, job.id, job.token, len(kids), *child_args(kids)))
        with redis_errors(f"add children of job {job.id}"):
            reply = (await run_calls_async(ctx.client, ctx.scripts, [call]))[0]
        if int(reply[0]) != -4:
            break
        fields = rate_fields(reply[1:])  # a queue's rate-limit key changed: read the values again, resend
        specs.learn(fields)
        kids = [(k, p, rekeyed(k, s, fields)) for k, p, s in kids]
    else:
        raise FlowError("the rate-limit key of a child's queue keeps changing; no child added")
    if int(reply[0]) == -1:
        raise LockLost(f"job {job.id}: this worker no longer holds its lock; no child added")
    if int(reply[0]) == -3:
        raise taken(str(reply[1]))
    return [EnqueuedJob(str(reply[1 + 2 * i]), s.name, k.queue, bool(int(reply[2 + 2 * i])))
            for i, (k, _, s) in enumerate(kids)]


def _decode(v: str) -> Any:
    try:
        return json.loads(v)
    except ValueError:
        return v


async def children_values(ctx: JobContext, job: JobRef) -> dict[str, Any]:
    """Return values of ``job``'s completed children, keyed by ``"<queue>:<id>"``."""
    k = ctx.keys(job.queue)
    with redis_errors(f"children of job {job.id}"):
        (h,) = await run_calls_async(ctx.client, ctx.scripts, [command("HGETALL", k.children(job.id))])
    return {ref: _decode(v) for ref, v in h.items()}


async def children_failures(ctx: JobContext, job: JobRef) -> dict[str, str]:
    """Errors of ``job``'s children that went to the DLQ, keyed by ``"<queue>:<id>"``."""
    k = ctx.keys(job.queue)
    with redis_errors(f"children of job {job.id}"):
        (h,) = await run_calls_async(ctx.client, ctx.scripts, [command("HGETALL", k.children_failed(job.id))])
    return dict(h)


async def wait_children(ctx: JobContext, job: JobRef, *, progress: bool = True,
                        max_poll: float = 0.5) -> dict[str, Any]:
    """Wait until every child of the running ``job`` is done; return :func:`children_values`.

    Reports ``{"children_done": k, "children_total": n}`` as progress when
    ``k`` changes (``progress=True``).

    Raises:
        ChildFailed: a child with the ``fail`` policy went to the DLQ.
        LockLost: the worker lost the parent's lock (it stalled) while waiting.
    """
    k = ctx.keys(job.queue)
    calls = [command("HMGET", k.job(job.id), "pending_children", "child_failed"),
             command("HLEN", k.children(job.id)), command("HLEN", k.children_failed(job.id))]
    last, delay = -1, 0.02
    while True:
        if job.lock_lost:
            raise LockLost(f"job {job.id}: this worker no longer holds its lock; stopped waiting for its children")
        with redis_errors(f"children of job {job.id}"):
            (pending, failed), ok, bad = await run_calls_async(ctx.client, ctx.scripts, calls)
        if failed:
            raise ChildFailed(f"child {failed}")
        left, finished = int(pending or 0), int(ok) + int(bad)
        if finished != last:
            if progress and (last >= 0 or finished):
                await job.progress({"children_done": finished, "children_total": finished + max(left, 0)})
            last, delay = finished, 0.02
        if left <= 0:
            return await children_values(ctx, job)
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, max_poll)


async def move_to_waiting_children(ctx: JobContext, job: JobRef) -> None:
    """Park the running ``job`` in waiting-children while children are pending.

    Returns at once when no child is pending. Otherwise raises
    :class:`~qsim.errors.WaitingForChildren` (let it propagate: the worker
    frees the slot, and the handler runs again when the children are done).

    Raises:
        WaitingForChildren: the job was parked.
        ChildFailed: a child with the ``fail`` policy went to the DLQ.
        LockLost: the worker no longer holds the job's lock.
    """
    k = ctx.keys(job.queue)
    call = park_call(k, ctx.limits.events_maxlen, job.id, job.token)
    with redis_errors(f"park job {job.id}"):
        code = int((await run_calls_async(ctx.client, ctx.scripts, [call]))[0])
        if code == 2:
            (failed,) = await run_calls_async(ctx.client, ctx.scripts, [command("HGET", k.job(job.id), "child_failed")])
            raise ChildFailed(f"child {failed}")
    if code == -1:
        raise LockLost(f"job {job.id}: this worker no longer holds its lock")
    if code == 1:
        raise WaitingForChildren(f"job {job.id} waits for its children")
