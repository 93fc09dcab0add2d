"""A worker's settings: :class:`WorkerSettings`, validated once, read by every part of the worker."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from qsim.engine.connection import DEFAULT_REDIS_URL, is_cluster_url
from qsim.engine.context import Limits
from qsim.engine.keys import DEFAULT_PREFIX, QueueKeys, check_unicode
from qsim.engine.payload import DEFAULT_MAX_PAYLOAD, DEFAULT_REDACT, normalize_fields
from qsim.engine.protocol import POLICIES
from qsim.engine.queue import DEFAULT_EVENTS_MAXLEN, DEFAULT_KEEP_COMPLETED

__all__ = ["WorkerSettings"]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """Everything a :class:`~qsim.engine.worker.Worker` is configured with but its handler.

    The fields are the Worker's keyword arguments (see its docstring);
    ``queues`` is a name or a list of names. Each is checked here, and a bad
    one raises ``ValueError`` quoting it. The derived values (keys, weights
    in queue order, milliseconds, the worker id) are computed once.
    """

    queues: str | Sequence[str]
    policy: str = "priority"
    weights: Mapping[str, int] | None = None
    group: str | None = None
    redis: str = DEFAULT_REDIS_URL
    concurrency: int = 10
    lock_duration: float = 30.0
    stalled_interval: float = 30.0
    max_stalled: int = 1
    shutdown_grace: float = 30.0
    prefix: str = DEFAULT_PREFIX
    redact: Sequence[str] = DEFAULT_REDACT
    max_payload: int = DEFAULT_MAX_PAYLOAD
    events_maxlen: int = DEFAULT_EVENTS_MAXLEN
    keep_completed: int | None = DEFAULT_KEEP_COMPLETED
    keep_completed_for: float | None = None
    block_timeout: float = 5.0
    batch_size: int = 16
    max_inflight: int = 2
    prefetch: int | str = "auto"
    handle_signals: bool = True
    worker_id: str | None = None

    # -- derived (computed in __post_init__) --------------------------------------
    #: The queue names, in order.
    names: tuple[str, ...] = field(init=False)
    #: The keys of each queue, in the order of :attr:`names`.
    keys: tuple[QueueKeys, ...] = field(init=False)
    #: The wrr weight of each queue, in the order of :attr:`names`.
    weight_list: tuple[int, ...] = field(init=False)
    #: This worker's name in job records (``worker_id`` or host:pid:random; no "," or ";").
    id: str = field(init=False)
    lock_ms: int = field(init=False)
    #: Completed jobs kept (-1: all) and their age limit in ms (-1: none), as the complete script takes them.
    keep_count: int = field(init=False)
    keep_age_ms: int = field(init=False)
    limits: Limits = field(init=False)

    def __post_init__(self) -> None:
        queues = self.queues
        names = [queues] if isinstance(queues, str) else list(queues)
        if not names:
            raise ValueError(f"queues must name at least one queue, got {queues!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"queues must not repeat a name, got {names!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        weights = dict(self.weights or {})
        for q, w in weights.items():
            if q not in names:
                raise ValueError(f"weights name a queue this worker does not serve: {q!r} (queues: {names!r})")
            if not _is_int(w) or w < 1:
                raise ValueError(f"weight of queue {q!r} must be an int >= 1, got {w!r}")
        if not isinstance(self.redis, str):
            raise ValueError(f"redis must be a redis:// URL, got {self.redis!r}")
        if not _is_int(self.concurrency) or self.concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, got {self.concurrency!r}")
        for what, v in (("lock_duration", self.lock_duration), ("stalled_interval", self.stalled_interval),
                        ("block_timeout", self.block_timeout)):
            if not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{what} must be > 0 seconds, got {v!r}")
        if not isinstance(self.shutdown_grace, (int, float)) or not self.shutdown_grace >= 0:
            raise ValueError(f"shutdown_grace must be >= 0 seconds, got {self.shutdown_grace!r}")
        if not _is_int(self.max_stalled) or self.max_stalled < 0:
            raise ValueError(f"max_stalled must be an int >= 0, got {self.max_stalled!r}")
        for what, n in (("batch_size", self.batch_size), ("max_inflight", self.max_inflight)):
            if not _is_int(n) or n < 1:
                raise ValueError(f"{what} must be an int >= 1, got {n!r}")
        p = self.prefetch
        if p != "auto" and not (isinstance(p, int) and _is_int(p) and p >= 0):
            raise ValueError(f"prefetch must be 'auto' or an int >= 0, got {self.prefetch!r}")
        kc, kf = self.keep_completed, self.keep_completed_for
        if kc is not None and (not isinstance(kc, int) or kc < 0):
            raise ValueError(f"keep_completed must be an int >= 0 or None, got {kc!r}")
        if kf is not None and (not _is_number(kf) or not kf >= 0):
            raise ValueError(f"keep_completed_for must be >= 0 seconds or None, got {kf!r}")
        keys = tuple(QueueKeys(q, self.prefix, self.group) for q in names)
        if len(names) > 1 and self.group is None and is_cluster_url(self.redis):
            raise ValueError(f"serving several queues on Redis Cluster needs a shared group= (hash tag), got "
                             f"queues {names!r} without one")
        if isinstance(self.worker_id, str):
            check_unicode("worker_id", self.worker_id)
        wid = self.worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        derived = {
            "lock_duration": float(self.lock_duration),
            "stalled_interval": float(self.stalled_interval),
            "shutdown_grace": float(self.shutdown_grace),
            "block_timeout": float(self.block_timeout),
            "names": tuple(names),
            "keys": keys,
            "weight_list": tuple(weights.get(q, 1) for q in names),
            "id": wid.replace(",", "_").replace(";", "_"),
            "lock_ms": int(float(self.lock_duration) * 1000),
            "keep_count": -1 if kc is None else kc,
            "keep_age_ms": -1 if kf is None else int(kf * 1000),
            "limits": Limits(self.max_payload, self.events_maxlen, normalize_fields(self.redact)),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def redact_fields(self) -> frozenset[str]:
        """The normalized sensitive field names."""
        return self.limits.redact
