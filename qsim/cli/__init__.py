"""The ``qsim`` command: one module per group of subcommands, each with ``register(subparsers)``.

========================  =====================================================
module                    subcommands
========================  =====================================================
:mod:`qsim.cli.simulate`  ``simulate`` (the model), ``theory`` (closed forms)
:mod:`qsim.cli.scenarios` ``scenarios`` (the built-in scenarios, one line each)
:mod:`qsim.cli.plan`      ``plan`` (sweep the model against SLOs)
:mod:`qsim.cli.autoscale` ``autoscale`` (autoscaling policies against an SLO; tune; emit)
:mod:`qsim.cli.run`       ``run`` (the engine), ``compare`` (model beside engine; ``--check``)
:mod:`qsim.cli.calibrate` ``calibrate`` (a scenario from measured jobs; the overhead probe)
:mod:`qsim.cli.advise`    ``advise`` (live capacity advice for a running queue)
:mod:`qsim.cli.worker`    ``worker``, ``stats``, ``dlq``
========================  =====================================================

Exit codes, argparse types, the default Redis URL and JSON output live in
:mod:`qsim.cli.common`; tables and ``--out`` files in :mod:`qsim.cli.output`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from qsim.cli import advise, autoscale, calibrate, plan, run, scenarios, simulate, worker
from qsim.cli.common import EXIT_FAILURE, err, exit_code
from qsim.errors import QsimError

__all__ = ["main", "build_parser"]

#: Subcommand groups, in the order ``qsim --help`` lists them.
COMMANDS = (simulate, scenarios, plan, autoscale, run, calibrate, advise, worker)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``qsim`` command."""
    parser = argparse.ArgumentParser(
        prog="qsim", description="Plan and load-test Redis-backed job queues.",
        epilog="Exit codes: 0 success, 2 bad input (a scenario, an argument, an output path, a Redis URL that is "
               "malformed or cannot be reached), 1 other failure.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMANDS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qsim`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except QsimError as e:  # the exit code of each error: qsim.cli.common.exit_code
        err(args.command, str(e))
        return exit_code(e)
    except KeyboardInterrupt as e:
        err(args.command, "interrupted")
        return exit_code(e)
    except BrokenPipeError:  # stdout closed early (| head): not an error worth a traceback
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
