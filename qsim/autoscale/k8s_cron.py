"""KEDA ``cron`` triggers read as a schedule policy's floors (for :mod:`qsim.autoscale.k8s_read`).

A cron trigger ``{timezone, start, end, desiredReplicas}`` is a floor
``{start = "HH:MM", end = "HH:MM", replicas = N}`` (:mod:`qsim.autoscale.schedule`)
when ``start`` and ``end`` are daily expressions ``M H * * *`` (a plain minute
and hour, every day of every month): the floors repeat every day of the
scenario's clock, so a weekday range, a step (``*/5``) or a list is an error
naming the field and the value. The triggers must share one ``timezone`` (an
IANA name): the scenario's clock is one zone's local time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from qsim.errors import ScenarioError
from qsim.spec.autoscaler import FloorSpec, problem

__all__ = ["cron_floors", "cron_time", "CRON_KEYS"]

#: The metadata a cron trigger holds (all required).
CRON_KEYS = ("timezone", "start", "end", "desiredReplicas")
_DAILY = re.compile(r"^\s*(\d{1,2})\s+(\d{1,2})\s+\*\s+\*\s+\*\s*$")


class Where(Protocol):
    """The object being read, for messages (:class:`qsim.autoscale.k8s_read._Where`)."""

    def error(self, path: str, problem: str) -> ScenarioError:
        """An error naming the file, the object and ``path``."""

    def unhonoured(self, path: str, why: str) -> None:
        """A field qsim cannot honour: an error, or a line of the ignored ones."""


def cron_time(where: Where, path: str, value: Any) -> str:
    """A daily cron expression ``M H * * *`` as the time of day ``HH:MM``."""
    m = _DAILY.match(value) if isinstance(value, str) else None
    if m is None or int(m.group(1)) > 59 or int(m.group(2)) > 23:
        raise where.error(path, f"is {value!r}: qsim reads daily cron expressions \"M H * * *\" (a plain minute "
                                "0-59 and hour 0-23, every day)")
    return f"{int(m.group(2)):02d}:{int(m.group(1)):02d}"


def _replicas(where: Where, path: str, value: Any) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"[+-]?\d+", text) or int(text) < 1:
        raise where.error(path, f"must be a whole number >= 1, got {value!r}")
    return int(text)


def _zone_ok(name: str) -> bool:
    """Whether ``name`` is a time zone a schedule policy takes (its own check)."""
    return problem("schedule", {"floors": (FloorSpec(start="00:00", end="01:00", replicas=1),), "timezone": name},
                   low=1, high=1) is None


def cron_floors(where: Where, path: str, triggers: Mapping[int, Any]) -> dict[str, Any]:
    """The ``floors`` and ``timezone`` keys of the cron ``triggers`` (by their index under ``path``)."""
    floors: list[dict[str, Any]] = []
    zones: list[tuple[int, str]] = []
    for i, t in triggers.items():
        at = f"{path}[{i}]"
        if not isinstance(t, Mapping):
            raise where.error(at, f"must be a mapping, got {type(t).__name__}")
        for key in t:
            if key not in ("type", "metadata", "name"):
                where.unhonoured(f"{at}.{key}", "is not a field qsim reads")
        meta = t.get("metadata")
        if not isinstance(meta, Mapping):
            raise where.error(f"{at}.metadata", f"must be a mapping, got {type(meta).__name__}")
        for key in meta:
            if key not in CRON_KEYS:
                where.unhonoured(f"{at}.metadata.{key}", "is not a field qsim reads")
        for key in CRON_KEYS:
            if not meta.get(key):
                raise where.error(f"{at}.metadata.{key}", "is required for a cron trigger")
        floor = {"start": cron_time(where, f"{at}.metadata.start", meta["start"]),
                 "end": cron_time(where, f"{at}.metadata.end", meta["end"]),
                 "replicas": _replicas(where, f"{at}.metadata.desiredReplicas", meta["desiredReplicas"])}
        if floor["start"] == floor["end"]:
            raise where.error(f"{at}.metadata.end", f"is {meta['end']!r}, the same time as start (KEDA refuses it)")
        zone = str(meta["timezone"])
        if not _zone_ok(zone):
            raise where.error(f"{at}.metadata.timezone", f"is {zone!r}, not a time zone of the IANA database")
        if zones and zone != zones[0][1]:
            raise where.error(f"{at}.metadata.timezone",
                              f"is {zone!r}, and {path}[{zones[0][0]}]'s is {zones[0][1]!r}: qsim's scenario clock "
                              "is one zone's local time (give every cron trigger one timezone)")
        floors.append(floor)
        zones.append((i, zone))
    return {"floors": floors, "timezone": zones[0][1]}
