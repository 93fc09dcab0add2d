"""What every ``qsim`` subcommand shares: exit codes, argparse types, the default
Redis URL, scenario loading, progress on stderr and JSON on stdout.

Exit codes (the one place they are decided, :func:`exit_code`; the table is
``docs/reference/exit-codes.md``): 0 success; 2 bad input, with one sentence
naming what is wrong: a scenario, an argument, a CSV or a window of measured
jobs (:class:`~qsim.errors.CalibrationError`), an output path
(:mod:`qsim.results.outpath`), a Redis URL that is malformed or cannot be reached;
1 any other failure (``qsim compare --check`` out of tolerance, a worker
process that did not start, Redis going away mid-run); 3 ``qsim worker``: jobs
were cut off at shutdown and handed back; 130 interrupted. ``--json`` prints
exactly one JSON document on stdout; logs and progress go to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, TextIO

from qsim.engine import EXIT_CUT_OFF
from qsim.engine.connection import DEFAULT_REDIS_URL
from qsim.errors import (CalibrationError, RedisUnavailable, ScenarioError, TheoryNotApplicable,
                         ToleranceError, UsageError)
from qsim.engine.safety import check_redis_url
from qsim.scenarios import load as load_scenario

__all__ = ["EXIT_OK", "EXIT_FAILURE", "EXIT_BAD_INPUT", "EXIT_CUT_OFF", "EXIT_INTERRUPTED", "BAD_INPUT",
           "share_of_core", "add_redis_flags", "exit_code", "DEFAULT_REDIS_URL", "resolve_redis_url", "redis_url",
           "int_at_least", "nonneg_int", "pos_int", "pos_float",
           "nonneg_float", "load_scenario", "Progress", "print_json", "finite", "fmt", "err", "parse_vary"]

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
#: Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130
#: The errors that are the user's input, not a failure of qsim or its surroundings: exit 2.
BAD_INPUT: tuple[type[BaseException], ...] = (ScenarioError, TheoryNotApplicable, ToleranceError, CalibrationError,
                                              UsageError, RedisUnavailable)


def exit_code(error: BaseException) -> int:
    """The exit code for an error that ended a command: 2 for :data:`BAD_INPUT`, 130 for Ctrl-C, else 1.

    ``RedisUnavailable`` counts as bad input: the URL named a Redis that cannot be reached (or
    refused the login).
    """
    if isinstance(error, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(error, BAD_INPUT):
        return EXIT_BAD_INPUT
    return EXIT_FAILURE


def resolve_redis_url(arg: str | None) -> str:
    """``--redis``, else ``$REDIS_URL``, else :data:`DEFAULT_REDIS_URL` (``redis://127.0.0.1:6379/0``).

    Raises:
        UsageError: the URL is malformed (``$REDIS_URL`` is named when it came from there).
    """
    if arg:
        return check_redis_url(arg)
    env = os.environ.get("REDIS_URL")
    if env:
        try:
            return check_redis_url(env)
        except UsageError as e:
            raise UsageError(f"$REDIS_URL: {e}") from None
    return DEFAULT_REDIS_URL


def redis_url(text: str) -> str:
    """argparse type of ``--redis``: a Redis URL (``redis://HOST:PORT/DB``, ``rediss://``, ``unix://``,
    ``redis+cluster://``); a malformed one is refused before anything runs (exit 2)."""
    try:
        return check_redis_url(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def err(command: str, message: str) -> None:
    """One line ``qsim COMMAND: message`` on stderr."""
    print(f"qsim {command}: {message}", file=sys.stderr)


# --------------------------------------------------------------------------- argparse types


def int_at_least(text: str, low: int, why: str = "") -> int:
    """An integer >= ``low`` (argparse.ArgumentTypeError naming that one bound, ``why`` appended, if not)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be >= {low}{why}, got {value}")
    return value


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return int_at_least(text, 0)


#: The largest seed: a scenario file's (TOML's integers are 64-bit), so that a Summary's seed can be written back.
MAX_SEED = 2**63 - 1


def seed_int(text: str) -> int:
    """argparse type: a seed, 0 .. :data:`MAX_SEED`."""
    value = int_at_least(text, 0)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SEED} (a scenario file's largest integer), got {value}")
    return value


def pos_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return int_at_least(text, 1)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None


def pos_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def share_of_core(text: str) -> float:
    """argparse type of ``--redis-ceiling``: a share of one Redis core in (0, 1]."""
    value = _float(text)
    if not (0 < value <= 1):
        raise argparse.ArgumentTypeError(f"must be a share of one Redis core in (0, 1], such as 0.7, got {text}")
    return value


def add_redis_flags(p: argparse.ArgumentParser) -> None:
    """``--redis-ceiling`` and ``--redis-cpu-per-job``: how ``plan``, ``autoscale`` and ``advise`` price Redis."""
    from qsim.spec.redis_cost import DEFAULT_CEILING

    p.add_argument("--redis-ceiling", type=share_of_core, default=DEFAULT_CEILING, metavar="U",
                   help=f"warn when the answer needs more than this share of one Redis core (default "
                        f"{DEFAULT_CEILING:g})")
    p.add_argument("--redis-cpu-per-job", type=pos_float, metavar="US",
                   help="Redis CPU per job in µs to price the answer at (default: the scenario's "
                        "engine.redis_cpu_per_job_us, measured by qsim calibrate --probe, else qsim's default)")


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = _float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


# --------------------------------------------------------------------------- output


class Progress:
    """A progress bar on stderr that shows up only once a run has lasted ``after`` seconds.

    On a terminal it redraws one line; elsewhere (CI logs) it prints a line every 10%.
    """

    def __init__(self, label: str, *, after: float = 2.0, stream: TextIO | None = None) -> None:
        self.label, self.after = label, after
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.t0 = time.monotonic()
        self.shown = False
        self.last_decile = -1

    def __call__(self, fraction: float) -> None:
        elapsed = time.monotonic() - self.t0
        if elapsed < self.after:
            return
        fraction = min(max(fraction, 0.0), 1.0)
        self.shown = True
        if self.tty:
            bar = "#" * int(30 * fraction)
            self.stream.write(f"\r{self.label} [{bar:<30}] {fraction:6.1%} {elapsed:6.1f}s")
            self.stream.flush()
        elif int(fraction * 10) > self.last_decile:
            self.last_decile = int(fraction * 10)
            self.stream.write(f"{self.label}: {fraction:.0%} after {elapsed:.1f}s\n")

    def close(self) -> None:
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def finite(x: Any) -> Any:
    """``x`` with every NaN or infinite float (in nested dicts and lists) replaced by None."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def print_json(doc: Any) -> None:
    """Exactly one JSON document on stdout (NaN/inf become null)."""
    json.dump(finite(doc), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def fmt(x: Any, unit: str = "") -> str:
    """A number for a table: 4 significant digits, ``-`` for None, ``inf``."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if math.isinf(x):
            return "inf"
        return f"{x:.4g}{unit}"
    return f"{x}{unit}"


def parse_vary(items: list[str]) -> dict[str, list[float | int]]:
    """``--vary PATH=VALUES`` options (``pools.NAME.concurrency=1:64``) as a grid: path -> values."""
    from qsim.analysis.plan.sweep import parse_values

    vary: dict[str, list[float | int]] = {}
    for item in items:
        path, sep, values = item.partition("=")
        if not sep or not path.strip():
            raise ScenarioError(f"--vary must look like pools.NAME.concurrency=1:64, got {item!r}")
        if path.strip() in vary:
            raise ScenarioError(f"--vary {path.strip()} is given twice: list every value in one --vary "
                                f"(e.g. {path.strip()}=3,4)")
        try:
            vary[path.strip()] = parse_values(values)
        except ScenarioError as e:
            raise ScenarioError(f"--vary {path.strip()}: {e}") from None
    return vary


def repeated(values: list[str] | None, option: str) -> str | None:
    """The problem with an option given the same value twice (``--queue a --queue a``), in one sentence; None:
    none repeats. A queue read twice would count each of its jobs twice."""
    seen: set[str] = set()
    for v in values or []:
        if v in seen:
            return f"{option} {v} is given twice: give each once"
        seen.add(v)
    return None
