"""Scenario: one description of a queue system, shared by the model, the engine
harness, the Locust scenarios and the closed forms.

A scenario is a frozen, keyword-only dataclass tree. Build it from a TOML file
(:meth:`Scenario.from_toml`), from a dict in the same schema
(:meth:`Scenario.from_dict`), or directly in Python. Every invalid value is a
:class:`~qsim.errors.ScenarioError` naming the file, the key and the value::

    shop.toml: jobs[1].service.cv must be >= 0, got -1

Times are seconds, rates per second. Every key, with its default, unit and
valid values, is in ``docs/reference/scenario.md``; ``tests/docs/test_reference.py``
fails when a key exists here and not there, or the other way round. Besides
plain rates, arrivals may follow a rate profile (``kind = "profile"``, and a
``burst`` with ``points`` instead of ``rate``); ``window`` is the length in
seconds of the Summary's windows (:mod:`qsim.results.windows`; at most ``duration -
warmup``; 60 when left out); ``jobs[].payload`` is the data real handlers
receive in a load test, a template (:mod:`qsim.spec.templates`).
"""

from __future__ import annotations

import csv
import difflib
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from qsim.errors import ScenarioError
from qsim.names import FILE_NAME_MAX, MAX_JOB_TYPE, MAX_NAME
from qsim.spec import dists
from qsim.spec.backoff import BACKOFF_KINDS, backoff_ms
from qsim.spec.settings import SharedSettings, fields_of
from qsim.spec.autoscaler import (
    AUTOSCALE_POLICIES,
    AUTOSCALER_KEYS,
    COMMON_KEYS,
    QUIET_KEYS,
    POLICY_PARAMS,
    REQUIRED,
    SCALE_POLICY_TYPES,
    SLO_SHAPE,
    AutoscalerSpec,
    FloorSpec,
    ScalePolicySpec,
    default_metric_type,
    problem,
)
from qsim.results.display import plain
from qsim.results.windows import DEFAULT_WINDOW
from qsim.spec.templates import template_errors

__all__ = [
    "Scenario",
    "QueueSpec",
    "RateLimit",
    "JobType",
    "BackoffSpec",
    "FanOut",
    "Flow",
    "PoolSpec",
    "EventSpec",
    "EngineSettings",
    "AutoscalerSpec",
    "FloorSpec",
    "ScalePolicySpec",
    "POLICIES",
    "EVENT_KINDS",
]

POLICIES = ("priority", "wrr", "ordered")
EVENT_KINDS = ("sigterm", "sigkill", "start")
CHILD_FAILURE_POLICIES = ("fail", "ignore")


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """At most ``max`` job starts in any window of ``per`` seconds, all workers together."""

    max: int
    per: float
    key: str | None = None  # optional: limit per value of this payload field (per tenant)


@dataclass(frozen=True, kw_only=True)
class QueueSpec:
    """A named queue and its global limits."""

    name: str
    rate_limit: RateLimit | None = None
    concurrency_limit: int | None = None
    aging: float = 0.0  # seconds of waiting that improve a job's priority by one level; 0 = off


@dataclass(frozen=True, kw_only=True)
class BackoffSpec:
    """Delay before retry ``n`` (1-based): fixed ``delay`` or ``delay * 2**(n-1)``, capped, with jitter.

    The rule is :mod:`qsim.spec.backoff`'s, the engine's; ``max`` caps exponential
    backoff only (see :attr:`cap`).
    """

    kind: str = "exponential"
    delay: float = 1.0
    max: float = 60.0
    jitter: float = 0.0  # fraction: the delay is multiplied by a uniform factor in [1 - jitter, 1]

    @property
    def cap(self) -> float | None:
        """The cap the engine's Backoff gets: ``max`` for exponential backoff, none for fixed."""
        return self.max if self.kind == "exponential" else None

    def delay_ms(self, failed: int, u: float = 0.0) -> int:
        """Whole milliseconds before the retry after the ``failed``-th failed attempt (``u``: the jitter's draw)."""
        return backoff_ms(self.kind, self.delay, failed, cap=self.cap, jitter=self.jitter, u=u)


@dataclass(frozen=True, kw_only=True)
class FanOut:
    """Each completed job adds ``count`` children of type ``job``."""

    job: str
    count: int


@dataclass(frozen=True, kw_only=True)
class Flow:
    """The job runs only after one job of each child type has completed."""

    children: tuple[str, ...]
    on_child_failure: str = "fail"  # fail: the parent goes to the DLQ | ignore: it runs anyway


@dataclass(frozen=True, kw_only=True)
class JobType:
    """A type of job: where it goes, how it arrives, how long it runs, how it fails."""

    name: str
    queue: str
    service: dists.Distribution
    priority: int = 0
    arrival: dists.Arrival | None = None
    fail_prob: float = 0.0
    poison_prob: float = 0.0
    attempts: int = 1
    backoff: BackoffSpec = field(default_factory=BackoffSpec)
    timeout: float = 0.0
    fan_out: FanOut | None = None
    flow: Flow | None = None
    data: Mapping[str, Any] | None = None  # JSON fields every job of this type carries (e.g. its tenant)
    payload: Mapping[str, Any] | None = None  # load tests: the data real handlers receive (qsim.spec.templates)


@dataclass(frozen=True, kw_only=True)
class PoolSpec:
    """A group of identical worker processes serving some queues."""

    name: str
    queues: tuple[str, ...]
    policy: str = "priority"
    weights: Mapping[str, int] = field(default_factory=dict)  # wrr: whole numbers >= 1
    workers: int = 1
    concurrency: int = 1

    @property
    def slots(self) -> int:
        """Concurrent jobs the whole pool can run."""
        return self.workers * self.concurrency

    def weight(self, queue: str) -> float:
        """The WRR weight of ``queue`` (1 when not given)."""
        return float(self.weights.get(queue, 1.0))


@dataclass(frozen=True, kw_only=True)
class EventSpec:
    """Something that happens to a pool's processes during the run."""

    at: float
    kind: str
    pool: str
    count: int = 1
    grace: float = 30.0


@dataclass(frozen=True, kw_only=True)
class EngineSettings(SharedSettings):
    """The ``[engine]`` table: the worker settings every pool worker gets, and timings only the model uses.

    The worker settings are the fields of :class:`qsim.spec.settings.SharedSettings`, which this
    class extends, as the engine's ``WorkerSettings`` does (``lock_duration``, ``stalled_interval``,
    ``max_stalled``, ``prefetch``, ``batch_size``, ...): each is an ``[engine]`` key with the engine's
    bounds, and ``qsim run`` and Locust's ``--start-workers`` hand it to every pool worker
    (:mod:`qsim.harness.processes`).
    The model mirrors ``lock_duration``, ``stalled_interval`` and ``max_stalled``; the others are
    the engine's alone (a job fetched ahead with ``prefetch`` waits in its worker at most its hold
    bound, 10 ms with "auto", then goes back: the model does not simulate that wait, it dispatches
    each job to a free slot at once; docs/explanation/fetch-ahead.md).
    """

    fetch_overhead: float = 0.0
    ack_overhead: float = 0.0
    start_delay: float = 0.0  # model only: from a `start` event until its processes take work (their start-up)
    #: Model only: seconds from a job's enqueue until a worker can take it, holding no slot (part of every
    #: wait): a pickup measured where it is not known to hold a slot (qsim.calibrate.overhead).
    pickup_latency: float = 0.0
    #: Model only: ``((utilization, fetch_overhead, ack_overhead), ...)``, utilizations increasing: the
    #: overheads as a function of load (qsim calibrate --probe --concurrency N); the model uses them
    #: interpolated at the utilization it simulates (qsim.spec.offered_load). Given, the two scalars stay 0.
    overhead_by_load: tuple[tuple[float, float, float], ...] | None = None
    #: Plan only: Redis CPU (µs) per job of one attempt (qsim calibrate --probe measures it on your Redis); None:
    #: qsim's default (qsim.spec.redis_cost). plan and autoscale report the share of a Redis core it implies.
    redis_cpu_per_job_us: float | None = None
    #: Plan only: Redis CPU (µs) per second per waiting worker process; None: qsim's default.
    redis_idle_us_per_worker: float | None = None


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A whole queue system: queues, job types, worker pools, events, engine timings."""

    name: str
    duration: float
    queues: tuple[QueueSpec, ...]
    jobs: tuple[JobType, ...]
    pools: tuple[PoolSpec, ...]
    description: str | None = None  # one line: what the scenario shows (`qsim scenarios` lists it)
    seed: int = 0
    warmup: float = 0.0
    window: float | None = None  # length of the Summary's windows (s); None: qsim.results.windows.DEFAULT_WINDOW
    events: tuple[EventSpec, ...] = ()
    autoscalers: tuple[AutoscalerSpec, ...] = ()
    engine: EngineSettings = field(default_factory=EngineSettings)
    source: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_references(self, _Where(str(self.source) if self.source else "scenario"))

    def queue(self, name: str) -> QueueSpec:
        """The queue called ``name`` (KeyError if none)."""
        return _by_name(self.queues, name, "queue")

    def job(self, name: str) -> JobType:
        """The job type called ``name`` (KeyError if none)."""
        return _by_name(self.jobs, name, "job type")

    def pool(self, name: str) -> PoolSpec:
        """The pool called ``name`` (KeyError if none)."""
        return _by_name(self.pools, name, "pool")

    def autoscaler(self, pool: str) -> AutoscalerSpec | None:
        """The autoscaler of pool ``pool`` (None when it has none)."""
        return next((a for a in self.autoscalers if a.pool == pool), None)

    @property
    def window_length(self) -> float:
        """The length of the Summary's windows: ``window``, else :data:`qsim.results.windows.DEFAULT_WINDOW`."""
        return self.window if self.window is not None else DEFAULT_WINDOW

    @property
    def slots(self) -> int:
        """Slots of all pools at the start of the run."""
        return sum(p.slots for p in self.pools)

    def to_dict(self) -> dict[str, Any]:
        """The scenario as a dict in the TOML schema, the inverse of :meth:`from_dict`.

        Every key is written, defaults too; absent optional parts (no rate
        limit, no arrival, ...) are left out, as TOML has no null. ``path``
        values (trace, empirical) are written as stored.
        """
        plain: dict[str, Any] = _plain(self)
        return plain

    @classmethod
    def from_toml(cls, path: str | Path) -> "Scenario":
        """Load and validate a scenario file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except OSError as e:
            raise ScenarioError(f"{path}: cannot read scenario file: {e.strerror or e}") from e
        except UnicodeDecodeError as e:
            raise ScenarioError(f"{path}: not UTF-8 text (TOML files are UTF-8): byte {e.object[e.start]:#04x} at "
                                f"offset {e.start}") from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError(f"{path}: not valid TOML: {e}") from e
        return cls.from_dict(raw, source=path)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str | Path | None = None) -> "Scenario":
        """Build and validate a scenario from a dict in the TOML schema.

        ``source`` names the file in error messages; relative ``path`` values
        (trace arrivals, empirical service) are read relative to its folder.
        """
        src = Path(source) if source is not None else None
        where = _Where(str(src) if src else "scenario", src.parent if src else Path.cwd())
        return _parse_scenario(raw, where, src)


def _plain(x: Any) -> Any:
    """``x`` as plain TOML-ready values (dicts, lists, str, numbers); None fields dropped."""
    if isinstance(x, (dists.ProfileArrivals, dists.BurstArrivals)):
        return x.as_table()
    if isinstance(x, (dists.Distribution, dists.Arrival)):  # kind first; the values read from a CSV stay there
        return {"kind": x.kind, **{f.name: _plain(getattr(x, f.name)) for f in fields(cast(Any, x)) if f.name not in ("values", "at")}}
    if is_dataclass(x) and not isinstance(x, type):
        out = {f.name: _plain(v) for f in fields(x) if f.name != "source" and (v := getattr(x, f.name)) is not None}
        order = _KEY_ORDER.get(type(x), ())
        return {k: out[k] for k in sorted(out, key=lambda k: order.index(k) if k in order else len(order))}
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, (tuple, list)):
        return [_plain(v) for v in x]
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    return x


# --------------------------------------------------------------------------- parsing

@dataclass(frozen=True)
class _Where:
    """The file being parsed (for messages) and the folder relative paths start from."""

    label: str
    folder: Path = Path(".")

    def error(self, key: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.label}: {key} {message}" if key else f"{self.label}: {message}")


class _Table:
    """One TOML table being read: typed getters that name the key on error,
    and a final check that no unknown key is left."""

    def __init__(self, raw: Any, path: str, where: _Where, known: tuple[str, ...]) -> None:
        if not isinstance(raw, Mapping):
            raise where.error(path, f"must be a table, got {_show(raw)}")
        self.raw, self.path, self.where = raw, path, where
        for key in raw:
            if key not in known:
                hint = difflib.get_close_matches(str(key), known, n=1)
                also = f" (did you mean '{hint[0]}'?)" if hint else f" (known keys: {', '.join(known)})"
                raise where.error(self.key(str(key)), f"is not a known key{also}")

    def key(self, name: str) -> str:
        """The dotted path of ``name`` in this table; odd names quoted as TOML would."""
        shown = name if _BARE_KEY.fullmatch(name) else json.dumps(name)
        return f"{self.path}.{shown}" if self.path else shown

    def has(self, name: str) -> bool:
        return name in self.raw

    def weights(self, name: str) -> dict[str, int]:
        if name not in self.raw:
            return {}
        raw = self.raw[name]
        if not isinstance(raw, Mapping):
            raise self.where.error(self.key(name), f"must be a table of queue = weight, got {_show(raw)}")
        table = _Table(raw, self.key(name), self.where, tuple(str(k) for k in raw))
        for q, w in raw.items():
            if _weight_problem(w):
                raise self.where.error(table.key(str(q)), _weight_problem(w))
        return {str(q): table.integer(str(q), low=1) for q in raw}

    def number(self, name: str, default: float | None = None, *, required: bool = False,
               low: float | None = None, high: float | None = None, strict_low: bool = False) -> float:
        if name not in self.raw:
            if required:
                raise self.where.error(self.key(name), "is required")
            return float(default) if default is not None else math.nan
        value = self.raw[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.where.error(self.key(name), f"must be a number, got {_show(value)}")
        x = float(value)
        if not math.isfinite(x):
            raise self.where.error(self.key(name), f"must be a finite number, got {_show(value)}")
        if low is not None and (x <= low if strict_low else x < low):
            raise self.where.error(self.key(name), f"must be {'>' if strict_low else '>='} {plain(low)}, got {_show(value)}")
        if high is not None and x > high:
            raise self.where.error(self.key(name), f"must be <= {plain(high)}, got {_show(value)}")
        return x

    def boolean(self, name: str) -> bool:
        value = self.raw[name]
        if not isinstance(value, bool):
            raise self.where.error(self.key(name), f"must be true or false, got {_show(value)}")
        return value

    def integer(self, name: str, default: int | None = None, *, required: bool = False, low: int | None = None) -> int:
        if name not in self.raw:
            if required or default is None:
                raise self.where.error(self.key(name), "is required")
            return default
        value = self.raw[name]
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
                value = int(value)
            else:
                raise self.where.error(self.key(name), f"must be an integer, got {_show(value)}")
        if low is not None and value < low:
            raise self.where.error(self.key(name), f"must be >= {low}, got {_show(value)}")
        if abs(value) > 2**63 - 1:
            raise self.where.error(self.key(name), f"is too large, got {_show(value)}")
        return int(value)

    def string(self, name: str, default: str | None = None, *, required: bool = False,
               choices: tuple[str, ...] | None = None) -> str:
        if name not in self.raw:
            if required or default is None:
                raise self.where.error(self.key(name), "is required")
            return default
        value = self.raw[name]
        if not isinstance(value, str):
            raise self.where.error(self.key(name), f"must be a string, got {_show(value)}")
        if choices is not None and value not in choices:
            hint = difflib.get_close_matches(value, choices, n=1)
            also = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise self.where.error(self.key(name), f"must be one of {', '.join(choices)}, got {_show(value)}{also}")
        if choices is None and not value.strip():
            raise self.where.error(self.key(name), "must not be empty")
        return value

    def table(self, name: str, known: tuple[str, ...]) -> "_Table | None":
        if name not in self.raw:
            return None
        return _Table(self.raw[name], self.key(name), self.where, known)

    def array_of_tables(self, name: str, known: tuple[str, ...]) -> list["_Table"]:
        value = self.raw.get(name, [])
        if not isinstance(value, list):
            raise self.where.error(self.key(name), f"must be an array of tables ([[{name}]]), got {_show(value)}")
        return [_Table(item, f"{self.key(name)}[{i}]", self.where, known) for i, item in enumerate(value)]

    def strings(self, name: str, *, required: bool = False) -> tuple[str, ...]:
        if name not in self.raw:
            if required:
                raise self.where.error(self.key(name), "is required")
            return ()
        value = self.raw[name]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.where.error(self.key(name), f"must be a list of strings, got {_show(value)}")
        return tuple(value)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _weight_problem(w: Any) -> str:
    """Why ``w`` is not a wrr weight ('' when it is one): a whole number >= 1, as the engine counts them."""
    whole = not isinstance(w, bool) and (isinstance(w, int) or (isinstance(w, float) and w.is_integer()))
    if whole and w >= 1:
        return ""
    return (f"must be a whole number >= 1 (weighted round-robin counts whole turns, in the model and the engine "
            f"alike), got {_show(w)}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_TOP_KEYS = ("name", "description", "seed", "duration", "warmup", "window", "queues", "jobs", "pools", "events",
             "autoscalers", "engine")
_QUEUE_KEYS = ("name", "rate_limit", "concurrency_limit", "aging")
_JOB_KEYS = ("name", "queue", "priority", "arrival", "service", "fail_prob", "poison_prob", "attempts",
             "backoff", "timeout", "fan_out", "flow", "data", "payload")
_POOL_KEYS = ("name", "queues", "policy", "weights", "workers", "concurrency")
_EVENT_KEYS = ("at", "kind", "pool", "count", "grace")
_ENGINE_KEYS = tuple(f.name for f in fields(EngineSettings))  # the worker settings (SharedSettings), then the model's
_KEY_ORDER: dict[type, tuple[str, ...]] = {Scenario: _TOP_KEYS, QueueSpec: _QUEUE_KEYS, JobType: _JOB_KEYS,
                                           PoolSpec: _POOL_KEYS, EventSpec: _EVENT_KEYS, EngineSettings: _ENGINE_KEYS,
                                           AutoscalerSpec: AUTOSCALER_KEYS}
_PROFILE_KEYS = ("points", "shape", "period", "scale")
_ARRIVAL_KEYS = {"poisson": ("rate",), "constant": ("rate",), "burst": ("rate", "size", *_PROFILE_KEYS),
                 "trace": ("path",), "profile": _PROFILE_KEYS}
_SERVICE_KEYS = {"constant": ("mean",), "exponential": ("mean",), "lognormal": ("mean", "cv"),
                 "gamma": ("mean", "cv"), "uniform": ("low", "high"), "empirical": ("path",)}


def _parse_scenario(raw: Mapping[str, Any], where: _Where, source: Path | None) -> Scenario:
    top = _Table(raw, "", where, _TOP_KEYS)
    duration = top.number("duration", required=True, low=0, strict_low=True)
    warmup = top.number("warmup", 0.0, low=0)
    if warmup >= duration:
        raise where.error("warmup", f"must be < duration ({plain(duration)}), got {plain(warmup)}")
    engine_table = top.table("engine", _ENGINE_KEYS)
    return Scenario(
        name=top.string("name", required=True),
        description=top.string("description") if top.has("description") else None,
        seed=top.integer("seed", 0, low=0),
        duration=duration,
        warmup=warmup,
        window=top.number("window", low=0, strict_low=True) if top.has("window") else None,
        queues=tuple(_parse_queue(t) for t in top.array_of_tables("queues", _QUEUE_KEYS)),
        jobs=tuple(_parse_job(t) for t in top.array_of_tables("jobs", _JOB_KEYS)),
        pools=tuple(_parse_pool(t) for t in top.array_of_tables("pools", _POOL_KEYS)),
        events=tuple(_parse_event(t) for t in top.array_of_tables("events", _EVENT_KEYS)),
        autoscalers=tuple(_parse_autoscaler(t) for t in top.array_of_tables("autoscalers", AUTOSCALER_KEYS)),
        engine=_parse_engine(engine_table) if engine_table else EngineSettings(),
        source=source,
    )


def _parse_queue(t: _Table) -> QueueSpec:
    rate = t.table("rate_limit", ("max", "per", "key"))
    limit = t.integer("concurrency_limit", low=1) if t.has("concurrency_limit") else None
    return QueueSpec(
        name=t.string("name", required=True),
        rate_limit=RateLimit(
            max=rate.integer("max", required=True, low=1),
            per=rate.number("per", required=True, low=0, strict_low=True),
            key=rate.string("key") if rate.has("key") else None,
        ) if rate else None,
        concurrency_limit=limit,
        aging=t.number("aging", 0.0, low=0),
    )


def _parse_job(t: _Table) -> JobType:
    arrival = _parse_arrival(t) if t.has("arrival") else None
    if not t.has("service"):
        raise t.where.error(t.key("service"), "is required")
    backoff = t.table("backoff", ("kind", "delay", "max", "jitter"))
    fan_out = t.table("fan_out", ("job", "count"))
    flow = t.table("flow", ("children", "on_child_failure"))
    return JobType(
        name=t.string("name", required=True),
        queue=t.string("queue", required=True),
        priority=t.integer("priority", 0),
        arrival=arrival,
        service=_parse_service(t),
        fail_prob=t.number("fail_prob", 0.0, low=0, high=1),
        poison_prob=t.number("poison_prob", 0.0, low=0, high=1),
        attempts=t.integer("attempts", 1, low=1),
        backoff=BackoffSpec(
            kind=backoff.string("kind", "exponential", choices=BACKOFF_KINDS),
            delay=backoff.number("delay", 1.0, low=0),
            max=backoff.number("max", 60.0, low=0),
            jitter=backoff.number("jitter", 0.0, low=0, high=1),
        ) if backoff else BackoffSpec(),
        timeout=t.number("timeout", 0.0, low=0),
        fan_out=FanOut(job=fan_out.string("job", required=True), count=fan_out.integer("count", required=True, low=1))
        if fan_out else None,
        flow=_parse_flow(flow) if flow else None,
        data=_parse_data(t) if t.has("data") else None,
        payload=_parse_payload(t) if t.has("payload") else None,
    )


#: Payload fields the engine harness's synthetic handler reads (its plan): ``jobs[].data`` may not use them.
RESERVED_DATA = ("s", "x", "fan")


def _parse_data(t: _Table) -> dict[str, Any]:
    """``jobs[].data``: a table of JSON values (no null: TOML has none), merged into every payload."""
    raw = t.raw["data"]
    key = t.key("data")
    if not isinstance(raw, Mapping):
        raise t.where.error(key, f"must be a table of JSON values, got {_show(raw)}")
    for name in raw:
        if name in RESERVED_DATA:
            raise t.where.error(f"{key}.{name}", f"is reserved for the harness's planned payload "
                                                 f"({', '.join(RESERVED_DATA)}): choose another field name")
    return cast(dict[str, Any], _json_value(raw, key, t.where, 0))


def _parse_payload(t: _Table) -> dict[str, Any]:
    """``jobs[].payload``: a template table of JSON values whose strings may hold placeholders."""
    raw = t.raw["payload"]
    key = t.key("payload")
    if not isinstance(raw, Mapping):
        raise t.where.error(key, f"must be a table of JSON values (a payload template), got {_show(raw)}")
    value = cast(dict[str, Any], _json_value(raw, key, t.where, 0))
    for bad_key, problem in template_errors(value, key):
        raise t.where.error(bad_key, problem)
    return value


def _json_value(value: Any, key: str, where: _Where, depth: int) -> Any:
    if depth > 32:
        raise where.error(key, "nests too deeply (at most 32 levels)")
    if isinstance(value, Mapping):
        return {str(k): _json_value(v, f"{key}.{k if _BARE_KEY.fullmatch(str(k)) else json.dumps(str(k))}", where,
                                    depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{key}[{i}]", where, depth + 1) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise where.error(key, f"must be a finite number, got {_show(value)}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63 - 1:
        raise where.error(key, f"is too large, got {_show(value)}")
    if isinstance(value, (str, bool, int, float)):
        return value
    raise where.error(key, f"must be a JSON value (string, number, boolean, array or table), got {_show(value)}")


def _parse_flow(t: _Table) -> Flow:
    children = t.strings("children", required=True)
    if not children:
        raise t.where.error(t.key("children"), "must name at least one child job type")
    return Flow(children=children,
                on_child_failure=t.string("on_child_failure", "fail", choices=CHILD_FAILURE_POLICIES))


def _kind_table(t: _Table, name: str, kinds: Mapping[str, tuple[str, ...]]) -> tuple[str, _Table]:
    raw = t.raw[name]
    if not isinstance(raw, Mapping):
        raise t.where.error(t.key(name), f"must be a table like {{kind = ...}}, got {_show(raw)}")
    probe = _Table({"kind": raw.get("kind")} if "kind" in raw else {}, t.key(name), t.where, ("kind",))
    kind = probe.string("kind", required=True, choices=tuple(kinds))
    return kind, _Table(raw, t.key(name), t.where, ("kind", *kinds[kind]))


def _parse_arrival(t: _Table) -> dists.Arrival:
    kind, a = _kind_table(t, "arrival", _ARRIVAL_KEYS)
    if kind == "trace":
        return dists.TraceArrivals(path=(p := _path(a)), at=_read_column(p, a, "path"))
    if kind == "profile":
        return dists.ProfileArrivals(profile=_parse_profile(a))
    if kind == "burst" and a.has("points"):
        if a.has("rate"):
            raise a.where.error(a.key("rate"), "must be left out when `points` give the rate (a profiled burst)")
        return dists.BurstArrivals(size=a.integer("size", required=True, low=1), profile=_parse_profile(a))
    for name in _PROFILE_KEYS:
        if a.has(name):
            raise a.where.error(a.key(name), f"belongs to a rate profile: give `points` too (or use kind = \"profile\")")
    rate = a.number("rate", required=True, low=0, strict_low=True)
    if kind == "poisson":
        return dists.PoissonArrivals(rate=rate)
    if kind == "constant":
        return dists.ConstantArrivals(rate=rate)
    return dists.BurstArrivals(rate=rate, size=a.integer("size", required=True, low=1))


def _parse_profile(a: _Table) -> dists.RateProfile:
    """``points``, ``shape``, ``period`` and ``scale`` of a rate profile, each checked by name."""
    raw = a.raw.get("points")
    key = a.key("points")
    if raw is None:
        raise a.where.error(key, "is required: a list of [time s, rate jobs/s] pairs")
    if not isinstance(raw, list) or not raw:
        raise a.where.error(key, f"must be a non-empty list of [time s, rate jobs/s] pairs, got {_show(raw)}")
    points: list[tuple[float, float]] = []
    for i, pair in enumerate(raw):
        where = f"{key}[{i}]"
        if (not isinstance(pair, list) or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in pair)):
            raise a.where.error(where, f"must be a pair [time s, rate jobs/s] of numbers, got {_show(pair)}")
        t, r = float(pair[0]), float(pair[1])
        if not (math.isfinite(t) and math.isfinite(r)):
            raise a.where.error(where, f"must be finite numbers, got {_show(pair)}")
        if t < 0:
            raise a.where.error(where, f"time must be >= 0, got {plain(t)}")
        if r < 0:
            raise a.where.error(where, f"rate must be >= 0, got {plain(r)}")
        if points and t < points[-1][0]:
            raise a.where.error(where, f"time must not be before the previous point's ({plain(points[-1][0])}): "
                                       f"times are non-decreasing, got {plain(t)}")
        points.append((t, r))
    if not any(r > 0 for _, r in points):
        raise a.where.error(key, "must give some rate > 0 (else nothing ever arrives)")
    period = a.number("period", low=0, strict_low=True) if a.has("period") else None
    if period is not None and period < points[-1][0]:
        raise a.where.error(a.key("period"), f"must not be shorter than the last point's time "
                                              f"({plain(points[-1][0])}), got {plain(period)}")
    return dists.RateProfile(points=tuple(points),
                             shape=a.string("shape", "linear", choices=dists.PROFILE_SHAPES),
                             period=period, scale=a.number("scale", 1.0, low=0, strict_low=True))


def _parse_service(t: _Table, name: str = "service") -> dists.Distribution:
    kind, s = _kind_table(t, name, _SERVICE_KEYS)
    if kind == "empirical":
        return dists.Empirical(path=(p := _path(s)), values=_read_column(p, s, "path"))
    if kind == "uniform":
        low = s.number("low", required=True, low=0)
        high = s.number("high", required=True, low=0)
        if high < low:
            raise s.where.error(s.key("high"), f"must be >= low ({plain(low)}), got {plain(high)}")
        return dists.Uniform(low=low, high=high)
    mean = s.number("mean", required=True, low=0, strict_low=kind != "constant")
    if kind == "constant":
        return dists.Constant(mean=mean)
    if kind == "exponential":
        return dists.Exponential(mean=mean)
    cv = s.number("cv", required=True, low=0)
    return dists.Lognormal(mean=mean, cv=cv) if kind == "lognormal" else dists.Gamma(mean=mean, cv=cv)


def _path(t: _Table) -> Path:
    p = Path(t.string("path", required=True))
    return p if p.is_absolute() else t.where.folder / p


def _read_column(path: Path, t: _Table, key: str) -> tuple[float, ...]:
    """Numbers from the first column of a CSV file (a non-numeric header row is skipped)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows = [row for row in csv.reader(f) if row and row[0].strip()]
    except OSError as e:
        raise t.where.error(t.key(key), f"cannot be read: {path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise t.where.error(t.key(key), f"cannot be read: {path} is not UTF-8 text: byte {e.object[e.start]:#04x} "
                                        f"at offset {e.start}") from None
    values: list[float] = []
    for i, row in enumerate(rows):
        try:
            x = float(row[0])
        except ValueError:
            if i == 0:
                continue  # header
            raise t.where.error(t.key(key), f"{path} line {i + 1}: not a number: {_show(row[0])}") from None
        if not math.isfinite(x) or x < 0:
            raise t.where.error(t.key(key), f"{path} line {i + 1}: values must be finite and >= 0, got {_show(row[0])}")
        values.append(x)
    if not values:
        raise t.where.error(t.key(key), f"{path} holds no numbers")
    return tuple(values)


def _parse_pool(t: _Table) -> PoolSpec:
    return PoolSpec(
        name=t.string("name", required=True),
        queues=t.strings("queues", required=True),
        policy=t.string("policy", "priority", choices=POLICIES),
        weights=t.weights("weights"),
        workers=t.integer("workers", 1, low=0),
        concurrency=t.integer("concurrency", 1, low=1),
    )


def _parse_event(t: _Table) -> EventSpec:
    return EventSpec(
        at=t.number("at", required=True, low=0),
        kind=t.string("kind", required=True, choices=EVENT_KINDS),
        pool=t.string("pool", required=True),
        count=t.integer("count", 1, low=1),
        grace=t.number("grace", 30.0, low=0),
    )


def _parse_autoscaler(t: _Table) -> AutoscalerSpec:
    """One ``[[autoscalers]]`` table (qsim.spec.autoscaler): common keys, then the policy's parameters."""
    policy = t.string("policy", "hpa", choices=AUTOSCALE_POLICIES)
    given = {str(k): v for k, v in t.raw.items() if k not in COMMON_KEYS}  # another policy's keys too
    low = t.integer("min", 1, low=0)
    high = t.integer("max", 100, low=1)
    values: dict[str, Any] = {}
    for p in POLICY_PARAMS[policy]:
        if not t.has(p.name):  # a series' keys left out stay out (written only when given)
            values[p.name] = None if p.default is REQUIRED or p.name in QUIET_KEYS else p.default
        elif p.kind == "number":
            values[p.name] = t.number(p.name, low=p.low, strict_low=p.strict)
        elif p.kind == "integer":
            values[p.name] = t.integer(p.name, low=int(p.low))
        elif p.kind == "choice":
            values[p.name] = t.string(p.name, choices=p.choices)
        elif p.kind == "bool":
            values[p.name] = t.boolean(p.name)
        elif p.kind == "slo":
            values[p.name] = text = t.string(p.name)
            if not SLO_SHAPE.match(text):
                raise t.where.error(t.key(p.name), f"must be an SLO like \"p95_wait<=2\", got {_show(text)}")
        elif p.kind == "timezone":
            values[p.name] = t.string(p.name)
        elif p.kind == "floors":
            values[p.name] = _parse_floors(t, p.name)
        else:
            values[p.name] = _parse_scale_policies(t, p.name)
    if "metric_type" in values and values["metric_type"] is None:
        values["metric_type"] = default_metric_type(values["metric"])
    wrong = problem(policy, {**given, **values}, low=low, high=high)  # AutoscalerSpec's own check
    if wrong is not None:
        raise t.where.error(t.key(wrong[0]), wrong[1])
    return AutoscalerSpec(
        pool=t.string("pool", required=True), min=low, max=high,
        start_delay=_parse_service(t, "start_delay") if t.has("start_delay") else dists.Constant(mean=0.0),
        grace=t.number("grace", 30.0, low=0), poll=t.number("poll", 30.0, low=0, strict_low=True),
        flap_window=t.number("flap_window", 600.0, low=0), policy=policy, **values)


def _parse_floors(t: _Table, name: str) -> tuple[FloorSpec, ...]:
    """``floors``: a list of ``{start = "HH:MM", end = "HH:MM", replicas = N}`` (KEDA cron triggers)."""
    out = []
    for r in t.array_of_tables(name, ("start", "end", "replicas")):
        start, end = r.string("start", required=True), r.string("end", required=True)
        replicas = r.integer("replicas", required=True, low=1)
        try:
            out.append(FloorSpec(start=start, end=end, replicas=replicas))
        except ValueError as e:
            key, _, what = str(e).partition(" ")
            raise t.where.error(r.key(key), what) from None
    return tuple(out)


def _parse_scale_policies(t: _Table, name: str) -> tuple[ScalePolicySpec, ...]:
    """``scale_up`` / ``scale_down``: a list of ``{type = "pods" | "percent", value, period}``."""
    return tuple(ScalePolicySpec(type=r.string("type", required=True, choices=SCALE_POLICY_TYPES),
                                 value=r.integer("value", required=True, low=1),
                                 period=r.number("period", required=True, low=0, strict_low=True))
                 for r in t.array_of_tables(name, ("type", "value", "period")))


def _parse_engine(t: _Table) -> EngineSettings:
    table = _parse_overhead_table(t) if t.has("overhead_by_load") else None
    fetch, ack = t.number("fetch_overhead", 0.0, low=0), t.number("ack_overhead", 0.0, low=0)
    if table is not None and (fetch or ack):
        key = t.key("fetch_overhead" if fetch else "ack_overhead")
        raise t.where.error(key, f"give it or {t.key('overhead_by_load')} (the overheads by load), not both")
    return EngineSettings(
        **_parse_worker_settings(t),
        fetch_overhead=fetch,
        ack_overhead=ack,
        start_delay=t.number("start_delay", 0.0, low=0),
        pickup_latency=t.number("pickup_latency", 0.0, low=0),
        overhead_by_load=table,
        redis_cpu_per_job_us=t.number("redis_cpu_per_job_us", low=0, strict_low=True)
        if t.has("redis_cpu_per_job_us") else None,
        redis_idle_us_per_worker=t.number("redis_idle_us_per_worker", low=0)
        if t.has("redis_idle_us_per_worker") else None,
    )


def _parse_worker_settings(t: _Table) -> dict[str, Any]:
    """The ``[engine]`` keys that are worker settings (:class:`qsim.spec.settings.SharedSettings`), each
    checked by the bounds the engine declares for it; the ones not given keep their defaults."""
    out: dict[str, Any] = {}
    for f in fields_of(SharedSettings):
        if not t.has(f.name):
            continue
        s, value = f.setting, t.raw[f.name]
        if f.kind in ("int", "auto"):
            low = None if s.low is None else math.floor(s.low) + 1 if s.above else math.ceil(s.low)
            if f.kind == "auto" and value == "auto":
                out[f.name] = "auto"
                continue
            if f.kind == "auto" and isinstance(value, str):
                raise t.where.error(t.key(f.name), f'must be "auto" or an integer >= {low}, got {_show(value)}')
            out[f.name] = t.integer(f.name, low=low)
        elif f.kind == "float":
            out[f.name] = t.number(f.name, low=s.low, strict_low=s.above)
        elif f.kind == "str":
            out[f.name] = t.string(f.name, choices=s.choices or None)
        elif f.kind == "bool":
            if not isinstance(value, bool):
                raise t.where.error(t.key(f.name), f"must be true or false, got {_show(value)}")
            out[f.name] = value
        elif f.kind == "names":
            out[f.name] = t.strings(f.name)
        else:
            raise TypeError(f"engine.{f.name}: a {f.kind} setting has no TOML form yet (qsim/spec/scenario.py)")
    return out


def _parse_overhead_table(t: _Table) -> tuple[tuple[float, float, float], ...]:
    """``overhead_by_load = [[utilization, fetch_overhead, ack_overhead], ...]``, utilizations increasing in [0, 1]."""
    raw, key = t.raw["overhead_by_load"], t.key("overhead_by_load")
    shape = "an array of [utilization, fetch_overhead, ack_overhead] rows, e.g. [[0.1, 0.0008, 0.0013], [0.7, 0.0025, 0.0037]]"
    if not isinstance(raw, list) or not raw:
        raise t.where.error(key, f"must be {shape}, got {_show(raw)}")
    rows: list[tuple[float, float, float]] = []
    for i, row in enumerate(raw):
        if not (isinstance(row, list) and len(row) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                                and math.isfinite(v) for v in row)):
            raise t.where.error(f"{key}[{i}]", f"must be [utilization, fetch_overhead, ack_overhead] (three finite "
                                              f"numbers), got {_show(row)}")
        u, f, a = (float(v) for v in row)
        if not 0 <= u <= 1:
            raise t.where.error(f"{key}[{i}]", f"utilization must be between 0 and 1, got {plain(u)}")
        if f < 0 or a < 0:
            raise t.where.error(f"{key}[{i}]", f"overheads must be >= 0, got {_show(row)}")
        if rows and u <= rows[-1][0]:
            raise t.where.error(f"{key}[{i}]", f"utilizations must increase from row to row, got {plain(u)} after "
                                              f"{plain(rows[-1][0])}")
        rows.append((u, f, a))
    return tuple(rows)


# --------------------------------------------------------------------------- cross-checks


_Named = TypeVar("_Named", QueueSpec, JobType, PoolSpec)


def _by_name(items: tuple[_Named, ...], name: str, what: str) -> _Named:
    for item in items:
        if item.name == name:
            return item
    raise KeyError(f"no {what} named {name!r}")


def _unknown(where: _Where, key: str, what: str, name: str, known: list[str]) -> ScenarioError:
    hint = difflib.get_close_matches(name, known, n=1)
    also = f" (did you mean '{hint[0]}'?)" if hint else f" (defined: {', '.join(known) or 'none'})"
    return where.error(key, f"names no {what}: {name!r}{also}")


def _check_window(s: Scenario, where: _Where) -> None:
    """A window is a number of seconds > 0 and no longer than the measured run (duration - warmup)."""
    w = s.window
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
        raise where.error("window", f"must be a number of seconds > 0, got {_show(w)}")
    if s.warmup >= s.duration:  # no measured run at all: the warmup is what is wrong (a --vary may set it)
        raise where.error("warmup", f"must be < duration ({plain(s.duration)}), got {plain(s.warmup)}")
    if w > s.duration - s.warmup:
        raise where.error("window", f"must be at most the measured run, duration - warmup = "
                                    f"{plain(s.duration - s.warmup)} s, got {plain(w)}")


#: The longest worker-process suffix of a pool's log file name: ``{pool}-{n}.log``.
_LOG_SUFFIX = len("-999999.log")


def _check_names(s: Scenario, where: _Where) -> None:
    """The engine's name lengths (:mod:`qsim.names`), so the model refuses what the engine could not run:
    queue names become Redis keys, job names are stored with each job, a pool names its processes' log files."""
    limits = (("queues", [q.name for q in s.queues], MAX_NAME, "the engine's limit"),
              ("jobs", [j.name for j in s.jobs], MAX_JOB_TYPE, f"its job ids must fit the engine's {MAX_NAME}"))
    for label, names, limit, why in limits:
        for i, name in enumerate(names):
            if len(name) > limit:
                raise where.error(f"{label}[{i}].name", f"must be at most {limit} characters ({why}), got "
                                                        f"{len(name)} ({name[:40]!r}...)")
    for i, p in enumerate(s.pools):
        size = len(p.name.encode("utf-8", "surrogatepass"))
        if size > FILE_NAME_MAX - _LOG_SUFFIX:
            raise where.error(f"pools[{i}].name", f"must be at most {FILE_NAME_MAX - _LOG_SUFFIX} bytes in UTF-8 (the "
                                                  f"engine harness names its worker processes' log files after it), "
                                                  f"got {size} ({p.name[:40]!r}...)")


def _check_cycles(s: Scenario, where: _Where) -> None:
    """No job type is its own descendant through ``fan_out`` and ``flow.children``: each of its jobs would
    plan children without end. Named at the first job type of the cycle, with the cycle."""
    kids = {j.name: ([j.fan_out.job] if j.fan_out else []) + (list(j.flow.children) if j.flow else [])
            for j in s.jobs}
    for i, j in enumerate(s.jobs):
        back: dict[str, str] = {}  # child type -> the type that first reached it
        frontier = [j.name]
        while frontier and j.name not in back:
            step = []
            for parent in frontier:
                for kid in kids[parent]:
                    if kid not in back:
                        back[kid] = parent
                        step.append(kid)
            frontier = step
        if j.name in back:
            cycle = [j.name]
            while len(cycle) == 1 or cycle[-1] != j.name:
                cycle.append(back[cycle[-1]])
            cycle.reverse()  # j -> ... -> j
            key = f"jobs[{i}].fan_out.job" if j.fan_out and j.fan_out.job == cycle[1] else f"jobs[{i}].flow.children"
            raise where.error(key, f"must not lead back to the job itself, got the cycle "
                                   f"{' -> '.join(repr(n) for n in cycle)}")


def _check_references(s: Scenario, where: _Where) -> None:
    """Names must be unique and every reference must point at something defined."""
    named: dict[str, list[str]] = {"queues": [q.name for q in s.queues], "jobs": [j.name for j in s.jobs],
                                   "pools": [p.name for p in s.pools]}
    for label, names in named.items():
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                raise where.error(f"{label}[{i}].name", f"is a duplicate: {name!r}")
            seen.add(name)
    _check_names(s, where)
    if s.window is not None:
        _check_window(s, where)
    if not s.queues:
        raise where.error("queues", "must define at least one queue ([[queues]])")
    if not s.jobs:
        raise where.error("jobs", "must define at least one job type ([[jobs]])")
    if not s.pools:
        raise where.error("pools", "must define at least one pool ([[pools]])")
    queues, jobs, pools = named["queues"], named["jobs"], named["pools"]
    for i, j in enumerate(s.jobs):
        if j.queue not in queues:
            raise _unknown(where, f"jobs[{i}].queue", "queue", j.queue, queues)
        if j.fan_out and j.fan_out.job not in jobs:
            raise _unknown(where, f"jobs[{i}].fan_out.job", "job type", j.fan_out.job, jobs)
        if j.fan_out and j.fan_out.job == j.name:
            raise where.error(f"jobs[{i}].fan_out.job", f"must not name the job itself: {j.fan_out.job!r}")
        if j.flow:
            for c in j.flow.children:
                if c not in jobs:
                    raise _unknown(where, f"jobs[{i}].flow.children", "job type", c, jobs)
                if c == j.name:
                    raise where.error(f"jobs[{i}].flow.children", f"must not name the job itself: {c!r}")
    _check_cycles(s, where)
    if not any(j.arrival for j in s.jobs):
        raise where.error("jobs", "must give at least one job type an `arrival` (else nothing ever arrives)")
    for i, p in enumerate(s.pools):
        if not p.queues:
            raise where.error(f"pools[{i}].queues", "must list at least one queue")
        for q in p.queues:
            if q not in queues:
                raise _unknown(where, f"pools[{i}].queues", "queue", q, queues)
        twice = sorted({q for q in p.queues if p.queues.count(q) > 1})
        if twice:
            raise where.error(f"pools[{i}].queues", f"lists {', '.join(map(repr, twice))} more than once (a worker "
                                                    "serves each queue once; weights set their shares)")
        for q, w in p.weights.items():
            if q not in p.queues:
                raise where.error(f"pools[{i}].weights.{q}", f"is not one of the pool's queues ({', '.join(p.queues)})")
            if _weight_problem(w):
                raise where.error(f"pools[{i}].weights.{q}", _weight_problem(w))
    served = {q for p in s.pools for q in p.queues}
    for i, name in enumerate(queues):
        if name not in served:
            raise where.error(f"queues[{i}]", f"{name!r} is served by no pool: its jobs would never run")
    scaled: dict[str, int] = {}
    for i, a in enumerate(s.autoscalers):
        if a.pool not in pools:
            raise _unknown(where, f"autoscalers[{i}].pool", "pool", a.pool, pools)
        if a.pool in scaled:
            raise where.error(f"autoscalers[{i}].pool", f"{a.pool!r} already has an autoscaler "
                                                        f"(autoscalers[{scaled[a.pool]}]): at most one per pool")
        scaled[a.pool] = i
    for i, e in enumerate(s.events):
        if e.pool not in pools:
            raise _unknown(where, f"events[{i}].pool", "pool", e.pool, pools)
        if e.pool in scaled:
            raise where.error(f"events[{i}].pool", f"{e.pool!r} is autoscaled (autoscalers[{scaled[e.pool]}]): "
                                                   "its processes are the autoscaler's to start and stop")
