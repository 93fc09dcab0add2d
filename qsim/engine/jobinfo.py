"""What is stored about a job: :class:`JobInfo` (a snapshot of its hash), its attempts, what ``add`` returns.

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
    log             one "start,end,outcome,worker;" entry per attempt that did
                    not complete (the latest 16 KB of entries are kept);
                    outcome: failed | timeout | stalled | released. A
                    completed job's last attempt is not written there (it is
                    attempt_started, finished_at and worker): readers add it
                    (:func:`attempt_log`; earlier engines wrote it)
    rkey            the value of the queue's rate-limit key field in the
                    payload, as text (keyed queues only; read at add time)

A field at its default is not stored: ``delay`` 0, ``backoff`` "", ``timeout`` 0,
``attempts_made`` 0 and ``stalled`` 0 are missing until they differ (``add``
writes only the others, so the hash every later script reads and writes is
smaller), and a ``returnvalue`` of null (a handler that returned None) is never
written; readers take a missing field as its default. ``priority`` is always
stored (scripts of earlier versions take a hash without it for a deleted job).

Flows (see :mod:`qsim.engine.flow`): a child has ``parent`` (the parent's id),
``parent_base`` (the parent queue's key base) and ``parent_policy`` (fail |
ignore); a parent has ``pending_children`` (children not finished) and, once a
"fail" child died, ``child_failed`` ("<queue>:<id>: <error>").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JobInfo", "Attempt", "EnqueuedJob", "JOB_STATES", "parse_log", "attempt_log"]

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


def attempt_log(h: Mapping[str, str | None]) -> str:
    """The ``log`` of job hash ``h`` with every attempt: a completed job's last attempt added as
    ``"<attempt_started>,<finished_at>,completed,<worker>;"`` (the engine leaves it out: those fields hold it),
    unless the log ends with it already (written by an earlier engine)."""
    log = h.get("log") or ""
    if h.get("state") != "completed" or not h.get("attempt_started") or not h.get("finished_at"):
        return log
    last = log.rstrip(";").rsplit(";", 1)[-1].split(",", 3)
    if len(last) == 4 and last[2] == "completed":
        return log
    return f"{log}{h['attempt_started']},{h['finished_at']},completed,{h.get('worker') or ''};"


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
            attempts=_log(attempt_log(h)),
            data_error=data_error,
            parent=_parent_ref(h.get("parent"), h.get("parent_base")),
        )

    @classmethod
    def unreadable(cls, queue: str, job_id: str, *, gone: bool = False) -> JobInfo:
        """A job whose key holds another type than a hash (overwritten by hand; the engine's scripts move such
        a key aside and dead-letter the job when they meet it), or with ``gone`` one whose hash is not there
        at all (deleted by hand, or evicted under a ``maxmemory-policy`` that evicts): nothing of it can be
        read, its state is "unknown" and ``error`` says why."""
        why = (f"job hash is gone: job {job_id!r} is listed but its key does not exist (deleted by hand, or "
               f"evicted by Redis' maxmemory-policy); there is nothing to retry, qsim dlq purge removes it"
               if gone else f"job hash is corrupt: the key of job {job_id!r} holds another type than a hash "
               f"(written by hand?)")
        return cls(id=job_id, queue=queue, name="", state="unknown", data=None, priority=0, max_attempts=1,
                   attempts_made=0, stalled=0, timeout=0.0, enqueued_at=None, started_at=None, finished_at=None,
                   worker=None, error=why, traceback=None, returnvalue=None, progress=None, backoff="")

    @property
    def outcome(self) -> str:
        """``"completed"``, ``"dead"`` or ``"unfinished"`` (waiting, delayed or active)."""
        return self.state if self.state in ("completed", "dead") else "unfinished"

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready) of this snapshot."""
        d = dict(self.__dict__)
        d["attempts"] = [a.__dict__ for a in self.attempts]
        return d
