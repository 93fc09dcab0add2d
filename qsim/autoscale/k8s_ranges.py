"""The Kubernetes and KEDA API's ranges for what an autoscaler object holds, checked on a Scenario's table.

The API server rejects an HPA ``behavior`` whose ``stabilizationWindowSeconds``
is outside 0..3600 or a scaling policy whose ``periodSeconds`` is outside
1..1800, and every one of these is a whole number of seconds, as are KEDA's
``pollingInterval`` (>= 1), ``cooldownPeriod`` and ``initialCooldownPeriod``
(>= 0); a ``behavior`` tolerance is >= 0. A policy emitted
with other values would either be refused or be rounded into something that
was not simulated: :func:`check_api_ranges` names the key and the range
first. :mod:`qsim.autoscale.k8s_read` checks the same ranges on the objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qsim.errors import ScenarioError
from qsim.spec.autoscaler import HPA_LIKE

__all__ = ["STABILIZATION", "PERIOD", "check_api_ranges"]

#: ``behavior.scale{Up,Down}.stabilizationWindowSeconds``: whole seconds in this range.
STABILIZATION = (0, 3600)
#: ``behavior.scale{Up,Down}.policies[].periodSeconds``: whole seconds in this range.
PERIOD = (1, 1800)


def _whole(key: str, value: Any, low: int, high: int | None, field: str) -> None:
    x = float(value)
    allowed = f"{low}..{high}" if high is not None else f">= {low}"
    if not x.is_integer() or x < low or (high is not None and x > high):
        raise ScenarioError(f"{key} must be whole seconds in {allowed} (the Kubernetes/KEDA API's range for "
                            f"{field}), got {value:g}")


def check_api_ranges(kind: str, table: Mapping[str, Any]) -> None:
    """Raise when the autoscaler ``table`` (TOML keys, defaults filled in) holds a value that its
    ``kind`` (keda | hpa) object cannot carry as simulated.

    Raises:
        ScenarioError: naming the key, the allowed range and the value.
    """
    at = f"autoscalers.{table.get('pool', '?')}."
    if table.get("policy") in HPA_LIKE:
        for way in ("up", "down"):
            _whole(f"{at}scale_{way}_stabilization", table[f"scale_{way}_stabilization"], *STABILIZATION,
                   "stabilizationWindowSeconds")
            for i, rule in enumerate(table[f"scale_{way}"]):
                _whole(f"{at}scale_{way}[{i}].period", rule["period"], *PERIOD, "periodSeconds")
            tol = table.get(f"scale_{way}_tolerance")
            if tol is not None and not tol >= 0:
                raise ScenarioError(f"{at}scale_{way}_tolerance must be >= 0 (the Kubernetes API's range for "
                                    f"behavior tolerance), got {tol:g}")
    elif table.get("policy") == "target-tracking":
        _whole(f"{at}scale_in_cooldown", table["scale_in_cooldown"], *STABILIZATION, "stabilizationWindowSeconds")
    if kind == "keda" and table.get("min") == 0 and table.get("keda") is False:
        raise ScenarioError(f"{at}keda is false with min = 0: a plain HPA scaling to zero, which a ScaledObject "
                            "cannot express (KEDA scales 0 <-> 1 itself); emit hpa, or set keda = true")
    if kind == "keda":
        _whole(f"{at}poll", table["poll"], 1, None, "pollingInterval")
        if "cooldown" in table:
            _whole(f"{at}cooldown", table["cooldown"], 0, None, "cooldownPeriod")
        if "initial_cooldown" in table:
            _whole(f"{at}initial_cooldown", table["initial_cooldown"], 0, None, "initialCooldownPeriod")
