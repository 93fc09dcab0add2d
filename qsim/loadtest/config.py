"""The Locust harness's settings: custom command-line arguments and what they resolve to.

Nothing here imports Locust: :func:`add_arguments` takes Locust's parser
(duck-typed), :meth:`LoadTestConfig.from_options` its parsed options.

Arguments (each also read from an environment variable):

=============================  =================================  ==============================================
argument                       environment variable               meaning
=============================  =================================  ==============================================
``--redis-url URL``            ``REDIS_URL``                      Redis to load (default redis://127.0.0.1:6379/0)
``--scenario FILE|NAME``       ``QSIM_SCENARIO``                  scenario file or built-in name (default ``workshop``)
``--i-know-this-is-not-local`` ``QSIM_I_KNOW_THIS_IS_NOT_LOCAL``  allow a non-loopback Redis (staging)
``--qsim-prefix P``            ``QSIM_PREFIX``                    key prefix of the queues (default ``qsim``)
``--rate-scale X``             ``QSIM_RATE_SCALE``                multiply every arrival rate (default 1)
``--time-scale S``             ``QSIM_TIME_SCALE``                wall-clock seconds per scenario second (default 1)
``--pacing P``                 ``QSIM_PACING``                    ``constant`` (default), ``poisson`` or ``scenario``
``--drain S``                  ``QSIM_DRAIN``                     seconds to keep observing after arrivals stop (default 10)
``--start-workers``            ``QSIM_START_WORKERS``             start the scenario's pools as local processes
``--run-id ID``                ``QSIM_RUN_ID``                    job-id prefix of this run (default: random)
``--compare-model``            ``QSIM_COMPARE_MODEL``             at the end, the model's p50/p95 next to the measured
``--target qsim|bullmq``       ``QSIM_TARGET``                    the queue system: qsim's engine (default) or BullMQ
``--bullmq-prefix P``          ``QSIM_BULLMQ_PREFIX``             BullMQ's key prefix (default ``bull``)
``--slo THRESHOLD``            ``QSIM_SLO`` (``;`` between)       judge the run at the end (repeat): ``p95_wait<=2``,
                                                                  ``lost==0``; Locust's exit code is 1 on a miss
``--abort-on-fail``            ``QSIM_ABORT_ON_FAIL``             stop early once a threshold can no longer be met
``--qsim-help``                                                   Locust's help with these options, then exit
=============================  =================================  ==============================================

Locust prints its ``--help`` before it imports the locustfile, so no listener of
``init_command_line_parser`` can add to it (locustio/locust#2917):
``locust -f loadtests --qsim-help`` prints the whole help, these options included.

``--pacing``: the gaps between one producer's adds of ``poisson`` and
``constant`` types; ``burst``, ``trace`` and ``profile`` types (every type
with ``scenario``) follow the scenario's drawn arrival times
(:mod:`qsim.loadtest.schedule`).

``--time-scale``: the scenario's clock compressed with its rates kept (``0.01``
plays a 24 h profile in 14.4 minutes at the profile's own rates); see
:mod:`qsim.loadtest.timescale` for exactly what is scaled and what is not.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from dataclasses import dataclass
from typing import Any

from qsim.analysis.slo.language import SLO, parse_slo
from qsim.bullmq.options import DEFAULT_PREFIX as BULLMQ_PREFIX
from qsim.engine.connection import DEFAULT_REDIS_URL
from qsim.engine.safety import CONFIRM_OPTION
from qsim.loadtest.targets import TARGETS
from qsim.loadtest.timescale import check_time_scale

__all__ = ["LoadTestConfig", "add_arguments", "HELP_OPTION", "DEFAULT_REDIS_URL", "DEFAULT_SCENARIO", "MAX_RATE_PER_PRODUCER",
           "PACINGS", "TARGETS", "split_slos"]

DEFAULT_SCENARIO = "workshop"
#: Without ``-u``, enough producer users that none adds more than this many jobs per second.
MAX_RATE_PER_PRODUCER = 20.0

#: How a producer spaces its adds of paced types (``scenario``: none is paced, all follow the drawn schedule).
PACINGS = ("constant", "poisson", "scenario")

#: Prints Locust's help once the locustfile has added the options above (``--help`` cannot: see the docstring).
HELP_OPTION = "--qsim-help"

_RUN_ID = re.compile(r"^[A-Za-z0-9_:-]{1,40}$")


def add_arguments(parser: Any) -> None:
    """Register the custom arguments on Locust's ``init_command_line_parser`` parser."""
    g = parser.add_argument_group("qsim", "qsim scenario load test (see qsim.loadtest)")
    g.add_argument("--redis-url", env_var="REDIS_URL", default=DEFAULT_REDIS_URL,
                   help=f"Redis to load (default $REDIS_URL, then {DEFAULT_REDIS_URL})")
    g.add_argument("--scenario", env_var="QSIM_SCENARIO", default=DEFAULT_SCENARIO,
                   help="scenario TOML file or built-in name (default workshop)")
    g.add_argument(CONFIRM_OPTION, dest="i_know_this_is_not_local", action="store_true", default=False,
                   env_var="QSIM_I_KNOW_THIS_IS_NOT_LOCAL",
                   help="allow a Redis that is not on this machine (e.g. staging); refused without it")
    g.add_argument("--qsim-prefix", env_var="QSIM_PREFIX", default="qsim",
                   help="key prefix of the scenario's queues (default qsim, the engine's default)")
    g.add_argument("--rate-scale", env_var="QSIM_RATE_SCALE", type=float, default=1.0,
                   help="multiply every arrival rate of the scenario (default 1)")
    g.add_argument("--time-scale", env_var="QSIM_TIME_SCALE", type=float, default=1.0,
                   help="wall-clock seconds per second of the scenario (default 1): 0.01 plays a 24 h rate profile "
                        "in 14.4 min at its own rates (the peak at the peak's rate); durations, event times, "
                        "profile times and the Summary's window are scaled, rates and service times kept")
    g.add_argument("--pacing", env_var="QSIM_PACING", choices=PACINGS, default="constant",
                   help="gaps between one producer's adds of poisson/constant types: constant (n/rate) or poisson "
                        "(exponential, mean n/rate: all producers together then form a Poisson process of the "
                        "total rate); scenario: every type at the scenario's drawn arrival times, as burst and "
                        "trace types always are")
    g.add_argument("--drain", env_var="QSIM_DRAIN", type=float, default=10.0,
                   help="seconds to keep observing completions after arrivals stop (default 10)")
    g.add_argument("--start-workers", env_var="QSIM_START_WORKERS", action="store_true", default=False,
                   help="start the scenario's worker pools as local processes (self-contained run)")
    g.add_argument("--compare-model", env_var="QSIM_COMPARE_MODEL", action="store_true", default=False,
                   help="at the end, log the model's wait/latency p50 and p95 per job type next to the measured "
                        "ones (and write <--csv prefix>_model.csv)")
    g.add_argument("--run-id", env_var="QSIM_RUN_ID", default="",
                   help="prefix of this run's job ids (default: lt-<random>)")
    g.add_argument("--target", env_var="QSIM_TARGET", choices=TARGETS, default="qsim",
                   help="the queue system the jobs go to: qsim (its engine, the default) or bullmq (BullMQ's "
                        "own format, through the bullmq Python package)")
    g.add_argument("--bullmq-prefix", env_var="QSIM_BULLMQ_PREFIX", default=BULLMQ_PREFIX,
                   help=f"BullMQ's key prefix with --target bullmq (default {BULLMQ_PREFIX})")
    g.add_argument("--slo", action="append", default=None, metavar="THRESHOLD",
                   help="judge the measured jobs at the end, e.g. 'p95_wait<=2' or 'lost==0' (repeat for "
                        "several; $QSIM_SLO: separated by ';'), per window too ('p95_wait<=2 in 95%% of windows'): "
                        "the verdict table is printed and Locust exits 1 when one is missed; distributed, the "
                        "master judges every worker's jobs")
    g.add_argument("--abort-on-fail", env_var="QSIM_ABORT_ON_FAIL", action="store_true", default=False,
                   help="with --slo: stop the test as soon as a threshold can no longer be met (one Locust "
                        "process only; distributed, the master judges --slo at the end)")
    g.add_argument(HELP_OPTION, action="help",
                   help="show Locust's help with these qsim options and exit (Locust's own --help is printed "
                        "before the locustfile is imported, so it cannot list them)")


def split_slos(values: Any) -> tuple[str, ...]:
    """``--slo`` values (a list, or ``$QSIM_SLO``'s text with ``;`` between thresholds), stripped."""
    if not values:
        return ()
    items = [values] if isinstance(values, str) else list(values)
    return tuple(part.strip() for item in items for part in str(item).split(";") if part.strip())


@dataclass(frozen=True, kw_only=True)
class LoadTestConfig:
    """What one load test does, resolved from Locust's parsed options.

    Attributes:
        redis_url: Redis to load.
        scenario: Scenario file path or built-in name.
        confirmed: Whether a non-local Redis was confirmed (:data:`qsim.engine.safety.CONFIRM_OPTION`).
        prefix: Key prefix of the queues (the scenario's queue names under it).
        rate_scale: Factor on every arrival rate.
        time_scale: Wall-clock seconds per scenario second (:mod:`qsim.loadtest.timescale`).
        pacing: ``constant`` or ``poisson`` gaps between one producer's adds.
        drain: Seconds to keep observing completions after the arrival window.
        start_workers: Start the scenario's pools as local processes.
        compare_model: Log (and write) the model's prediction next to the measurement at the end.
        run_id: Prefix of every job id this run adds; the observer reports only these jobs.
        target: ``qsim`` (the engine) or ``bullmq``.
        bullmq_prefix: BullMQ's key prefix.
        slos: ``--slo`` thresholds, as written (parsed by :meth:`thresholds`).
        abort_on_fail: Stop early once a threshold can no longer be met.
        producers: Producer users (``-u``), or None to size them from the rate.
        run_time: Arrival window in seconds (``-t``), or None for the scenario's duration.
        spawn_rate: Users started per second (``-r``), or None for all at once.
    """

    redis_url: str = DEFAULT_REDIS_URL
    scenario: str = DEFAULT_SCENARIO
    confirmed: bool = False
    prefix: str = "qsim"
    rate_scale: float = 1.0
    time_scale: float = 1.0
    pacing: str = "constant"
    drain: float = 10.0
    start_workers: bool = False
    compare_model: bool = False
    run_id: str = ""
    target: str = "qsim"
    bullmq_prefix: str = BULLMQ_PREFIX
    slos: tuple[str, ...] = ()
    abort_on_fail: bool = False
    producers: int | None = None
    run_time: float | None = None
    spawn_rate: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rate_scale, (int, float)) or not math.isfinite(self.rate_scale) or self.rate_scale <= 0:
            raise ValueError(f"--rate-scale must be a number > 0, got {self.rate_scale!r}")
        check_time_scale(self.time_scale)
        if self.pacing not in PACINGS:
            raise ValueError(f"--pacing must be one of {', '.join(PACINGS)}, got {self.pacing!r}")
        if not isinstance(self.drain, (int, float)) or not self.drain >= 0:
            raise ValueError(f"--drain must be >= 0 seconds, got {self.drain!r}")
        if self.run_id and not _RUN_ID.match(self.run_id):
            raise ValueError(f"--run-id must be 1-40 characters of letters, digits, '_:-', got {self.run_id!r}")
        if self.producers is not None and self.producers < 1:
            raise ValueError(f"-u/--users must be >= 1 (producer users), got {self.producers!r}")
        if self.run_time is not None and not self.run_time > 0:
            raise ValueError(f"-t/--run-time must be > 0 s, got {self.run_time!r}")
        if self.target not in TARGETS:
            raise ValueError(f"--target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if not self.bullmq_prefix or any(c in self.bullmq_prefix for c in " \t\r\n:"):
            raise ValueError(f"--bullmq-prefix must be a non-empty key prefix without spaces or ':', "
                             f"got {self.bullmq_prefix!r}")
        if self.target == "bullmq" and self.start_workers:
            raise ValueError("--start-workers starts qsim engine workers; with --target bullmq your BullMQ "
                             "workers take the jobs: leave it out")
        if self.abort_on_fail and not self.slos:
            raise ValueError("--abort-on-fail needs at least one --slo threshold")
        self.thresholds()  # a bad --slo is refused here, naming it

    def thresholds(self) -> list[SLO]:
        """The ``--slo`` thresholds, parsed by the project's SLO parser (:func:`qsim.analysis.slo.language.parse_slo`).

        Raises:
            ScenarioError: A threshold that does not parse (named).
        """
        return [parse_slo(text) for text in self.slos]

    @classmethod
    def from_options(cls, options: Any) -> LoadTestConfig:
        """Build from Locust's ``environment.parsed_options`` (missing attributes take defaults)."""

        def opt(name: str, default: Any = None) -> Any:
            value = getattr(options, name, None)
            return default if value is None else value

        return cls(
            redis_url=opt("redis_url", DEFAULT_REDIS_URL),
            scenario=opt("scenario", DEFAULT_SCENARIO),
            confirmed=bool(opt("i_know_this_is_not_local", False)),
            prefix=opt("qsim_prefix", "qsim"),
            rate_scale=float(opt("rate_scale", 1.0)),
            time_scale=float(opt("time_scale", 1.0)),
            pacing=opt("pacing", "constant"),
            drain=float(opt("drain", 10.0)),
            start_workers=bool(opt("start_workers", False)),
            compare_model=bool(opt("compare_model", False)),
            run_id=opt("run_id", ""),
            target=opt("target", "qsim"),
            bullmq_prefix=opt("bullmq_prefix", BULLMQ_PREFIX),
            slos=split_slos(opt("slo") or os.environ.get("QSIM_SLO")),
            abort_on_fail=bool(opt("abort_on_fail", False)),
            # qsim_producers / qsim_window: set by the master (or standalone process) at init and
            # sent to Locust workers with the other custom options, so every process paces alike
            producers=opt("qsim_producers", opt("num_users")),
            run_time=float(opt("qsim_window", opt("run_time"))) if opt("qsim_window", opt("run_time")) else None,
            spawn_rate=opt("spawn_rate"),
        )

    @staticmethod
    def new_run_id() -> str:
        """A fresh job-id prefix: ``lt-<8 hex>``."""
        return f"lt-{secrets.token_hex(4)}"

    def producer_count(self, total_rate: float) -> int:
        """Producer users: ``-u`` when given, else enough that each adds at most
        :data:`MAX_RATE_PER_PRODUCER` jobs per second."""
        if self.producers is not None:
            return int(self.producers)
        return max(1, math.ceil(total_rate / MAX_RATE_PER_PRODUCER))
