"""``qsim scenarios``: the built-in scenarios, one line each (``NAME  what it shows``)."""

from __future__ import annotations

import argparse
from typing import Any

from qsim.cli.common import EXIT_OK, print_json

__all__ = ["register", "cmd_scenarios"]


def cmd_scenarios(args: argparse.Namespace) -> int:
    """Print every built-in scenario's name and the line saying what it shows."""
    from qsim.scenarios import BUILTIN, describe

    lines = {name: describe(name) for name in BUILTIN}
    if args.json:
        print_json({"scenarios": [{"name": n, "description": d} for n, d in lines.items()]})
        return EXIT_OK
    width = max(len(n) for n in lines)
    for name, text in lines.items():
        print(f"{name:<{width}}  {text}")
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``scenarios`` to the qsim command."""
    p = sub.add_parser("scenarios", help="list the built-in scenarios, one line each",
                       description="The built-in scenarios: the workshop and the standard set (one per "
                                   "mechanism). Use a name wherever a SCENARIO is asked for: "
                                   "`qsim simulate steady`, `qsim compare sigkill-recovery --check`.")
    p.add_argument("--json", action="store_true", help='print {"scenarios": [{"name", "description"}, ...]}')
    p.set_defaults(func=cmd_scenarios)
