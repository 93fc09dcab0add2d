"""Producers: :class:`Queue` (sync redis-py client) and :class:`AsyncQueue` (redis.asyncio).

Both build the same :class:`~qsim.engine.scripts.Op` objects in
:class:`QueueCore` (pure: keys, validation, encoding, reply parsing) and only
differ in how they send them, so every operation is written once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio

from qsim.engine import limiter
from qsim.engine.backoff import Backoff
from qsim.engine.connection import DEFAULT_REDIS_URL, check_decoded, connect, connect_async
from qsim.engine.jobinfo import EnqueuedJob, JobInfo
from qsim.engine.keys import DEFAULT_PREFIX, MAX_NAME, QueueKeys, check_unicode
from qsim.engine.payload import (
    DEFAULT_MAX_PAYLOAD,
    DEFAULT_REDACT,
    DEFAULT_WARN_PAYLOAD,
    encode_payload,
    normalize_fields,
    redact,
    scrub_text,
)
from qsim.engine.protocol import (
    EVENTS_MAXLEN,
    MAX_PRIORITY,
    JobSpec,
    RateKeyChanged,
    add_call,
    parse_add,
    purge_dead_call,
    rate_key_value,
    retry_dead_call,
    with_rate_key,
)
from qsim.engine.scripts import Op, ScriptSet, command, run_op, run_op_async
from qsim.errors import EngineError, JobNotFound

__all__ = ["Queue", "AsyncQueue", "QueueCore", "DEFAULT_KEEP_COMPLETED", "DEFAULT_EVENTS_MAXLEN", "MAX_NAME"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: Completed jobs kept per queue unless ``set_retention`` says otherwise.
DEFAULT_KEEP_COMPLETED = 10_000
#: Approximate cap of each queue's event stream.
DEFAULT_EVENTS_MAXLEN = EVENTS_MAXLEN
_CHUNK = 1000


def _redis_url_kwargs() -> dict[str, Any]:
    """Client options of both producers. Neither resends a command after a connection error (redis-py's
    default without ``retry_on_error``): the error is raised as RedisUnavailable, and the caller retries
    an add with the same ``job_id`` (a no-op when the first one was written)."""
    return {"decode_responses": True, "socket_connect_timeout": 5.0, "health_check_interval": 0}


class QueueCore:
    """Configuration and pure operation builders shared by both producers.

    Args:
        name: Queue name.
        prefix: Key prefix (``"qsim"``).
        max_payload: Refuse payloads above this many bytes.
        warn_payload: Log a warning above this many bytes.
        redact: Field names whose values are hidden in logs, events and the
            DLQ listing (case-insensitive).
        events_maxlen: Approximate cap of the event stream.
        group: Hash tag shared with other queues that one worker serves
            together on Redis Cluster (see :mod:`qsim.engine.keys`); the
            worker must be given the same group.
    """

    def __init__(
        self,
        name: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        group: str | None = None,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        warn_payload: int = DEFAULT_WARN_PAYLOAD,
        redact: Iterable[str] = DEFAULT_REDACT,
        events_maxlen: int = DEFAULT_EVENTS_MAXLEN,
    ) -> None:
        self.keys = QueueKeys(name, prefix, group)
        self.name = name
        if not isinstance(max_payload, int) or max_payload < 1:
            raise ValueError(f"max_payload must be an int >= 1, got {max_payload!r}")
        if not isinstance(warn_payload, int) or warn_payload < 0:
            raise ValueError(f"warn_payload must be an int >= 0, got {warn_payload!r}")
        if not isinstance(events_maxlen, int) or events_maxlen < 1:
            raise ValueError(f"events_maxlen must be an int >= 1, got {events_maxlen!r}")
        self.max_payload = max_payload
        self.warn_payload = warn_payload
        self.redact_fields = normalize_fields(redact)
        self.events_maxlen = events_maxlen
        #: The queue's rate-limit key (payload field) as last heard from Redis ("" = none); the add
        #: scripts say when it changed and the specs are read again.
        self.rate_field = ""

    # -- validation -------------------------------------------------------
    def spec(
        self,
        name: str,
        data: Any = None,
        *,
        priority: int = 0,
        delay: float = 0.0,
        attempts: int = 1,
        backoff: Backoff | None = None,
        timeout: float = 0.0,
        job_id: str | None = None,
    ) -> JobSpec:
        """Validate and encode one job (raises ValueError / PayloadError)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"job name must be a non-empty string, got {name!r}")
        if len(name) > MAX_NAME:
            raise ValueError(f"job name must be at most {MAX_NAME} characters, got {len(name)} ({name[:40]!r}...)")
        check_unicode("job name", name)
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= MAX_PRIORITY:
            raise ValueError(f"priority must be an int in [0, {MAX_PRIORITY}], got {priority!r}")
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay < math.inf:
            raise ValueError(f"delay must be a finite number of seconds >= 0, got {delay!r}")
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"attempts must be an int >= 1, got {attempts!r}")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise ValueError(f"backoff must be a Backoff or None, got {backoff!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < math.inf:
            raise ValueError(f"timeout must be a finite number of seconds >= 0 (0 = none), got {timeout!r}")
        if job_id is not None:
            if not isinstance(job_id, str) or not job_id or any(c in job_id for c in ",; "):
                raise ValueError(f"job_id must be a non-empty string without ',', ';' or spaces, got {job_id!r}")
            if len(job_id) > MAX_NAME:
                raise ValueError(f"job_id must be at most {MAX_NAME} characters, got {len(job_id)} "
                                 f"({job_id[:40]!r}...)")
            check_unicode("job_id", job_id)
            if job_id.isascii() and job_id.isdigit():
                raise ValueError(f"job_id must not be all digits (ids of that form are the generated ones: give "
                                 f"yours a letter, e.g. 'order-{job_id}'), got {job_id!r}")
        text = encode_payload(
            data, what=f"job {name!r} data", max_bytes=self.max_payload, warn_bytes=self.warn_payload
        )
        field = self.rate_field
        return JobSpec(
            job_id or "",
            name,
            text,
            priority,
            int(round(delay * 1000)),
            attempts,
            backoff.to_json() if backoff else "",
            float(timeout),
            field,
            rate_key_value(data, field) if field else "",
        )

    # -- operations ---------------------------------------------------------
    def op_add(self, specs: Sequence[JobSpec]) -> Op[list[EnqueuedJob]]:
        """Add ``specs`` (chunks of 1000 per script call, one round trip).

        A chunk the script refuses because the queue's rate-limit key is not
        the one its specs were read for (``set_rate_limit(key=...)`` since this
        producer last added) is read again for that key and resent, alone.
        """
        chunks = [list(specs[i : i + _CHUNK]) for i in range(0, len(specs), _CHUNK)]
        done: list[list[EnqueuedJob]] = [[] for _ in chunks]
        return self._op_add_chunks(chunks, done, list(range(len(chunks))), 0)

    def _op_add_chunks(self, chunks: list[list[JobSpec]], done: list[list[EnqueuedJob]], todo: list[int],
                       tries: int) -> Op[list[EnqueuedJob]]:
        def parse(replies: list[Any]) -> Any:
            again = []
            for i, reply in zip(todo, replies):
                try:
                    pairs = parse_add(reply)
                except RateKeyChanged as e:
                    self.rate_field = e.fields.get(self.keys.base, "")
                    chunks[i] = [with_rate_key(s, self.rate_field) for s in chunks[i]]
                    again.append(i)
                    continue
                done[i] = [EnqueuedJob(jid, stored or s.name, self.name, created)
                           for (jid, created, stored), s in zip(pairs, chunks[i])]
            if again:
                if tries >= 3:
                    raise EngineError(f"the rate-limit key of queue {self.name!r} keeps changing; jobs not added")
                return self._op_add_chunks(chunks, done, again, tries + 1)
            out = [e for d in done for e in d]
            for added in out:
                if not added.created:
                    logger.debug("job %s already exists in queue %s: not added again", added.id, self.name)
            return out

        return Op([add_call(self.keys, chunks[i]) for i in todo], parse)

    def op_get_job(self, job_id: str, redact_data: bool = False) -> Op[JobInfo]:
        check_unicode("job_id", job_id)

        def parse(replies: list[Any]) -> JobInfo:
            if _wrong_type(replies[0]):
                raise EngineError(f"{JobInfo.unreadable(self.name, job_id).error}, in queue {self.name!r}")
            if not replies[0]:
                raise JobNotFound(f"no job {job_id!r} in queue {self.name!r}")
            info = JobInfo.from_hash(self.name, job_id, replies[0])
            return self._redacted(info) if redact_data else info

        return Op([command("HGETALL", self.keys.job(job_id))], parse, errors_in_replies=True)

    def _redacted(self, info: JobInfo) -> JobInfo:
        f = self.redact_fields
        if not f:
            return info
        from dataclasses import replace

        return replace(
            info,
            data=redact(info.data, f),
            error=scrub_text(info.error or "", info.data, f) or info.error,
            traceback=scrub_text(info.traceback or "", info.data, f) or info.traceback,
            returnvalue=redact(info.returnvalue, f),
        )

    def op_counts(self) -> Op[dict[str, int]]:
        k = self.keys
        names = ("waiting", "active", "delayed", "completed", "dead", "waiting_children")
        keys = (k.wait, k.active, k.delayed, k.completed, k.dead, k.waiting_children)
        return Op([command("ZCARD", key) for key in keys], lambda r: dict(zip(names, map(int, r))))

    def op_pause(self) -> Op[None]:
        return Op([command("HSET", self.keys.meta, "paused", "1")], lambda r: None)

    def op_resume(self) -> Op[None]:
        k = self.keys
        return Op([command("HDEL", k.meta, "paused"), command("RPUSH", k.marker, "1"),
                   command("LTRIM", k.marker, -1, -1)], lambda r: None)

    def op_is_paused(self) -> Op[bool]:
        return Op([command("HGET", self.keys.meta, "paused")], lambda r: r[0] == "1")

    def op_set_retention(self, keep_count: int | None, keep_age: float | None) -> Op[None]:
        if keep_count is not None and (not isinstance(keep_count, int) or keep_count < 0):
            raise ValueError(f"keep_count must be an int >= 0 or None (keep all), got {keep_count!r}")
        if keep_age is not None and (not isinstance(keep_age, (int, float)) or not keep_age >= 0):
            raise ValueError(f"keep_age must be >= 0 seconds or None (no limit), got {keep_age!r}")
        count = -1 if keep_count is None else keep_count
        age = -1 if keep_age is None else int(keep_age * 1000)
        return Op([command("HSET", self.keys.meta, "keep_count", count, "keep_age_ms", age)], lambda r: None)

    def _op_hashes(self, ids: list[str], redact_data: bool, acc: list[JobInfo],
                   gone: bool = False) -> Op[list[JobInfo]]:
        """The jobs of ``ids``; one whose key is not a hash is listed as unreadable, one whose key is gone
        too with ``gone`` (else left out)."""
        chunk, rest = ids[:_CHUNK * 5], ids[_CHUNK * 5 :]

        def parse(replies: list[Any]) -> Any:
            for jid, h in zip(chunk, replies):
                if _wrong_type(h):  # one key overwritten by hand: listed as unreadable, the others still read
                    acc.append(JobInfo.unreadable(self.name, jid))
                elif h:
                    info = JobInfo.from_hash(self.name, jid, h)
                    acc.append(self._redacted(info) if redact_data else info)
                elif gone:
                    acc.append(JobInfo.unreadable(self.name, jid, gone=True))
            return self._op_hashes(rest, redact_data, acc, gone) if rest else acc

        return Op([command("HGETALL", self.keys.job(j)) for j in chunk], parse, errors_in_replies=True)

    def op_dead(self, limit: int = 100, offset: int = 0) -> Op[list[JobInfo]]:
        def parse(replies: list[Any]) -> Any:
            ids = list(replies[0])
            return self._op_hashes(ids, True, [], gone=True) if ids else []  # every id the DLQ counts

        return Op([command("ZRANGE", self.keys.dead, offset, offset + limit - 1)], parse)

    def op_job_records(self) -> Op[list[JobInfo]]:
        k = self.keys
        sets = (k.wait, k.delayed, k.active, k.completed, k.dead, k.waiting_children)

        def parse(replies: list[Any]) -> Any:
            ids = sorted({i for r in replies for i in r}, key=lambda s: (len(s), s))
            return self._op_hashes(ids, False, []) if ids else []

        return Op([command("ZRANGE", s, 0, -1) for s in sets], parse)

    def op_retry_dead(self, ids: Sequence[str], all_jobs: bool) -> Op[list[str]]:
        if bool(ids) == bool(all_jobs):
            raise ValueError("retry_dead needs job ids or all_jobs=True (not both)")
        for job_id in ids:
            check_unicode("job_id", job_id)
        acc: list[str] = []

        def parse(replies: list[Any]) -> Any:
            acc.extend(replies[0])
            if all_jobs and len(replies[0]) == _CHUNK:
                return Op([retry_dead_call(self.keys, self.events_maxlen, (), _CHUNK)], parse)
            return acc

        return Op([retry_dead_call(self.keys, self.events_maxlen, list(ids), _CHUNK)], parse)

    def op_purge_dead(self) -> Op[int]:
        total = [0]

        def parse(replies: list[Any]) -> Any:
            total[0] += int(replies[0])
            if int(replies[0]) == _CHUNK:
                return Op([purge_dead_call(self.keys, _CHUNK, self.events_maxlen)], parse)
            return total[0]

        return Op([purge_dead_call(self.keys, _CHUNK, self.events_maxlen)], parse)

    def op_events(self, count: int = 100) -> Op[list[dict[str, str]]]:
        def parse(replies: list[Any]) -> list[dict[str, str]]:
            return [{"id": sid, **fields} for sid, fields in reversed(replies[0])]

        return Op([command("XREVRANGE", self.keys.events, "+", "-", "COUNT", count)], parse)

    @staticmethod
    def bulk_specs(core: QueueCore, jobs: Iterable[Any]) -> list[JobSpec]:
        specs = []
        for j in jobs:
            if isinstance(j, JobSpec):
                specs.append(j)
            elif isinstance(j, tuple) and len(j) == 2:
                specs.append(core.spec(j[0], j[1]))
            elif isinstance(j, tuple) and len(j) == 3 and isinstance(j[2], dict):
                specs.append(core.spec(j[0], j[1], **j[2]))
            else:
                raise ValueError(f"add_bulk takes (name, data) or (name, data, options) tuples, got {j!r}")
        return specs


class Queue(QueueCore):
    """Sync producer and admin handle of one queue (web apps, Locust/gevent).

    Args:
        name: Queue name.
        redis: A ``redis://`` URL (``redis+cluster://`` for Redis Cluster), or a
            ``redis.Redis`` / ``redis.cluster.RedisCluster`` made with ``decode_responses=True``.
        **options: See :class:`QueueCore`.

    Example::

        q = Queue("orders", redis="redis://localhost:6379/0")
        q.add("cut", {"order_id": 17}, priority=1, attempts=3, job_id="order-17")
    """

    def __init__(self, name: str, *, redis: str | redis.Redis = DEFAULT_REDIS_URL, **options: Any) -> None:  # noqa: F811
        super().__init__(name, **options)
        if isinstance(redis, str):
            self.client: Any = connect(redis, **_redis_url_kwargs())
            self._owns = True
        else:
            _check_decoded(redis)
            self.client, self._owns = redis, False
        self.scripts = ScriptSet(self.client)

    def _run(self, op: Op[T], where: str) -> T:
        return run_op(self.client, self.scripts, op, f"{where} on queue {self.name!r}")

    def add(
        self,
        name: str,
        data: Any = None,
        *,
        priority: int = 0,
        delay: float = 0.0,
        attempts: int = 1,
        backoff: Backoff | None = None,
        timeout: float = 0.0,
        job_id: str | None = None,
    ) -> EnqueuedJob:
        """Add one job.

        Args:
            name: Job type.  data: JSON payload.
            priority: 0 runs first; equal priorities are FIFO.
            delay: Seconds before the job may run.
            attempts: Total attempts before the dead-letter queue.
            backoff: Delay between attempts (``Backoff.fixed`` / ``Backoff.exponential``).
            timeout: Per-attempt timeout in seconds (0 = none).
            job_id: Your id (not all digits: that is the form of generated ids); adding an
                existing id again is a no-op (``created=False``, the stored job's name).

        Raises:
            PayloadError: ``data`` is not plain JSON or too large (nothing is written).
            RedisUnavailable: Redis cannot be reached or the connection broke; the job may or may
                not have been written (nothing is resent behind your back): retry with the same
                ``job_id`` to be safe.
        """
        spec = self.spec(name, data, priority=priority, delay=delay, attempts=attempts, backoff=backoff,
                         timeout=timeout, job_id=job_id)
        return self._run(self.op_add([spec]), "add")[0]

    def add_bulk(self, jobs: Iterable[Any]) -> list[EnqueuedJob]:
        """Add many ``(name, data[, options])`` jobs in one round trip."""
        specs = self.bulk_specs(self, jobs)
        return self._run(self.op_add(specs), "add_bulk") if specs else []

    def get_job(self, job_id: str, *, redact: bool = False) -> JobInfo:
        """The stored job (raises JobNotFound)."""
        return self._run(self.op_get_job(job_id, redact), "get_job")

    def counts(self) -> dict[str, int]:
        """Jobs per state: waiting, active, delayed, completed, dead, waiting_children."""
        return self._run(self.op_counts(), "counts")

    def pause(self) -> None:
        """Workers stop taking jobs from this queue (running ones finish)."""
        self._run(self.op_pause(), "pause")

    def resume(self) -> None:
        """Undo :meth:`pause` and wake idle workers."""
        self._run(self.op_resume(), "resume")

    def is_paused(self) -> bool:
        return self._run(self.op_is_paused(), "is_paused")

    def set_retention(self, *, keep_count: int | None = DEFAULT_KEEP_COMPLETED, keep_age: float | None = None) -> None:
        """Keep at most ``keep_count`` completed jobs and none older than ``keep_age`` s (None: no limit)."""
        self._run(self.op_set_retention(keep_count, keep_age), "set_retention")

    def set_concurrency_limit(self, n: int | None) -> None:
        """At most ``n`` active jobs of this queue, all workers together (None: no limit)."""
        self._run(limiter.op_set_concurrency_limit(self.keys, n), "set_concurrency_limit")

    def set_rate_limit(self, max: int | None, per: float = 1.0, *, key: str | None = None) -> None:  # noqa: A002
        """At most ``max`` job starts in any ``per`` s window, all workers together; with ``key``,
        per value of that payload field (None: no limit). See :mod:`qsim.engine.limiter`."""
        self._run(limiter.op_set_rate_limit(self.keys, max, per, key), "set_rate_limit")
        self.rate_field = (key or "") if max is not None else ""

    def set_aging(self, seconds: float | None) -> None:
        """A waiting job gains one priority level per ``seconds`` waited (None: off)."""
        self._run(limiter.op_set_aging(self.keys, seconds), "set_aging")

    def limits(self) -> dict[str, Any]:
        """The queue's limits and their use: concurrency_limit, active, rate_limit, rate_window, aging."""
        return self._run(limiter.op_limits(self.keys), "limits")

    def dead(self, limit: int = 100, offset: int = 0) -> list[JobInfo]:
        """Dead-letter jobs, oldest first, sensitive fields redacted."""
        return self._run(self.op_dead(limit, offset), "dead")

    def retry_dead(self, *job_ids: str, all_jobs: bool = False) -> list[str]:
        """Move the given dead jobs (or all of them) back to waiting; returns their ids."""
        return self._run(self.op_retry_dead(job_ids, all_jobs), "retry_dead")

    def purge_dead(self) -> int:
        """Delete every dead-letter job; returns how many."""
        return self._run(self.op_purge_dead(), "purge_dead")

    def job_records(self) -> list[JobInfo]:
        """Every job still stored (any state) with its timestamps and attempts."""
        return self._run(self.op_job_records(), "job_records")

    def events(self, count: int = 100) -> list[dict[str, str]]:
        """The last ``count`` events of the stream, oldest first."""
        return self._run(self.op_events(count), "events")

    def close(self) -> None:
        """Close the client this queue made (a client passed in is left open)."""
        if self._owns:
            self.client.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncQueue(QueueCore):
    """Asyncio producer and admin handle of one queue; same methods as :class:`Queue`, awaited."""

    def __init__(
        self, name: str, *, redis: str | redis.asyncio.Redis = DEFAULT_REDIS_URL, **options: Any  # noqa: F811
    ) -> None:
        super().__init__(name, **options)
        if isinstance(redis, str):
            # Like the sync Queue: no command is resent on a connection error (an add whose reply was lost
            # may have been written; resending one without job_id would add the job twice).
            self.client: Any = connect_async(redis, **_redis_url_kwargs())
            self._owns = True
        else:
            _check_decoded(redis)
            self.client, self._owns = redis, False
        self.scripts = ScriptSet(self.client)

    async def _run(self, op: Op[T], where: str) -> T:
        return await run_op_async(self.client, self.scripts, op, f"{where} on queue {self.name!r}")

    async def add(
        self,
        name: str,
        data: Any = None,
        *,
        priority: int = 0,
        delay: float = 0.0,
        attempts: int = 1,
        backoff: Backoff | None = None,
        timeout: float = 0.0,
        job_id: str | None = None,
    ) -> EnqueuedJob:
        """Add one job (see :meth:`Queue.add`)."""
        spec = self.spec(name, data, priority=priority, delay=delay, attempts=attempts, backoff=backoff,
                         timeout=timeout, job_id=job_id)
        return (await self._run(self.op_add([spec]), "add"))[0]

    async def add_bulk(self, jobs: Iterable[Any]) -> list[EnqueuedJob]:
        specs = self.bulk_specs(self, jobs)
        return await self._run(self.op_add(specs), "add_bulk") if specs else []

    async def get_job(self, job_id: str, *, redact: bool = False) -> JobInfo:
        return await self._run(self.op_get_job(job_id, redact), "get_job")

    async def counts(self) -> dict[str, int]:
        return await self._run(self.op_counts(), "counts")

    async def pause(self) -> None:
        await self._run(self.op_pause(), "pause")

    async def resume(self) -> None:
        await self._run(self.op_resume(), "resume")

    async def is_paused(self) -> bool:
        return await self._run(self.op_is_paused(), "is_paused")

    async def set_retention(
        self, *, keep_count: int | None = DEFAULT_KEEP_COMPLETED, keep_age: float | None = None
    ) -> None:
        await self._run(self.op_set_retention(keep_count, keep_age), "set_retention")

    async def set_concurrency_limit(self, n: int | None) -> None:
        await self._run(limiter.op_set_concurrency_limit(self.keys, n), "set_concurrency_limit")

    async def set_rate_limit(self, max: int | None, per: float = 1.0, *, key: str | None = None) -> None:  # noqa: A002
        await self._run(limiter.op_set_rate_limit(self.keys, max, per, key), "set_rate_limit")
        self.rate_field = (key or "") if max is not None else ""

    async def set_aging(self, seconds: float | None) -> None:
        await self._run(limiter.op_set_aging(self.keys, seconds), "set_aging")

    async def limits(self) -> dict[str, Any]:
        return await self._run(limiter.op_limits(self.keys), "limits")

    async def dead(self, limit: int = 100, offset: int = 0) -> list[JobInfo]:
        return await self._run(self.op_dead(limit, offset), "dead")

    async def retry_dead(self, *job_ids: str, all_jobs: bool = False) -> list[str]:
        return await self._run(self.op_retry_dead(job_ids, all_jobs), "retry_dead")

    async def purge_dead(self) -> int:
        return await self._run(self.op_purge_dead(), "purge_dead")

    async def job_records(self) -> list[JobInfo]:
        return await self._run(self.op_job_records(), "job_records")

    async def events(self, count: int = 100) -> list[dict[str, str]]:
        return await self._run(self.op_events(count), "events")

    async def close(self) -> None:
        """Close the client this queue made (a client passed in is left open)."""
        if self._owns:
            await self.client.aclose()

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _wrong_type(reply: Any) -> bool:
    """Whether a reply is Redis' WRONGTYPE error (a job key overwritten by hand); another error is raised."""
    if isinstance(reply, Exception):
        if str(reply).startswith("WRONGTYPE"):
            return True
        raise reply
    return False


def _check_decoded(client: Any) -> None:
    check_decoded(client)
