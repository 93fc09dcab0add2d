"""Measured arrival times replayed instead of drawn: ``qsim simulate --arrivals trace FILE``.

FILE holds one row per measured job, with its job type and enqueue time:

- a CSV with a header and the columns ``type`` and ``enqueued`` (seconds, on
  any one clock: the ``jobs.csv`` that ``qsim simulate --out`` and ``qsim run
  --out`` write, and ``qsim calibrate --from csv`` reads; other columns are
  ignored), or
- a JSON list of objects with the keys ``type`` and ``enqueued``.

Rows with a non-empty ``parent`` (flow and fan-out children, which the run
adds itself) are left out. Times are seconds of the run when they all fall
in ``[0, duration)`` (a ``jobs.csv`` of qsim's replays exactly); otherwise
(Unix times, say) they are taken from the first arrival in the file. Each job
type of the
scenario then replays its own times as a ``trace`` arrival
(:class:`qsim.spec.dists.TraceArrivals`), and times at or after the
scenario's ``duration`` are not played. Every seed replays the same arrivals:
replications (``--replications``) then differ only by what the model still
draws (service times, failures), which is what a band around a replayed day
should show.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from qsim.errors import ScenarioError
from qsim.spec.dists import TraceArrivals
from qsim.spec.scenario import Scenario

__all__ = ["read_arrival_trace", "replay_arrivals"]


def _rows(path: Path) -> Iterable[Mapping[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ScenarioError(f"--arrivals trace {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"--arrivals trace {path}: cannot be read: {e}") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ScenarioError(f"--arrivals trace {path}: not valid JSON: {e}") from None
        if not isinstance(data, list) or not all(isinstance(r, Mapping) for r in data):
            raise ScenarioError(f"--arrivals trace {path}: must be a JSON list of objects with the keys type and "
                                f"enqueued")
        return data
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in ("type", "enqueued") if c not in (reader.fieldnames or ())]
    if missing:
        raise ScenarioError(f"--arrivals trace {path}: a CSV with a header and the columns type and enqueued; "
                            f"missing {', '.join(missing)}")
    return list(reader)


def read_arrival_trace(path: str | Path, *, duration: float | None = None) -> dict[str, list[float]]:
    """Per job type, its measured arrival times in ``path``, sorted: as they are when every one is in
    ``[0, duration)``, else (or with no ``duration``) in seconds from the first arrival.

    Raises:
        ScenarioError: the file is missing, not CSV/JSON of that shape, a time is not a finite number
            (its row is named), or it holds no arrival.
    """
    path = Path(path)
    raw: dict[str, list[float]] = {}
    for i, row in enumerate(_rows(path)):
        if str(row.get("parent") or "").strip():
            continue  # a child: the run adds it
        where = f"--arrivals trace {path}: {'line' if path.suffix.lower() != '.json' else 'item'} " \
                f"{i + 2 if path.suffix.lower() != '.json' else i}"
        name = str(row.get("type") or "").strip()
        if not name:
            raise ScenarioError(f"{where}: type is empty")
        try:
            t = float(row.get("enqueued"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            t = math.nan
        if not math.isfinite(t):
            raise ScenarioError(f"{where}: enqueued must be a number of seconds, got {row.get('enqueued')!r}")
        raw.setdefault(name, []).append(t)
    if not raw:
        raise ScenarioError(f"--arrivals trace {path}: no arrivals in it")
    t0 = min(min(v) for v in raw.values())
    if duration is not None and t0 >= 0 and max(max(v) for v in raw.values()) < duration:
        t0 = 0.0  # already the run's own clock
    return {name: sorted(t - t0 for t in times) for name, times in raw.items()}


def replay_arrivals(scenario: Scenario, path: str | Path) -> Scenario:
    """``scenario`` with each job type's arrivals replaced by its times in ``path`` (see the module docstring).

    Raises:
        ScenarioError: as :func:`read_arrival_trace`; or the file names a job type the scenario does not
            have, or leaves out one that arrives in it (both named).
    """
    path = Path(path)
    trace = read_arrival_trace(path, duration=scenario.duration)
    names = {j.name for j in scenario.jobs}
    unknown = sorted(set(trace) - names)
    if unknown:
        raise ScenarioError(f"--arrivals trace {path}: job type(s) {', '.join(unknown)} not in scenario "
                            f"{scenario.name} (its types: {', '.join(sorted(names))})")
    missing = sorted(j.name for j in scenario.jobs if j.arrival is not None and j.name not in trace)
    if missing:
        raise ScenarioError(f"--arrivals trace {path}: no arrivals of job type(s) {', '.join(missing)}, which "
                            f"arrive in scenario {scenario.name}")
    jobs = tuple(dataclasses.replace(j, arrival=TraceArrivals(path=path, at=tuple(trace[j.name])))
                 if j.name in trace else j for j in scenario.jobs)
    return dataclasses.replace(scenario, jobs=jobs)
