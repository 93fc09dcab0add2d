"""A worker's settings: :class:`WorkerSettings`, the one definition every surface is derived from.

Each field carries a :class:`Setting` (``field.metadata["setting"]``): its help line, its bounds, the
word for None on a command line, and -- for a field a scenario run does not take from ``[engine]`` --
where the run takes it from. From the fields come

* the validation (``WorkerSettings(...)`` raises ``ValueError`` quoting a bad value);
* ``Worker(queues, handler, **options)`` (:class:`~qsim.engine.worker.Worker`): the keywords are the fields;
* the command line (:meth:`WorkerSettings.add_arguments`, :meth:`~WorkerSettings.from_args`,
  :meth:`~WorkerSettings.to_argv`), one flag per field (``lock_duration`` is ``--lock-duration``):
  ``qsim worker``'s flags, and the argv of the pool worker processes that ``qsim run`` and Locust's
  ``--start-workers`` start (``python -m qsim.harness.pool_worker``, :mod:`qsim.harness.processes`);
* the Scenario's ``[engine]`` keys: :class:`SharedSettings` holds the fields every worker of a
  deployment shares, and ``qsim.scenario.EngineSettings`` extends it, so each of them is an
  ``[engine]`` key, parsed by its bounds and handed to every pool worker;
* the table in ``docs/reference/api/engine.md`` (:func:`reference_table`).

Adding a field here reaches all of them; ``tests/unit/test_settings_surfaces.py`` checks each surface
field by field.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import secrets
import socket
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, TypeVar

from qsim.engine.connection import DEFAULT_REDIS_URL, is_cluster_url
from qsim.engine.context import Limits
from qsim.engine.keys import DEFAULT_PREFIX, QueueKeys, check_unicode
from qsim.engine.payload import DEFAULT_MAX_PAYLOAD, DEFAULT_REDACT, normalize_fields
from qsim.engine.protocol import POLICIES
from qsim.engine.queue import DEFAULT_EVENTS_MAXLEN, DEFAULT_KEEP_COMPLETED

__all__ = ["WorkerSettings", "SharedSettings", "Setting", "SettingField", "setting_fields", "reference_table"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Setting:
    """How one settings field shows on every surface (its ``metadata["setting"]``).

    Args:
        help: One line: the flag's help and the reference's meaning.
        low: The smallest valid number (with ``above``: the bound itself is not valid).
        seconds: The value is a duration in seconds (messages say so).
        choices: The valid strings.
        none: The command line's word for None, for a field that may be None but defaults to something else.
        adds: A repeated flag adds to the default instead of replacing it (``--redact``).
        flag: The flag (default ``--`` + the name with dashes); metavar: its placeholder.
        expect: What a valid value is, when the bounds do not say it (``a redis:// URL``).
        scenario: Where a scenario run takes the value from, for a field that is not an ``[engine]``
            key (every field of :class:`SharedSettings` is one).
    """

    help: str
    low: float | None = None
    above: bool = False
    seconds: bool = False
    choices: tuple[str, ...] = ()
    none: str | None = None
    adds: bool = False
    flag: str | None = None
    metavar: str | None = None
    expect: str = ""
    scenario: str = ""


def _setting(default: T, help: str, **spec: Any) -> T:
    """A dataclass field with a default and its :class:`Setting`."""
    return field(default=default, metadata={"setting": Setting(help=help, **spec)})


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True, kw_only=True)
class SharedSettings:
    """The settings every worker of a deployment shares: a Scenario's ``[engine]`` keys.

    ``qsim.scenario.EngineSettings`` extends this class (adding the timings only the model uses), so a
    field added here is an ``[engine]`` key, handed by ``qsim run`` and Locust's ``--start-workers`` to
    every pool worker. :class:`WorkerSettings` extends it with what differs per worker.
    The model mirrors ``lock_duration``, ``stalled_interval`` and ``max_stalled``; the others
    are the engine's alone.

    ``batch_size`` 16 was tuned with benchmarks/worker_cpu.py and engine_throughput.py (8 cost ~14%
    more worker CPU per no-op job); batches of moderate size, several in flight, keep jobs from
    moving in lock-step. ``prefetch``: jobs fetched ahead wait in the worker (locks renewed with the
    running ones) so a slot that frees starts its next job at once; their recorded start is when
    their handler started; at shutdown the ones not started go back unstarted. ``"auto"`` fetches
    ``ceil(concurrency / 4)`` ahead (at most ``batch_size``) only while the jobs are short (handler's
    average run time / concurrency <= 2 ms) and no queue served has a concurrency or rate limit
    (docs/explanation/fetch-ahead.md).
    """

    lock_duration: float = _setting(30.0, "seconds a job's lock lasts; renewed every half of it",
                                     low=0, above=True, seconds=True)
    stalled_interval: float = _setting(30.0, "seconds between checks for jobs whose lock expired",
                                        low=0, above=True, seconds=True)
    max_stalled: int = _setting(1, "stalls a job may have before it goes to the dead-letter queue", low=0)
    prefetch: int | str = _setting("auto", "jobs fetched ahead of free slots: auto (a few, only for short jobs on "
                                           "queues without concurrency or rate limits) or a number (0: never)",
                                   low=0, metavar="auto|N")
    batch_size: int = _setting(16, "at most this many fetches and as many acknowledgements per round trip", low=1)
    max_inflight: int = _setting(2, "batches (round trips) in flight at once", low=1)
    block_timeout: float = _setting(5.0, "longest single wait (BLPOP) for new jobs, seconds",
                                    low=0, above=True, seconds=True)
    max_payload: int = _setting(DEFAULT_MAX_PAYLOAD, "largest return value of a handler, bytes", low=1)
    events_maxlen: int = _setting(DEFAULT_EVENTS_MAXLEN, "approximate cap of each queue's event stream", low=1)


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
    policy: str = _setting("priority", "how a fetch chooses among several queues: priority (lowest job priority "
                                       "first, FIFO within a level), ordered (first listed queue with a job) or wrr "
                                       "(smooth weighted round-robin over the queues with a startable job)",
                           choices=POLICIES, scenario="pools[].policy")
    weights: Mapping[str, int] | None = _setting(None, "wrr weight of a queue: QUEUE=W, a whole number W >= 1 "
                                                       "(repeat; default 1 each)",
                                                 flag="--weight", metavar="QUEUE=W", scenario="pools[].weights")
    group: str | None = _setting(None, "hash tag the queues share (the group= of their Queue); needed on Redis "
                                       "Cluster when serving several queues",
                                 metavar="TAG", scenario="none: a run's queues have no group")
    redis: str = _setting(DEFAULT_REDIS_URL, "Redis URL: redis://, or redis+cluster:// for Redis Cluster",
                          metavar="URL", expect="a redis:// URL", scenario="the run's Redis")
    concurrency: int = _setting(10, "jobs this process runs at the same time", low=1,
                                scenario="pools[].concurrency")
    shutdown_grace: float = _setting(30.0, "seconds a stop (close(), SIGTERM) waits for active jobs before "
                                           "cutting them off and handing them back",
                                     low=0, seconds=True,
                                     scenario="events[].grace of the pool's sigterm events, else the run's default")
    prefix: str = _setting(DEFAULT_PREFIX, "key prefix of the queues", scenario="the run's own prefix")
    redact: Sequence[str] = _setting(DEFAULT_REDACT, "a payload field hidden in logs, events and errors "
                                                     f"(repeat; always hidden: {', '.join(DEFAULT_REDACT)})",
                                     adds=True, metavar="FIELD",
                                     scenario="the defaults (the planned jobs carry no secrets)")
    keep_completed: int | None = _setting(DEFAULT_KEEP_COMPLETED, "completed jobs kept (all: every one) unless the "
                                                                  "queue's set_retention says otherwise",
                                          low=0, none="all", metavar="N|all",
                                          scenario="all (the run reads every job at the end)")
    keep_completed_for: float | None = _setting(None, "seconds completed jobs are kept (default: no limit)",
                                                low=0, seconds=True, scenario="no limit (as keep_completed)")
    handle_signals: bool = _setting(True, "install SIGTERM/SIGINT handlers while run() runs",
                                    scenario="yes (the run's events are signals)")
    worker_id: str | None = _setting(None, "name of this worker in job records (default host:pid:random)",
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


_NONE_GIVEN = object()  # the word for None on a command line, parsed (None itself means "not given")


@dataclass(frozen=True)
class SettingField:
    """One field of :class:`WorkerSettings` with its :class:`Setting`, its kind and what derives from them.

    ``kind`` comes from the annotation: ``int``, ``float``, ``str``, ``bool``, ``auto`` (an int or the
    word "auto"), ``names`` (strings; a repeated flag) or ``weights`` (``QUEUE=W`` pairs).
    """

    name: str
    kind: str
    optional: bool
    default: Any
    setting: Setting
    shared: bool

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return self.setting.flag or "--" + self.name.replace("_", "-")

    @property
    def required(self) -> bool:
        return self.default is MISSING

    @property
    def scenario(self) -> str:
        """Where a scenario run takes the value from."""
        return f"[engine] {self.name}" if self.shared else self.setting.scenario

    def describe(self) -> str:
        """What a valid value is, as messages say it: ``an int >= 1``, ``> 0 seconds``, ``'auto' or ...``."""
        s = self.setting
        if s.expect:
            text = s.expect
        elif s.choices:
            text = f"one of {', '.join(s.choices)}"
        elif self.kind in ("int", "auto"):
            low = None if s.low is None else math.floor(s.low) + 1 if s.above else math.ceil(s.low)
            text = "an int" + (f" >= {low}" if low is not None else "")
            text = "'auto' or " + text if self.kind == "auto" else text
        elif self.kind == "float":
            text = f"{'>' if s.above else '>='} {_num(s.low)}" if s.low is not None else "a number"
            text += " seconds" if s.seconds else ""
        elif self.kind == "str":
            text = "a string"
        elif self.kind == "bool":
            text = "True or False"
        else:
            text = "a list of names" if self.kind == "names" else "a mapping of queue to weight"
        return text + (" or None" if self.optional else "")

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid here (the ``ValueError`` message), else None."""
        s = self.setting
        if value is None:
            ok = self.optional
        elif self.kind == "auto" and value == "auto":
            ok = True
        elif self.kind in ("int", "auto", "float"):
            number = _is_int(value) if self.kind != "float" else _is_int(value) or isinstance(value, float)
            ok = number and math.isfinite(value) and (s.low is None or (value > s.low if s.above else value >= s.low))
        elif self.kind == "str":
            ok = isinstance(value, str) and (not s.choices or value in s.choices)
        elif self.kind == "bool":
            ok = isinstance(value, bool)
        else:
            ok = True  # names and weights: checked by WorkerSettings itself
        return None if ok else f"{self.name} must be {self.describe()}, got {value!r}"

    # -- command line ------------------------------------------------------------------
    def argparse_options(self) -> dict[str, Any]:
        """The keyword arguments of ``parser.add_argument(self.flag, ...)``."""
        s = self.setting
        shown = "" if self.required or self.default is None or s.adds else f" (default {self.default})"
        kw: dict[str, Any] = {"dest": self.name, "default": None, "help": (s.help + shown).replace("%", "%%")}
        if self.kind == "bool":
            kw["action"] = argparse.BooleanOptionalAction
            return kw
        if self.kind in ("names", "weights"):
            kw.update(action="append", required=self.required)
        if self.kind != "names":
            kw["type"] = self._parse_text
        if s.choices:
            kw["choices"] = s.choices
        else:
            kw["metavar"] = s.metavar or ("S" if s.seconds else {"int": "N", "float": "X"}.get(self.kind, self.name.upper()))
        return kw

    def _parse_text(self, text: str) -> Any:
        """argparse type: the value a flag's text stands for (argparse.ArgumentTypeError if invalid)."""
        s = self.setting
        if self.kind == "weights":
            queue, sep, w = text.rpartition("=")
            if not sep or not queue or not w.strip().isdigit() or int(w) < 1:
                raise argparse.ArgumentTypeError(f"must be QUEUE=W with a whole number W >= 1, got {text!r}")
            return (queue, int(w))
        if s.none is not None and text == s.none:
            return _NONE_GIVEN
        value: Any = text
        if self.kind in ("int", "auto") and text != "auto":
            try:
                value = int(text)
            except ValueError:
                value = text
        elif self.kind == "float":
            try:
                value = float(text)
            except ValueError:
                value = text
        problem = self.problem(value)
        if problem:
            word = f" or {s.none}" if s.none else ""
            raise argparse.ArgumentTypeError(f"must be {self.describe().removesuffix(' or None')}{word}, got {text!r}")
        return value

    def from_arg(self, value: Any) -> Any:
        """The field's value from what :meth:`_parse_text` / argparse made of the flag (not None)."""
        if value is _NONE_GIVEN:
            return None
        if self.kind == "weights":
            return dict(value)
        if self.kind == "names":
            if self.setting.adds:
                return (*self.default, *[v for v in value if v not in self.default])
            return tuple(value)
        return value

    def to_args(self, value: Any) -> list[str]:
        """The flags that give ``value`` (none when it is the default)."""
        if not self.required and value == self.default:
            return []
        if self.kind == "names":
            if self.setting.adds:
                lacking = [d for d in self.default if d not in value]
                if lacking:
                    raise ValueError(f"{self.name} without {lacking!r} has no command line: {self.flag} adds "
                                     f"to {list(self.default)!r}")
                value = [v for v in value if v not in self.default]
            return [f"{self.flag}={v}" for v in value]
        if self.kind == "weights":
            return [f"{self.flag}={q}={w}" for q, w in (value or {}).items()]
        if self.kind == "bool":
            return [self.flag if value else "--no-" + self.flag[2:]]
        if value is None:
            if self.setting.none is None:
                raise ValueError(f"{self.name}=None has no command line (no word for None)")
            return [f"{self.flag}={self.setting.none}"]
        return [f"{self.flag}={value!r}" if self.kind == "float" else f"{self.flag}={value}"]


def _kind(hint: Any, name: str) -> tuple[str, bool]:
    """(kind, optional) of an annotation; TypeError for one the command line has no form for."""
    args = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) else {hint}
    optional = type(None) in args
    args.discard(type(None))
    simple = {frozenset({int}): "int", frozenset({float}): "float", frozenset({str}): "str",
              frozenset({bool}): "bool", frozenset({int, str}): "auto"}
    kind = simple.get(frozenset(args))
    if kind is None:
        origins = {typing.get_origin(a) for a in args}
        kind = "weights" if Mapping in origins else "names" if Sequence in origins else None
    if kind is None:
        raise TypeError(f"settings field {name}: {hint} has no command-line form (see qsim.engine.settings._kind)")
    return kind, optional


@functools.cache
def setting_fields(cls: type = WorkerSettings) -> tuple[SettingField, ...]:
    """The fields of ``cls`` (default :class:`WorkerSettings`) that carry a :class:`Setting`, in order."""
    hints = typing.get_type_hints(cls)
    shared = {f.name for f in fields(SharedSettings)}
    out = []
    for f in fields(cls):
        spec = f.metadata.get("setting")
        if not f.init or spec is None:
            continue
        kind, optional = _kind(hints[f.name], f.name)
        out.append(SettingField(f.name, kind, optional, _default_of(f), spec, f.name in shared))
    return tuple(out)


def _per_worker_first() -> list[SettingField]:
    """The fields in the order a reader looks for them: what differs per worker, then the shared settings."""
    return sorted(setting_fields(), key=lambda f: f.shared)


def _default_of(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


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
