"""Write tests/golden/*.json from the current code: `python tests/golden/regenerate.py` from the repository root.

Each golden is the exact stdout of one `qsim ... --json` command (CASES below), with the wall-clock figures
(how long the command took) masked, so that tests/unit/test_golden.py can hold a refactor to byte-identical
outputs. Regenerate only when an output is meant to change, and say why in the commit.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent
SLO = "p95_wait<=2 in 90% of windows"

#: The built-in scenarios (`qsim scenarios`): their Summary from the model.
SCENARIOS = ["workshop", "steady", "priority-starvation", "wrr", "concurrency-limit", "keyed-rate-limit",
             "poison-dlq", "timeouts", "sigterm-grace", "sigkill-recovery", "flows-fanout", "bursty", "scale-up",
             "mixed-lengths"]

#: golden file stem -> the qsim arguments (paths relative to the repository root).
CASES: dict[str, list[str]] = {
    **{f"simulate-{name}": ["simulate", name, "--json"] for name in SCENARIOS},
    "autoscale-day": ["autoscale", "tests/golden/day.toml", "--slo", SLO, "--policy", "hpa", "--policy", "step",
                      "--policy", "target-tracking", "--replications", "1", "--processes", "1", "--json"],
    "plan-workshop": ["plan", "workshop", "--slo", "p95_wait<=1", "--vary", "pools.craftsmen.workers=1:3",
                      "--processes", "1", "--json"],
    "calibrate-csv": ["calibrate", "--from", "csv", "tests/golden/jobs.csv", "--json"],
    # the closed forms: Allen-Cunneen (lognormal service) and Cobham (two priority classes)
    "theory-steady": ["theory", "steady", "--json"],
    "theory-priority-starvation": ["theory", "priority-starvation", "--json"],
}

#: Wall-clock figures (how long the command ran): the whole line is masked. autoscale's top-level "seconds",
#: plan's "search": {"seconds"}; every other "seconds" (worker_seconds, a fit's seconds) is a result.
_WALL_CLOCK = {"autoscale": re.compile(r'^  "seconds": [0-9.e+-]+,?$', re.M),
               "plan": re.compile(r'^    "seconds": [0-9.e+-]+,?$', re.M)}


def output(args: list[str]) -> str:
    """The stdout of `qsim ARGS` run in this process from the repository root, wall-clock figures masked."""
    import os

    from qsim.cli import main

    out = io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(list(args))
    finally:
        os.chdir(here)
    if code != 0:
        raise RuntimeError(f"qsim {' '.join(args)} exited {code}")
    text = out.getvalue()
    mask = _WALL_CLOCK.get(args[0])
    return mask.sub(lambda m: m.group(0).split(":")[0] + ": 0" + ("," if m.group(0).endswith(",") else ""),
                    text) if mask else text


def main(names: list[str]) -> None:
    for name in names or list(CASES):
        (GOLDEN / f"{name}.json").write_text(output(CASES[name]))
        print(f"wrote tests/golden/{name}.json", file=sys.stderr)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1:])
