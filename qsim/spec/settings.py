"""Settings dataclasses whose fields carry their own surfaces, and the worker settings a deployment shares.

A field of such a dataclass carries a :class:`Setting` (``field.metadata["setting"]``): a help line,
its bounds, the word for None on a command line, and -- for a field a scenario run does not take from
``[engine]`` -- where the run takes it from. :func:`fields_of` lists the fields with their kind (from
the annotation), and each :class:`SettingField` derives the rest: the ``ValueError`` message of a bad
value, its flag (``lock_duration`` is ``--lock-duration``), the argparse options, the text of a value
on a command line and back.

:class:`SharedSettings` holds the worker settings every worker of a deployment shares. The engine's
:class:`~qsim.engine.settings.WorkerSettings` extends it (with what differs per worker), and so does
``qsim.spec.scenario.EngineSettings``: each of its fields is an ``[engine]`` key of a Scenario, parsed by
its bounds, that ``qsim run`` and Locust's ``--start-workers`` hand to every worker process. It lives
here, below the engine and the Scenario, so that a Scenario is read without loading the engine
(``import qsim`` stays light); :mod:`qsim.engine.settings` is the whole story.
"""

from __future__ import annotations

import argparse
import functools
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, TypeVar

from qsim.results.display import plain

__all__ = ["Setting", "SettingField", "SharedSettings", "fields_of", "setting", "DEFAULT_MAX_PAYLOAD", "DEFAULT_EVENTS_MAXLEN"]

T = TypeVar("T")

#: A handler's largest return value by default, bytes (``max_payload``; also the producers' payload limit).
DEFAULT_MAX_PAYLOAD = 512 * 1024
#: Approximate cap of each queue's event stream by default (``events_maxlen``).
DEFAULT_EVENTS_MAXLEN = 10_000


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


def setting(default: T, help: str, **spec: Any) -> T:
    """A dataclass field with a default and its :class:`Setting` (``spec``: the Setting's other arguments)."""
    return field(default=default, metadata={"setting": Setting(help=help, **spec)})


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True, kw_only=True)
class SharedSettings:
    """The settings every worker of a deployment shares: a Scenario's ``[engine]`` keys.

    ``qsim.spec.scenario.EngineSettings`` extends this class (adding the timings only the model uses), so a
    field added here is an ``[engine]`` key, handed by ``qsim run`` and Locust's ``--start-workers`` to
    every pool worker. The engine's :class:`~qsim.engine.settings.WorkerSettings` extends it with what
    differs per worker.
    The model mirrors ``lock_duration``, ``stalled_interval`` and ``max_stalled``; the others
    are the engine's alone.

    ``batch_size`` 16 was tuned with benchmarks/worker_cpu.py and engine_throughput.py (8 cost ~14%
    more worker CPU per no-op job); batches of moderate size, several in flight, keep jobs from
    moving in lock-step. ``prefetch``: jobs fetched ahead wait in the worker (locks renewed with the
    running ones) so a slot that frees starts its next job at once; their recorded start is when
    their handler started. ``"auto"`` fetches as many as would each wait about a round trip or less
    (the k-th about k x the handler's average run time / concurrency, under 2 ms), at most
    ``batch_size``; ``N`` up to N. None is fetched ahead while a queue served has a concurrency or
    rate limit. A held job waits for a slot at most its hold bound, ``max(10 ms, 4 x k x run time /
    concurrency)`` and half a lock at most (10 ms with ``"auto"``), then goes back to the front of its
    level unstarted (no attempt, no stall); at shutdown the held jobs go back at once
    (docs/explanation/fetch-ahead.md).
    """

    lock_duration: float = setting(30.0, "seconds a job's lock lasts; renewed every half of it",
                                   low=0, above=True, seconds=True)
    stalled_interval: float = setting(30.0, "seconds between checks for jobs whose lock expired",
                                      low=0, above=True, seconds=True)
    max_stalled: int = setting(1, "stalls a job may have before it goes to the dead-letter queue", low=0)
    prefetch: int | str = setting("auto", "jobs fetched ahead of free slots: auto (a few, only for short jobs) or a "
                                          "number (0: never); never on queues with a concurrency or rate limit; a "
                                          "held job that gets no slot within its hold bound (10 ms with auto) goes "
                                          "back to the queue", low=0, metavar="auto|N")
    batch_size: int = setting(16, "at most this many fetches and as many acknowledgements per round trip", low=1)
    max_inflight: int = setting(2, "batches (round trips) in flight at once", low=1)
    block_timeout: float = setting(5.0, "longest single wait (BLPOP) for new jobs, seconds",
                                   low=0, above=True, seconds=True)
    max_payload: int = setting(DEFAULT_MAX_PAYLOAD, "largest return value of a handler, bytes", low=1)
    events_maxlen: int = setting(DEFAULT_EVENTS_MAXLEN, "approximate cap of each queue's event stream", low=1)


_NONE_GIVEN = object()  # the word for None on a command line, parsed (None itself means "not given")


@dataclass(frozen=True)
class SettingField:
    """One field of a settings dataclass with its :class:`Setting`, its kind and what derives from them.

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
            text = f"{'>' if s.above else '>='} {plain(s.low)}" if s.low is not None else "a number"
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
def fields_of(cls: type) -> tuple[SettingField, ...]:
    """The fields of the settings dataclass ``cls`` that carry a :class:`Setting`, in order."""
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


def _default_of(f: Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING
