"""Built-in scenarios, shipped as TOML files beside this module."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from qsim.errors import ScenarioError
from qsim.scenario import Scenario

__all__ = ["BUILTIN", "builtin", "load"]

BUILTIN = ("workshop",)


def builtin(name: str) -> Scenario:
    """A built-in scenario by name (``workshop``)."""
    if name not in BUILTIN:
        raise ScenarioError(f"no built-in scenario {name!r} (built-in: {', '.join(BUILTIN)})")
    ref = resources.files(__package__).joinpath(f"{name}.toml")
    with resources.as_file(ref) as path:
        return Scenario.from_toml(path)


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
