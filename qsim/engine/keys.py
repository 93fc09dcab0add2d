"""Redis key names of a queue: the only place they are spelled out.

Every key of one queue shares the hash tag ``{queue}``, so a queue lives in
one Redis Cluster slot and its Lua scripts may touch all of its keys::

    qsim:{orders}:wait          ZSET  waiting job ids, score = priority * 2**32 + seq
    qsim:{orders}:delayed       ZSET  delayed job ids, score = due time (ms, Redis clock)
    qsim:{orders}:active        ZSET  locked job ids, score = lock expiry (ms, Redis clock)
    qsim:{orders}:completed     ZSET  completed job ids, score = finish time (ms)
    qsim:{orders}:dead          ZSET  dead-letter job ids, score = time of death (ms)
    qsim:{orders}:waiting-children ZSET  parents waiting for children (flows)
    qsim:{orders}:meta          HASH  paused, keep_count, keep_age_ms
    qsim:{orders}:marker        LIST  wake-up marker idle workers block on (BLPOP)
    qsim:{orders}:events        STREAM capped event stream
    qsim:{orders}:id            STRING counter for generated job ids
    qsim:{orders}:seq           STRING counter for FIFO order within a priority
    qsim:{orders}:job:<id>      HASH  one job (see qsim.engine.job)
    qsim:{orders}:children:<id> HASH  a parent's finished children: "<queue>:<id>" -> return value (JSON)
    qsim:{orders}:children-failed:<id>  HASH  its dead children: "<queue>:<id>" -> error
    qsim:{orders}:corrupt       SET   ids of dead jobs whose key held another type than a hash
                                      (the value is kept aside as ``job:<id>:corrupt``)
    qsim:{orders}:ratelimit     ZSET  recent job starts (score = start time, us) for the
                                      sliding rate limit; ``ratelimit:<value>`` per key value
    qsim:{orders}:lane:<value>  ZSET  with a keyed rate limit: the waiting ids of one key value,
                                      scored as in ``wait`` (which keeps every waiting id too)
    qsim:{orders}:lanes         ZSET  the non-empty lanes whose window may have room, score = the
                                      wait score of their best job
    qsim:{orders}:lanes-shut    ZSET  the non-empty lanes whose window is full, score = the time
                                      (us, Redis clock) it has room again
    qsim:{orders}:wrr:<worker>  HASH  a multi-queue worker's smooth-WRR state (kept on the
                                      worker's first queue; expires after an hour unused)

Queues in a group: ``QueueKeys("orders", group="shop")`` spells the keys
``qsim:{shop}:orders:wait`` etc. A worker serving several queues runs one
script over all of their keys, which on Redis Cluster is only allowed when
they live in one slot: queues served together by one worker must share a
group (the same ``group=`` on every Queue and on the Worker). On a single
Redis server any queues may be served together. Without a group a queue's
keys are ``qsim:{queue}:...`` as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qsim.names import MAX_NAME, check_unicode, validate_name  # the rules live below the engine: scenarios check them

__all__ = ["QueueKeys", "DEFAULT_PREFIX", "MAX_NAME", "validate_name", "check_unicode"]

DEFAULT_PREFIX = "qsim"


@dataclass(frozen=True)
class QueueKeys:
    """All Redis keys of one queue.

    Args:
        queue: The queue name (becomes the hash tag).
        prefix: The key prefix, ``"qsim"`` by default.
        group: Hash tag shared by several queues (replaces the queue's own
            tag), so one worker may serve them together on Redis Cluster.
    """

    queue: str
    prefix: str = DEFAULT_PREFIX
    group: str | None = None
    base: str = field(init=False)

    def __post_init__(self) -> None:
        validate_name("queue name", self.queue)
        validate_name("prefix", self.prefix)
        if self.group is None:
            object.__setattr__(self, "base", f"{self.prefix}:{{{self.queue}}}:")
        else:
            validate_name("group", self.group)
            object.__setattr__(self, "base", f"{self.prefix}:{{{self.group}}}:{self.queue}:")

    @property
    def tag(self) -> str:
        """The hash tag (the group, or the queue name)."""
        return self.group or self.queue

    @property
    def wait(self) -> str:
        return self.base + "wait"

    @property
    def delayed(self) -> str:
        return self.base + "delayed"

    @property
    def active(self) -> str:
        return self.base + "active"

    @property
    def completed(self) -> str:
        return self.base + "completed"

    @property
    def dead(self) -> str:
        return self.base + "dead"

    @property
    def waiting_children(self) -> str:
        return self.base + "waiting-children"

    @property
    def meta(self) -> str:
        return self.base + "meta"

    @property
    def corrupt(self) -> str:
        """Ids of jobs whose key held another type (kept aside as ``job:<id>:corrupt``; they are in the DLQ)."""
        return self.base + "corrupt"

    @property
    def marker(self) -> str:
        return self.base + "marker"

    @property
    def events(self) -> str:
        return self.base + "events"

    @property
    def id_counter(self) -> str:
        return self.base + "id"

    @property
    def seq(self) -> str:
        return self.base + "seq"

    @property
    def ratelimit(self) -> str:
        """Recent starts of the rate limit; ``<this>:<value>`` per key value when keyed."""
        return self.base + "ratelimit"

    def lane(self, value: str) -> str:
        """The waiting ids of one value of the rate-limit key (a keyed limit; see lua/fetch.lua)."""
        return self.base + "lane:" + value

    @property
    def lanes(self) -> str:
        """The lanes that may start a job, by the wait score of their best job."""
        return self.base + "lanes"

    @property
    def lanes_shut(self) -> str:
        """The lanes whose window is full, by the time (us) it has room again."""
        return self.base + "lanes-shut"

    def wrr(self, worker_id: str) -> str:
        """A worker's smooth weighted round-robin state."""
        return self.base + "wrr:" + worker_id

    @property
    def job_prefix(self) -> str:
        """Prefix of job hashes; the scripts append the job id."""
        return self.base + "job:"

    def job(self, job_id: str) -> str:
        """Key of one job's hash."""
        return self.base + "job:" + job_id

    def children(self, job_id: str) -> str:
        """A parent's finished children (flows): ``"<queue>:<id>"`` -> return value JSON."""
        return self.base + "children:" + job_id

    def children_failed(self, job_id: str) -> str:
        """A parent's children that went to the DLQ: ``"<queue>:<id>"`` -> error."""
        return self.base + "children-failed:" + job_id
