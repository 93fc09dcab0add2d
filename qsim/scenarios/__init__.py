"""Built-in scenarios, shipped as TOML files beside this module.

``workshop`` is the seed's story (the default of ``qsim simulate``). The others
are the **standard set**: one small scenario per mechanism, each runnable on
the engine in well under two minutes and saying in its comments what it
demonstrates; ``benchmarks/fidelity.py`` runs them all on the model and the
engine, and ``qsim compare NAME --check`` holds the engine to the model on one.
``qsim scenarios`` lists them, one line each, from their ``description`` key.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario

__all__ = ["BUILTIN", "STANDARD", "builtin", "load", "describe"]

#: The standard scenario set, in the order ``qsim scenarios`` lists it (after ``workshop``).
STANDARD = (
    "steady",
    "priority-starvation",
    "wrr",
    "concurrency-limit",
    "keyed-rate-limit",
    "poison-dlq",
    "timeouts",
    "sigterm-grace",
    "sigkill-recovery",
    "flows-fanout",
    "bursty",
    "scale-up",
    "mixed-lengths",
)
BUILTIN = ("workshop", *STANDARD)


def builtin(name: str) -> Scenario:
    """A built-in scenario by name (``workshop``, or one of :data:`STANDARD`)."""
    if name not in BUILTIN:
        raise ScenarioError(f"no built-in scenario {name!r} (built-in: {', '.join(BUILTIN)})")
    ref = resources.files(__package__).joinpath(f"{name}.toml")
    with resources.as_file(ref) as path:
        return Scenario.from_toml(path)


def describe(name: str) -> str:
    """One line saying what a built-in scenario shows: its ``description``, else its first comment line."""
    scenario = builtin(name)
    if scenario.description:
        return scenario.description.splitlines()[0].strip()
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("#") and line.lstrip("#").strip():
            return line.lstrip("#").strip()
    return ""


def load(spec: str | Path | None) -> Scenario:
    """A scenario from a file path, or a built-in by name; None means ``workshop``."""
    if spec is None:
        return builtin("workshop")
    path = Path(spec)
    if not path.exists() and str(spec) in BUILTIN:
        return builtin(str(spec))
    if not path.exists():
        raise ScenarioError(f"{spec}: no such scenario file (built-in scenarios: {', '.join(BUILTIN)})")
    return Scenario.from_toml(path)
