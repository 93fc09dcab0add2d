"""What the model cannot simulate: one function refuses it, naming the key.

Every mechanism of the engine's semantics is modelled (retries and the DLQ,
timeouts, rate limits, aging, pool events, fan-out and flows, engine
overhead); only nested children are refused.
"""

from __future__ import annotations

from qsim.errors import NotSupportedError
from qsim.spec.scenario import Scenario

__all__ = ["check_supported", "scenario_label"]


def scenario_label(scenario: Scenario) -> str:
    """How messages name a scenario: its file when it came from one, else its name."""
    return str(scenario.source) if scenario.source is not None else scenario.name


def check_supported(scenario: Scenario) -> None:
    """Raise :class:`~qsim.errors.NotSupportedError` naming the first key the model cannot run.

    Every mechanism of the engine's semantics runs. What is refused: children
    with children of their own (a fan-out or flow child type that itself fans
    out or has a flow), one level only, as in the engine harness.
    """
    unsupported: list[str] = []
    for i, j in enumerate(scenario.jobs):
        kids = [j.fan_out.job] if j.fan_out is not None else []
        kids += list(j.flow.children) if j.flow is not None else []
        for kid in kids:
            child = scenario.job(kid)
            if child.fan_out is not None or child.flow is not None:
                unsupported.append(f"jobs[{i}] (child type {kid!r} has children of its own: one level only)")
    if unsupported:
        raise NotSupportedError(f"{scenario_label(scenario)}: not supported yet: {unsupported[0]}")
