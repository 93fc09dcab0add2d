"""Jobs: the handler's view (:class:`Job`) and the stored record (:class:`JobInfo`).

Layout of a job hash ``<prefix>:{<queue>}:job:<id>`` (all values strings;
times are seconds since the epoch from Redis's clock, microsecond digits)::

    name            job type              data          payload (JSON)
    priority        int, lower first      delay         initial delay (s)
    max_attempts    int                   backoff       Backoff JSON or ""
    timeout         per-attempt seconds (0 = none)
    state           waiting | delayed | active | completed | dead | waiting_children
    enqueued_at     when add() ran        started_at    start of the first attempt
    attempt_started start of the current/last attempt
    finished_at     completion or death   worker        worker id of the last attempt
    token           lock token of the current attempt
    attempts_made   attempts that ended in success or failure (stalls and
                    shutdown hand-backs do not count)
    stalled         times the job's lock expired
    error, traceback  last failure          returnvalue   result (JSON)
    progress        last progress (JSON)
    log             one "start,end,outcome,worker;" entry per attempt (the
                    latest 16 KB of entries are kept);
                    outcome: completed | failed | timeout | stalled | released
    rkey            the value of the queue's rate-limit key field in the
                    payload, as text (keyed queues only; read at add time)

Flows (see :mod:`qsim.engine.flow`): a child has ``parent`` (the parent's id),
``parent_base`` (the parent queue's key base) and ``parent_policy`` (fail |
ignore); a parent has ``pending_children`` (children not finished) and, once a
"fail" child died, ``child_failed`` ("<queue>:<id>: <error>").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from qsim.engine.backoff import Backoff

if TYPE_CHECKING:
    from qsim.engine.worker import Worker

__all__ = ["Job", "JobInfo", "Attempt", "EnqueuedJob", "JOB_STATES", "parse_log"]

JOB_STATES = ("waiting", "delayed", "active", "completed", "dead", "waiting_children")


@dataclass(frozen=True)
class Attempt:
    """One attempt of a job: Redis-clock times and how it ended."""

    start: float
    end: float
    outcome: str
    worker: str


def parse_log(text: str | None) -> list[Attempt]:
    """Parse the ``log`` field of a job hash."""
    out = []
    for entry in (text or "").split(";"):
        if entry:
            start, end, outcome, worker = entry.split(",", 3)
            out.append(Attempt(float(start), float(end), outcome, worker))
    return out


def _f(v: str | None) -> float | None:
    try:
        return float(v) if v else None
    except ValueError:  # a hash corrupted by hand: show what can be shown
        return None


def _n(v: str | None, default: int) -> int:
    try:
        return int(v) if v else default
    except ValueError:
        return default


def _log(text: str | None) -> list[Attempt]:
    try:
        return parse_log(text)
    except ValueError:
        return []


def _parent_ref(pid: str | None, base: str | None) -> str | None:
    """``"<queue>:<id>"`` of a flow child's parent, from its key base ``p:{q}:`` or ``p:{group}:q:``."""
    if not pid:
        return None
    b = base or ""
    m = re.search(r"\}:([^:]+):$", b) or re.search(r"\{([^}]*)\}", b)
    return f"{m.group(1) if m else ''}:{pid}"


@dataclass(frozen=True)
class EnqueuedJob:
    """What ``add`` returns: the job id and whether this call created it.

    When the id existed already (``created`` False) ``name`` is the stored
    job's name, not the one this call asked for. Generated ids are all
    digits; user ids may not be.
    """

    id: str
    name: str
    queue: str
    created: bool


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of a stored job (``Queue.get_job``, ``dead()``, ``job_records()``).

    ``parent`` is ``"<queue>:<id>"`` of a flow child's parent (None otherwise).

    ``data`` is the decoded payload, or the raw text when it is not valid JSON
    (``data_error`` then says why).
    """

    id: str
    queue: str
    name: str
    state: str
    data: Any
    priority: int
    max_attempts: int
    attempts_made: int
    stalled: int
    timeout: float
    enqueued_at: float | None
    started_at: float | None
    finished_at: float | None
    worker: str | None
    error: str | None
    traceback: str | None
    returnvalue: Any
    progress: Any
    backoff: str
    attempts: list[Attempt] = field(default_factory=list)
    data_error: str | None = None
    parent: str | None = None

    @classmethod
    def from_hash(cls, queue: str, job_id: str, h: dict[str, str]) -> JobInfo:
        """Build from an HGETALL reply (decoded strings)."""
        data_error = None
        try:
            data = json.loads(h.get("data", ""))
        except (ValueError, RecursionError) as e:
            data, data_error = h.get("data"), f"data is not valid JSON: {e}"

        def loads(k: str) -> Any:
            try:
                return json.loads(h[k]) if h.get(k) else None
            except (ValueError, RecursionError):
                return h[k]

        return cls(
            id=job_id,
            queue=queue,
            name=h.get("name", ""),
            state=h.get("state", "unknown"),
            data=data,
            priority=_n(h.get("priority"), 0),
            max_attempts=_n(h.get("max_attempts"), 1),
            attempts_made=_n(h.get("attempts_made"), 0),
            stalled=_n(h.get("stalled"), 0),
            timeout=_f(h.get("timeout")) or 0.0,
            enqueued_at=_f(h.get("enqueued_at")),
            started_at=_f(h.get("started_at")),
            finished_at=_f(h.get("finished_at")),
            worker=h.get("worker"),
            error=h.get("error"),
            traceback=h.get("traceback"),
            returnvalue=loads("returnvalue"),
            progress=loads("progress"),
            backoff=h.get("backoff", ""),
            attempts=_log(h.get("log")),
            data_error=data_error,
            parent=_parent_ref(h.get("parent"), h.get("parent_base")),
        )

    @property
    def outcome(self) -> str:
        """``"completed"``, ``"dead"`` or ``"unfinished"`` (waiting, delayed or active)."""
        return self.state if self.state in ("completed", "dead") else "unfinished"

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready) of this snapshot."""
        d = dict(self.__dict__)
        d["attempts"] = [a.__dict__ for a in self.attempts]
        return d


class Job:
    """A job as the handler sees it.

    Attributes:
        id: Job id.  name: Job type.  data: Decoded payload.
        attempt: 1 for the first attempt, 2 for the first retry, ...
        queue: Queue name.  max_attempts: Attempts allowed in all.
        timeout: Per-attempt timeout in seconds (0 = none).
        wait: Seconds from enqueue to the start of this first attempt (Redis
            clock; None on later attempts).
    """

    __slots__ = ("id", "name", "data", "attempt", "queue", "max_attempts", "timeout", "backoff", "token",
                 "lock_lost", "_worker", "wait")

    def __init__(
        self,
        id: str,  # noqa: A002
        name: str,
        data: Any,
        attempt: int,
        queue: str,
        max_attempts: int,
        timeout: float,
        backoff: Backoff | None,
        token: str,
        worker: Worker | None = None,
    ) -> None:
        self.id = id
        self.name = name
        self.data = data
        self.attempt = attempt
        self.queue = queue
        self.max_attempts = max_attempts
        self.timeout = timeout
        self.backoff = backoff
        self.token = token
        self.lock_lost = False
        self._worker = worker
        self.wait: float | None = None

    async def progress(self, value: Any) -> None:
        """Report progress (any JSON value); stored and published as an event.

        Raises:
            LockLost: the worker no longer holds this job's lock.
        """
        if self._worker is None:
            raise RuntimeError("progress() needs a job run by a Worker")
        await self._worker._report_progress(self, value)

    # -- flows and fan-out (see qsim.engine.flow) ---------------------------
    async def children_values(self) -> dict[str, Any]:
        """Return values of this job's completed children, keyed by ``"<queue>:<child id>"``."""
        from qsim.engine import flow

        return await flow.children_values(self)

    async def children_failures(self) -> dict[str, str]:
        """Errors of this job's children that went to the DLQ, keyed by ``"<queue>:<child id>"``."""
        from qsim.engine import flow

        return await flow.children_failures(self)

    async def add_children(self, children: Sequence[tuple[Any, ...]], *, on_failure: str = "fail") -> list[EnqueuedJob]:
        """Fan out: add ``(queue, name, data[, options])`` children in one round trip; this job is their parent.

        Children whose ``job_id`` already names a child of this job are skipped
        (``created`` False; so a retried attempt may add the same children again).

        Raises:
            LockLost: the worker no longer holds this job's lock (nothing added).
            FlowError: a child id is taken, or (Cluster) a child queue is in another slot.
        """
        from qsim.engine import flow

        return await flow.add_children(self, children, on_failure=on_failure)

    async def move_to_waiting_children(self) -> None:
        """Free this job's slot while its children run (see :func:`qsim.engine.flow.move_to_waiting_children`).

        Returns at once when no child is pending; otherwise raises
        ``WaitingForChildren`` (let it propagate) and the handler runs again
        from the start, in the same attempt, once the children are done.
        """
        from qsim.engine import flow

        await flow.move_to_waiting_children(self)

    async def wait_children(self, *, progress: bool = True) -> dict[str, Any]:
        """Wait for every child added by :meth:`add_children`, reporting progress; returns :meth:`children_values`.

        Raises:
            ChildFailed: a child with the ``fail`` policy went to the DLQ.
        """
        from qsim.engine import flow

        return await flow.wait_children(self, progress=progress)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, queue={self.queue!r}, attempt={self.attempt})"
