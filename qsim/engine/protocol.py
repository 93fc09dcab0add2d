"""Pure helpers: build each script's KEYS/ARGV and read its reply.

Shared by the sync :class:`~qsim.engine.queue.Queue`, the asyncio
:class:`~qsim.engine.queue.AsyncQueue` and the :class:`~qsim.engine.worker.Worker`;
nothing here does I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from qsim.engine.keys import QueueKeys
from qsim.engine.scripts import Call
from qsim.spec.settings import DEFAULT_EVENTS_MAXLEN

__all__ = [
    "JobSpec",
    "rate_key_value",
    "with_rate_key",
    "MAX_RATE_KEY",
    "RateKeyChanged",
    "Fetched",
    "MAX_PRIORITY",
    "EVENTS_MAXLEN",
    "add_call",
    "parse_add",
    "promote_call",
    "fetch_call",
    "fetch_multi_call",
    "parse_fetch",
    "parse_fetch_status",
    "FetchReply",
    "POLICIES",
    "complete_call",
    "fail_call",
    "extend_lock_call",
    "recover_stalled_call",
    "release_call",
    "retry_dead_call",
    "purge_dead_call",
    "progress_call",
    "park_call",
    "COMPLETE_CODES",
    "FAIL_CODES",
]

#: Priorities run from 0 (first) to MAX_PRIORITY; the wait score is priority * 2**32 + seq.
MAX_PRIORITY = 2**20 - 1
#: Approximate cap of each queue's event stream (the default of producers and workers; a worker setting).
EVENTS_MAXLEN = DEFAULT_EVENTS_MAXLEN

COMPLETE_CODES = {1: "completed", 0: "duplicate", -1: "lock_lost", -2: "missing", -3: "corrupt"}
FAIL_CODES = {1: "retrying", 2: "retrying", 3: "dead", 0: "duplicate", -1: "lock_lost", -2: "missing", -3: "corrupt"}


class JobSpec(NamedTuple):
    """One job to add, already validated and encoded.

    ``rkey_field`` is the rate-limit key (a payload field) of the job's queue
    as the producer knows it ("" = none) and ``rkey`` the value of that field
    in this job (:func:`rate_key_value`); the add scripts refuse a spec built
    for another key than the queue's (see :func:`with_rate_key`).
    """

    id: str
    name: str
    data: str
    priority: int
    delay_ms: int
    max_attempts: int
    backoff: str
    timeout: float
    rkey_field: str = ""
    rkey: str = ""


#: Key values longer than this (or that UTF-8 cannot encode) are replaced by a digest (they name a Redis key).
MAX_RATE_KEY = 200


def rate_key_value(data: Any, field: str) -> str:
    """The text of payload field ``field`` that keys the rate limit ("" when absent or not a scalar).

    Numbers keep every digit (``1234567890123456789``), an integral float is
    its integer (``1.0`` is ``"1"``), booleans are ``"true"``/``"false"``.
    """
    if not field or not isinstance(data, dict):
        return ""
    v = data.get(field)
    if isinstance(v, bool):
        text = "true" if v else "false"
    elif isinstance(v, int):
        text = str(v)
    elif isinstance(v, float):
        text = str(int(v)) if v.is_integer() else repr(v)
    elif isinstance(v, str):
        text = v
    else:
        return ""
    if len(text) > MAX_RATE_KEY or not _encodable(text):
        text = "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text


def _encodable(text: str) -> bool:
    """Whether UTF-8 can encode ``text`` (a lone surrogate cannot: the client would write "?" for it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def with_rate_key(spec: JobSpec, field: str) -> JobSpec:
    """``spec`` for a queue whose rate-limit key is ``field`` (its value read again from the payload)."""
    if spec.rkey_field == field:
        return spec
    return spec._replace(rkey_field=field, rkey=rate_key_value(json.loads(spec.data), field) if field else "")


class Fetched(NamedTuple):
    """One job taken by ``fetch``: raw strings from the hash (a corrupt hash may hold anything)."""

    id: str
    token: str
    name: str
    data: str
    attempts_made: str
    max_attempts: str
    backoff: str
    timeout: str
    queue_index: str = "1"  # 1-based index of the queue in the fetch call
    wait: str = ""  # seconds from enqueue to this first start ("" on later attempts)


#: Multi-queue fetch policies (see lua/fetch.lua).
POLICIES = ("priority", "ordered", "wrr")


class RateKeyChanged(Exception):
    """An add script refused specs built for another rate-limit key: ``fields`` maps queue key base -> key."""

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__(f"rate-limit keys are now {fields}")
        self.fields = fields


def add_call(k: QueueKeys, specs: Sequence[JobSpec]) -> Call:
    """One ``add`` call; the jobs are sent for the rate-limit key field of the first (the others are
    read again for it if they differ), their key values only when there is one."""
    field = specs[0].rkey_field if specs else ""
    args: list[Any] = [k.job_prefix, len(specs), field]
    for s in specs:
        if s.rkey_field != field:
            s = with_rate_key(s, field)
        args.extend(s[:8])
        if field:
            args.append(s.rkey)
    return Call("add", (k.wait, k.delayed, k.marker, k.id_counter, k.seq, k.meta), args)


def parse_add(reply: list[Any]) -> list[tuple[str, bool, str]]:
    """``(id, created, stored name)`` per job (the name of a job that existed already, else "");
    raises :class:`RateKeyChanged` when the script refused the specs."""
    if reply and isinstance(reply[0], int):
        raise RateKeyChanged({str(reply[i]): str(reply[i + 1]) for i in range(1, len(reply), 2)})
    return [(str(reply[i]), True, "") if reply[i + 1] == 1 else (str(reply[i]), False, str(reply[i + 1]))
            for i in range(0, len(reply), 2)]


def promote_call(k: QueueKeys, limit: int = 1000, maxlen: int = EVENTS_MAXLEN, rearm: bool = False) -> Call:
    """Promote due delayed jobs; ``rearm``: also push the marker when jobs wait and it is empty (lua/promote.lua)."""
    return Call("promote", (k.delayed, k.wait, k.seq, k.marker), (k.job_prefix, limit, maxlen, "1" if rearm else "0"))


def fetch_call(k: QueueKeys, n: int, lock_ms: int, worker_id: str, token_prefix: str,
               at_once: int | None = None) -> Call:
    return fetch_multi_call((k,), n, lock_ms, worker_id, token_prefix, at_once=at_once)


def fetch_multi_call(
    ks: Sequence[QueueKeys],
    n: int,
    lock_ms: int,
    worker_id: str,
    token_prefix: str,
    policy: str = "priority",
    weights: Sequence[int] | None = None,
    at_once: int | None = None,
) -> Call:
    """Fetch from several queues (in one hash slot on Cluster); ``weights`` in the order of ``ks``.

    ``at_once``: how many of the ``n`` jobs the worker starts at once (default all); the others are marked
    held until a :func:`complete_call` says their handler started (see lua/fetch.lua)."""
    keys: list[str] = []
    args: list[Any] = [n, lock_ms, worker_id, token_prefix, policy, n if at_once is None else at_once]
    for i, k in enumerate(ks):
        keys += (k.wait, k.active, k.meta, k.marker, k.ratelimit)
        args += (k.job_prefix, weights[i] if weights else 1)
    keys.append(ks[0].wrr(worker_id))
    return Call("fetch", keys, args)


def parse_fetch(reply: str) -> list[Fetched]:
    return parse_fetch_status(reply).jobs


class FetchReply(NamedTuple):
    """What a ``fetch`` call returned (see lua/fetch.lua)."""

    #: The jobs taken, in the order they were chosen.
    jobs: list[Fetched]
    #: ms until a rate-limited queue may start a job (-1: none is).
    wait_ms: int
    #: The (1-based) indexes of the queues whose rate limit holds back waiting jobs.
    held: list[int]
    #: Whether a queue of the call has a concurrency or rate limit set.
    limited: bool
    #: Redis' time of the call (Unix seconds): when the jobs were locked.
    at: float = 0.0


def parse_fetch_status(reply: str) -> FetchReply:
    """The jobs and status of a ``fetch`` reply."""
    r = json.loads(reply)
    status = r[0]
    at = float(status[2])
    return FetchReply([_fetched(j, at) for j in r[1:]], int(status[0]), [int(i) for i in status[3:]],
                      status[1] == "1", at)


def _fetched(job: list[str], at: float) -> Fetched:
    """A job of a fetch reply, its wait taken from the enqueue stamp the script returns on a first start."""
    try:
        stamp = float(job[9]) if job[9] else math.nan
    except ValueError:  # a hash edited by hand
        stamp = math.nan
    wait = f"{at - stamp:.6f}" if math.isfinite(stamp) else ""
    return Fetched(job[0], job[1], job[2], job[3], job[4], job[5], job[6], job[7], job[8], wait)


def complete_call(
    k: QueueKeys, maxlen: int, keep_count: int, keep_age_ms: int,
    items: Iterable[tuple[str, str, str] | tuple[str, str, str, int]],
    started: Sequence[tuple[str, str]] = (),
) -> Call:
    """Per job ``(id, token, return value JSON[, held_us])``: ``held_us``, the µs the job waited in the
    worker for a free slot (fetched ahead), moves its recorded start on by that much (default 0).
    ``started``: ``(id, token)`` of jobs fetched ahead whose handler has started since (their held mark
    is cleared; see lua/fetch.lua)."""
    args: list[Any] = [k.job_prefix, maxlen, keep_count, keep_age_ms, len(started)]
    for pair in started:
        args.extend(pair)
    for it in items:
        args.extend(it if len(it) == 4 else (*it, 0))
    return Call("complete", (k.active, k.completed, k.events, k.meta), args)


def fail_call(k: QueueKeys, maxlen: int, items: Iterable[tuple[Any, ...]]) -> Call:
    """Per job ``(id, token, error, traceback, delay_ms[, outcome[, held_us]])``: outcome ``"timeout"`` or
    ``"failed"`` (the default); ``held_us`` as for :func:`complete_call` (default 0)."""
    args: list[Any] = [k.job_prefix, maxlen]
    for it in items:
        args.extend((*it, "failed", 0)[:7] if len(it) == 5 else (*it, 0)[:7])
    return Call("fail", (k.active, k.wait, k.delayed, k.dead, k.events, k.marker, k.seq), args)


def extend_lock_call(k: QueueKeys, lock_ms: int, items: Iterable[tuple[str, str]], maxlen: int = EVENTS_MAXLEN) -> Call:
    args: list[Any] = [k.job_prefix, lock_ms, maxlen]
    for it in items:
        args.extend(it)
    return Call("extend_lock", (k.active,), args)


def recover_stalled_call(k: QueueKeys, maxlen: int, max_stalled: int, limit: int = 1000) -> Call:
    return Call(
        "recover_stalled",
        (k.active, k.wait, k.dead, k.events, k.marker, k.seq),
        (k.job_prefix, maxlen, max_stalled, limit),
    )


def release_call(k: QueueKeys, maxlen: int, items: Iterable[tuple[str, str] | tuple[str, str, bool]]) -> Call:
    """Hand jobs back: ``(id, token[, started])``; ``started`` (default True) False for a job whose handler
    never ran (no attempt is logged for it)."""
    args: list[Any] = [k.job_prefix, maxlen]
    for it in items:
        args.extend((it[0], it[1], "1" if len(it) < 3 or it[2] else ""))
    return Call("release", (k.active, k.wait, k.events, k.marker, k.seq), args)


def retry_dead_call(k: QueueKeys, maxlen: int, ids: Sequence[str], limit: int = 1000) -> Call:
    return Call("retry_dead", (k.dead, k.wait, k.events, k.marker, k.seq, k.waiting_children),
                (k.job_prefix, maxlen, limit, *ids))


def purge_dead_call(k: QueueKeys, limit: int = 1000, maxlen: int = EVENTS_MAXLEN) -> Call:
    return Call("purge_dead", (k.dead,), (k.job_prefix, limit, maxlen))


def progress_call(k: QueueKeys, maxlen: int, job_id: str, token: str, value_json: str) -> Call:
    return Call("progress", (k.events,), (k.job_prefix, maxlen, job_id, token, value_json))


def park_call(k: QueueKeys, maxlen: int, job_id: str, token: str) -> Call:
    return Call("park", (k.active, k.waiting_children, k.wait, k.meta, k.marker), (k.job_prefix, maxlen, job_id, token))
