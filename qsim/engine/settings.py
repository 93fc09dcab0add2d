"""A worker's settings: :class:`WorkerSettings`, the one definition every surface is derived from.

Each field carries a :class:`~qsim.spec.settings.Setting` (``field.metadata["setting"]``): its
help line, its bounds, the word for None on a command line, and -- for a field a scenario run does
not take from ``[engine]`` -- where the run takes it from. From the fields come

* the validation (``WorkerSettings(...)`` raises ``ValueError`` quoting a bad value);
* ``Worker(queues, handler, **options)`` (:class:`~qsim.engine.worker.Worker`): the keywords are the fields;
* the command line (:meth:`WorkerSettings.add_arguments`, :meth:`~WorkerSettings.from_args`,
  :meth:`~WorkerSettings.to_argv`), one flag per field (``lock_duration`` is ``--lock-duration``):
  ``qsim worker``'s flags, and the argv of the pool worker processes that ``qsim run`` and Locust's
  ``--start-workers`` start (``python -m qsim.harness.pool_worker``, :mod:`qsim.harness.processes`);
* the Scenario's ``[engine]`` keys: :class:`~qsim.spec.settings.SharedSettings` holds the fields
  every worker of a deployment shares; ``qsim.spec.scenario.EngineSettings`` extends it too, so each of
  them is an ``[engine]`` key, parsed by its bounds and handed to every pool worker;
* the table in ``docs/reference/api/engine.md`` (:func:`reference_table`).

Adding a field here (or to SharedSettings) reaches all of them; ``tests/unit/test_settings_surfaces.py``
checks each surface field by field.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from qsim.engine.connection import DEFAULT_REDIS_URL, is_cluster_url
from qsim.engine.context import Limits
from qsim.engine.keys import DEFAULT_PREFIX, QueueKeys, check_unicode
from qsim.engine.payload import DEFAULT_REDACT, normalize_fields
from qsim.engine.protocol import POLICIES
from qsim.engine.queue import DEFAULT_KEEP_COMPLETED
from qsim.spec.settings import Setting, SettingField, SharedSettings, fields_of, setting

__all__ = ["WorkerSettings", "WorkerOptions", "SharedSettings", "Setting", "SettingField", "setting_fields", "reference_table"]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True, kw_only=True)
class WorkerSettings(SharedSettings):
    """Everything a :class:`~qsim.engine.worker.Worker` is configured with but its handler.

    Every field (with :class:`SharedSettings`' own) is a keyword of ``Worker(queues, handler, ...)``,
    a ``qsim worker`` flag and a flag of the pool worker processes (see the module docstring);
    :func:`reference_table` lists them with their defaults and meanings. Each is checked here,
    and a bad one raises ``ValueError`` quoting it. ``queues`` (a name or a list of names),
    ``weights`` and ``redact`` are stored normalized (tuples; ``weights`` None when empty); the
    derived values (keys, weights in queue order, milliseconds, the worker id) are computed once.
    """

    queues: str | Sequence[str] = field(metadata={"setting": Setting(
        help="a queue served (repeat for several; see policy)", flag="--queue", metavar="NAME",
        scenario="pools[].queues")})
    policy: str = setting("priority", "how a fetch chooses among several queues: priority (lowest job priority "
                                      "first, FIFO within a level), ordered (first listed queue with a job) or wrr "
                                      "(smooth weighted round-robin over the queues with a startable job)",
                          choices=POLICIES, scenario="pools[].policy")
    weights: Mapping[str, int] | None = setting(None, "wrr weight of a queue: QUEUE=W, a whole number W >= 1 "
                                                      "(repeat; default 1 each)",
                                                flag="--weight", metavar="QUEUE=W", scenario="pools[].weights")
    group: str | None = setting(None, "hash tag the queues share (the group= of their Queue); needed on Redis "
                                      "Cluster when serving several queues",
                                metavar="TAG", scenario="none: a run's queues have no group")
    redis: str = setting(DEFAULT_REDIS_URL, "Redis URL: redis://, or redis+cluster:// for Redis Cluster",
                         metavar="URL", expect="a redis:// URL", scenario="the run's Redis")
    concurrency: int = setting(10, "jobs this process runs at the same time", low=1,
                               scenario="pools[].concurrency")
    shutdown_grace: float = setting(30.0, "seconds a stop (close(), SIGTERM) waits for active jobs before "
                                          "cutting them off and handing them back",
                                    low=0, seconds=True,
                                    scenario="events[].grace of the pool's sigterm events, else the run's default")
    prefix: str = setting(DEFAULT_PREFIX, "key prefix of the queues", scenario="the run's own prefix")
    redact: Sequence[str] = setting(DEFAULT_REDACT, "a payload field hidden in logs, events and errors "
                                                    f"(repeat; always hidden: {', '.join(DEFAULT_REDACT)})",
                                    adds=True, metavar="FIELD",
                                    scenario="the defaults (the planned jobs carry no secrets)")
    keep_completed: int | None = setting(DEFAULT_KEEP_COMPLETED, "completed jobs kept (all: every one) unless the "
                                                                 "queue's set_retention says otherwise",
                                         low=0, none="all", metavar="N|all",
                                         scenario="all (the run reads every job at the end)")
    keep_completed_for: float | None = setting(None, "seconds completed jobs are kept (default: no limit)",
                                               low=0, seconds=True, scenario="no limit (as keep_completed)")
    handle_signals: bool = setting(True, "install SIGTERM/SIGINT handlers while run() runs",
                                   scenario="yes (the run's events are signals)")
    worker_id: str | None = setting(None, "name of this worker in job records (default host:pid:random)",
                                    metavar="NAME", scenario="<pool>-<n>")

    # -- derived (computed in __post_init__) --------------------------------------
    #: The queue names, in order.
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    #: The keys of each queue, in the order of :attr:`names`.
    keys: tuple[QueueKeys, ...] = field(init=False, repr=False, compare=False)
    #: The wrr weight of each queue, in the order of :attr:`names`.
    weight_list: tuple[int, ...] = field(init=False, repr=False, compare=False)
    #: This worker's name in job records (``worker_id`` or host:pid:random; no "," or ";").
    id: str = field(init=False, repr=False, compare=False)
    lock_ms: int = field(init=False, repr=False, compare=False)
    #: Completed jobs kept (-1: all) and their age limit in ms (-1: none), as the complete script takes them.
    keep_count: int = field(init=False, repr=False, compare=False)
    keep_age_ms: int = field(init=False, repr=False, compare=False)
    limits: Limits = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        queues = self.queues
        names = (queues,) if isinstance(queues, str) else tuple(queues) if isinstance(queues, Sequence) else ()
        if not names or not all(isinstance(q, str) for q in names):
            raise ValueError(f"queues must name at least one queue, got {queues!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"queues must not repeat a name, got {list(names)!r}")
        values: dict[str, Any] = {}
        for f in setting_fields():
            if f.kind in ("names", "weights"):
                continue
            value = getattr(self, f.name)
            problem = f.problem(value)
            if problem:
                raise ValueError(problem)
            values[f.name] = float(value) if f.kind == "float" and value is not None else value
        weights = dict(self.weights or {})
        for q, w in weights.items():
            if q not in names:
                raise ValueError(f"weights name a queue this worker does not serve: {q!r} (queues: {list(names)!r})")
            if not _is_int(w) or w < 1:
                raise ValueError(f"weight of queue {q!r} must be an int >= 1, got {w!r}")
        limits = Limits(self.max_payload, self.events_maxlen, normalize_fields(self.redact))
        keys = tuple(QueueKeys(q, self.prefix, self.group) for q in names)
        if len(names) > 1 and self.group is None and is_cluster_url(self.redis):
            raise ValueError(f"serving several queues on Redis Cluster needs a shared group= (hash tag), got "
                             f"queues {list(names)!r} without one")
        if self.worker_id is not None:
            check_unicode("worker_id", self.worker_id)
        wid = self.worker_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        kc, kf = self.keep_completed, self.keep_completed_for
        derived = {
            **values,
            "queues": names,
            "weights": weights or None,
            "redact": tuple(self.redact),
            "names": names,
            "keys": keys,
            "weight_list": tuple(weights.get(q, 1) for q in names),
            "id": wid.replace(",", "_").replace(";", "_"),
            "lock_ms": int(float(self.lock_duration) * 1000),
            "keep_count": -1 if kc is None else kc,
            "keep_age_ms": -1 if kf is None else int(kf * 1000),
            "limits": limits,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def redact_fields(self) -> frozenset[str]:
        """The normalized sensitive field names."""
        return self.limits.redact

    # -- the command line ------------------------------------------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, *,
                      overrides: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Add one flag per field to ``parser`` (dest: the field's name; default None: not given).

        ``overrides`` maps a field name to keyword arguments of ``add_argument`` that replace the
        generated ones (``qsim worker`` gives ``--redis`` its URL check and ``$REDIS_URL`` default).
        """
        for f in _per_worker_first():
            kw = f.argparse_options()
            kw.update((overrides or {}).get(f.name, {}))
            parser.add_argument(f.flag, **kw)

    @classmethod
    def from_args(cls, args: argparse.Namespace, **given: Any) -> WorkerSettings:
        """The settings of a parsed command line (flags from :meth:`add_arguments`); ``given`` wins."""
        values: dict[str, Any] = {}
        for f in setting_fields():
            value = getattr(args, f.name, None)
            if value is None:
                continue
            values[f.name] = f.from_arg(value)
        return cls(**{**values, **given})

    def to_argv(self) -> list[str]:
        """The flags that give these settings (``--flag=value``; a field at its default is left out)."""
        return [arg for f in setting_fields() for arg in f.to_args(getattr(self, f.name))]


def setting_fields() -> tuple[SettingField, ...]:
    """The fields of :class:`WorkerSettings` (SharedSettings' first), each with its Setting and kind."""
    return fields_of(WorkerSettings)


def _per_worker_first() -> list[SettingField]:
    """The fields in the order a reader looks for them: what differs per worker, then the shared settings."""
    return sorted(setting_fields(), key=lambda f: f.shared)


def _check_settings() -> None:
    """Every field of WorkerSettings has a Setting; every one that is not an [engine] key says where a
    scenario run takes it from (an import-time check: a new field cannot forget it)."""
    for f in fields(WorkerSettings):
        if f.init and "setting" not in f.metadata:
            raise TypeError(f"WorkerSettings.{f.name} has no Setting (metadata['setting'])")
    for sf in setting_fields():
        if not sf.shared and not sf.setting.scenario:
            raise TypeError(f"WorkerSettings.{sf.name}: say where a scenario run takes it (Setting.scenario), "
                            "or move it to SharedSettings (an [engine] key)")


_check_settings()


def reference_table() -> str:
    """Every field as a Markdown table: the keyword, its default, the flag, where a scenario run takes it."""
    rows = ["| keyword | default | `qsim worker` flag | in a scenario run | meaning |", "|---|---|---|---|---|"]
    for f in _per_worker_first():
        default = "required" if f.required else f"`{f.default!r}`"
        flag = f.flag if f.kind != "bool" else f"{f.flag} / --no-{f.flag[2:]}"
        meaning = f.setting.help.replace("|", "\\|")
        rows.append(f"| `{f.name}` | {default} | `{flag}` | {f.scenario} | {meaning} |")
    return "\n".join(rows) + "\n"


class WorkerOptions(TypedDict, total=False):
    """The keywords of ``Worker(queues, handler, **options)``: :class:`WorkerSettings`' fields but ``queues``,
    typed, so that a misspelt one (``prefech=``) fails the type check, not only the run
    (tests/unit/test_worker_settings.py holds the two to the same names)."""

    lock_duration: float
    stalled_interval: float
    max_stalled: int
    prefetch: int | str
    batch_size: int
    max_inflight: int
    block_timeout: float
    max_payload: int
    events_maxlen: int
    policy: str
    weights: Mapping[str, int] | None
    group: str | None
    redis: str
    concurrency: int
    shutdown_grace: float
    prefix: str
    redact: Sequence[str]
    keep_completed: int | None
    keep_completed_for: float | None
    handle_signals: bool
    worker_id: str | None
