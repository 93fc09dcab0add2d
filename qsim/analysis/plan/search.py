"""Searching a grid instead of sweeping it, and ranking the points that meet the SLOs.

When a metric is monotone in a varied value — waits fall as workers,
concurrency or a concurrency limit grow, and rise with an arrival rate or a
mean service time — whether a point meets the SLOs changes at most once along
that value. :func:`bisect` then finds, on every *line* of the grid (the
points that differ only in that value, the *axis*), where it changes: both
ends first, then bisection between them, so a line of 512 values takes about
11 points instead of 512. Every point of the line gets a verdict, simulated or
inferred. The lines of one round run together (one batch per round), so a
process pool or a Dask cluster stays busy.

:func:`rank` orders the points that meet (by cost, then in grid order), and
:func:`confirm` simulates the inferred ones among the first few, so a
recommendation is always a point that was run and met the SLOs; a point that
was inferred to meet but did not (the metric was not monotone after all) is
dropped and the next one taken.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["MONOTONE_FIELDS", "MIN_LINE", "Key", "point_key", "choose_axis", "bisect", "rank", "confirm",
           "recommend", "search_range", "MAX_UTILIZATION", "LOW_UTILIZATION"]

logger = logging.getLogger(__name__)

#: The search range's bottom: the least worker count at which the pool is at most this busy.
MAX_UTILIZATION = 0.95
#: The search range's top: a worker count at which the pool is at most this busy.
LOW_UTILIZATION = 0.3

#: Fields that the SLO metrics are monotone in (in one direction or the other), so a line along them is searched.
MONOTONE_FIELDS = frozenset({"workers", "concurrency", "concurrency_limit", "rate", "mean", "max", "per"})
#: Lines shorter than this are swept: bisection saves nothing there.
MIN_LINE = 5

Params = dict[str, Any]
Key = tuple[Any, ...]
Evaluate = Callable[[list[Params]], list[bool]]


def point_key(params: Mapping[str, Any], paths: Sequence[str]) -> Key:
    """The point's values in the order of ``paths``: its identity and its grid order."""
    return tuple(params[p] for p in paths)


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def choose_axis(vary: Mapping[str, Sequence[Any]]) -> str | None:
    """The varied path to bisect along: a monotone field with numeric values, the one with the most
    values (the last given on a tie); None when no path qualifies (then the grid is swept)."""
    best: str | None = None
    for path, values in vary.items():
        if path.rsplit(".", 1)[-1] not in MONOTONE_FIELDS or not _numeric(values) or len(set(values)) < MIN_LINE:
            continue
        if best is None or len(set(values)) >= len(set(vary[best])):
            best = path
    return best


def bisect(vary: Mapping[str, Sequence[Any]], axis: str, evaluate: Evaluate) -> tuple[dict[Key, bool], set[Key]]:
    """A verdict for every grid point, found by bisection along ``axis`` on every line.

    ``evaluate(points)`` returns whether each point meets the SLOs. Returns the
    verdicts by :func:`point_key` (in the order of ``vary``'s paths) and the keys
    that were evaluated (the rest are inferred).
    """
    paths = list(vary)
    values = sorted(set(vary[axis]))
    others = [p for p in paths if p != axis]
    lines = [dict(zip(others, combo)) for combo in itertools.product(*(vary[p] for p in others))]

    def at(line: Params, i: int) -> Params:
        point = dict(line)
        point[axis] = values[i]
        return {p: point[p] for p in paths}

    known: dict[Key, bool] = {}
    evaluated: set[Key] = set()

    def run(points: list[Params]) -> None:
        todo = [p for p in points if point_key(p, paths) not in known]
        if not todo:
            return
        for p, verdict in zip(todo, evaluate(todo)):
            known[point_key(p, paths)] = verdict
            evaluated.add(point_key(p, paths))

    last = len(values) - 1
    run([at(line, i) for line in lines for i in sorted({0, last})])
    # each open line: [lo, hi] with verdict(lo) != verdict(hi); narrow until adjacent
    bounds = {k: (0, last) for k, line in enumerate(lines)
              if known[point_key(at(line, 0), paths)] != known[point_key(at(line, last), paths)]}
    while any(hi - lo > 1 for lo, hi in bounds.values()):
        probes = {k: (lo + hi) // 2 for k, (lo, hi) in bounds.items() if hi - lo > 1}
        run([at(lines[k], mid) for k, mid in probes.items()])
        for k, mid in probes.items():
            lo, hi = bounds[k]
            same_as_lo = known[point_key(at(lines[k], mid), paths)] == known[point_key(at(lines[k], lo), paths)]
            bounds[k] = (mid, hi) if same_as_lo else (lo, mid)
    verdicts: dict[Key, bool] = {}
    for k, line in enumerate(lines):
        low_verdict = known[point_key(at(line, 0), paths)]
        high_verdict = known[point_key(at(line, last), paths)]
        change = bounds[k][1] if k in bounds else len(values)
        for i in range(len(values)):
            verdicts[point_key(at(line, i), paths)] = low_verdict if i < change else high_verdict
    verdicts.update(known)
    logger.info("bisection along %s: %d of %d points simulated", axis, len(evaluated), len(verdicts))
    return verdicts, evaluated


def _order(value: Any) -> tuple[int, float, str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def rank(points: Sequence[Params], paths: Sequence[str], cost: Callable[[Params], float] | None = None) -> list[Params]:
    """``points`` cheapest first (without ``cost``: in ascending grid order, the first path slowest)."""
    def order(p: Params) -> tuple[Any, ...]:
        grid_order = tuple(_order(p[k]) for k in paths)
        return (cost(p), grid_order) if cost is not None else (grid_order,)

    return sorted(points, key=order)


def confirm(candidates: Sequence[Params], paths: Sequence[str], known: Mapping[Key, bool], evaluate: Evaluate,
            want: int) -> tuple[list[Params], dict[Key, bool]]:
    """The first ``want`` of ``candidates`` (best first) that are simulated and meet the SLOs.

    ``known`` holds the verdicts of points already simulated; the others among
    the next ``want`` are simulated in one batch. Returns the confirmed points
    and the verdicts found on the way.
    """
    found: dict[Key, bool] = {}
    confirmed: list[Params] = []
    queue = list(candidates)
    while queue and len(confirmed) < want:
        head, queue = queue[:want - len(confirmed)], queue[want - len(confirmed):]
        unknown = [p for p in head if point_key(p, paths) not in known and point_key(p, paths) not in found]
        if unknown:
            for p, verdict in zip(unknown, evaluate(unknown)):
                found[point_key(p, paths)] = verdict
                if not verdict:
                    logger.warning("inferred to meet the SLOs but did not: %s (not monotone along the axis?)", p)
        for p in head:
            k = point_key(p, paths)
            if found.get(k, known.get(k)):
                confirmed.append(p)
    return confirmed, found


def recommend(vary: Mapping[str, Sequence[Any]], evaluate: Evaluate, *, axis: str | None = None,
              cost: Callable[[Params], float] | None = None, want: int = 1) -> tuple[list[Params], dict[Key, bool]]:
    """The best ``want`` points of the grid that meet the SLOs, best first, and every verdict found.

    With ``axis`` None every point is evaluated (one batch); else :func:`bisect`
    along ``axis`` and the inferred best ones are confirmed (:func:`confirm`).
    The verdicts returned are those of the evaluated points (keys as :func:`point_key`).
    """
    paths = list(vary)
    points = [dict(zip(paths, combo)) for combo in itertools.product(*(vary[p] for p in paths))]
    if axis is None:
        verdicts = dict(zip((point_key(p, paths) for p in points), evaluate(points)))
        evaluated = dict(verdicts)
    else:
        verdicts, keys = bisect(vary, axis, evaluate)
        evaluated = {k: verdicts[k] for k in keys}
    candidates = rank([p for p in points if verdicts[point_key(p, paths)]], paths, cost)
    best, found = confirm(candidates, paths, evaluated, evaluate, want)
    evaluated.update(found)
    return best, evaluated


def search_range(load: float, concurrency: int, current: int, *, max_workers: int,
                 cap: int | None = None) -> tuple[int, int]:
    """``(lo, hi)``: the worker counts worth simulating for ``load`` busy slots at ``concurrency``.

    From the least count at most :data:`MAX_UTILIZATION` busy up to one at most :data:`LOW_UTILIZATION` busy
    (at least ``lo + 7`` and twice ``current``), capped at ``cap`` (a concurrency limit's workers) and
    ``max_workers``; ``lo`` may exceed ``max_workers`` (:mod:`qsim.advise.capacity` says why).
    """
    lo = max(1, math.ceil(load / (concurrency * MAX_UTILIZATION) - 1e-9))
    hi = max(lo + 7, math.ceil(load / (concurrency * LOW_UTILIZATION)), 2 * current)
    if cap is not None:
        hi = min(hi, max(cap, lo))
    return lo, min(hi, max_workers)
