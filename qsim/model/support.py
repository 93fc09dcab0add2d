"""What the model can simulate today: one function refuses the rest.

Each later mechanism (retries and the DLQ, timeouts, rate limits, aging,
pool events, fan-out and flows, engine overhead) deletes its lines here when
its module lands, so this file is the model's to-do list.
"""

from __future__ import annotations

from qsim.errors import NotSupportedError
from qsim.scenario import Scenario

__all__ = ["check_supported", "scenario_label"]


def scenario_label(scenario: Scenario) -> str:
    """How messages name a scenario: its file when it came from one, else its name."""
    return str(scenario.source) if scenario.source is not None else scenario.name


def check_supported(scenario: Scenario) -> None:
    """Raise :class:`~qsim.errors.NotSupportedError` naming the first key the model cannot run yet.

    ``attempts > 1`` is accepted: without failures every job succeeds on its
    first attempt, so extra attempts change nothing.
    """
    unsupported: list[str] = []
    for i, j in enumerate(scenario.jobs):
        if j.fail_prob > 0:
            unsupported.append(f"jobs[{i}].fail_prob")
        if j.poison_prob > 0:
            unsupported.append(f"jobs[{i}].poison_prob")
        if j.timeout > 0:
            unsupported.append(f"jobs[{i}].timeout")
        if j.fan_out is not None:
            unsupported.append(f"jobs[{i}].fan_out")
        if j.flow is not None:
            unsupported.append(f"jobs[{i}].flow")
    for i, q in enumerate(scenario.queues):
        if q.rate_limit is not None:
            unsupported.append(f"queues[{i}].rate_limit")
        if q.aging > 0:
            unsupported.append(f"queues[{i}].aging")
    for i, _ in enumerate(scenario.events):
        unsupported.append(f"events[{i}]")
    if scenario.engine.fetch_overhead > 0:
        unsupported.append("engine.fetch_overhead")
    if unsupported:
        raise NotSupportedError(f"{scenario_label(scenario)}: not supported yet: {unsupported[0]}")
