"""Observed worker pools: how many workers ran at once and how many jobs each ran at once.

Every run (an attempt, or a job's last attempt where attempts are not
recorded) is an interval ``[start, end)`` on a worker. Workers that served
the same set of queues form one pool; its ``workers`` is the largest number
of them alive at once (a worker is alive from its first start to its last
end) and its ``concurrency`` the largest number of runs one worker had at
once. Both are observed maxima: a pool that was never saturated may be
configured larger than it looked. Without worker ids (BullMQ without a
worker ``name``, a CSV without a ``worker`` column) all runs form one pool of
one worker whose concurrency is the largest number of runs at once.

Two runs count as at once only when they overlap by a round trip
(:data:`ROUND_TRIP`) or more (or by half the run that ends first, so short
runs at once still count). A run's recorded end is when its result reached
Redis, and the run that took its slot may be recorded as started up to a round
trip before that: qsim's engine records a job fetched ahead as started when its
worker started it (its fetch's time plus its wait in the worker), BullMQ takes
its times from the workers' clocks. Counted at every instant, such a hand-over
showed one slot (or worker) too many now and then.

A pool's name is the common stem of its worker ids (``craftsmen-0``,
``craftsmen-1`` -> ``craftsmen``), else ``workers``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["PoolFit", "fit_pools", "max_overlap", "runs_of", "busy_spans", "ROUND_TRIP"]

_STEM = re.compile(r"[-_:.]?\d+$")
#: Runs that overlap by less than this (seconds: a round trip to Redis on a busy machine) are not at once.
ROUND_TRIP = 0.01


@dataclass(frozen=True)
class PoolFit:
    """One observed pool."""

    name: str
    queues: tuple[str, ...]
    workers: int
    concurrency: int
    worker_ids: int
    runs: int
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The pool for the JSON report."""
        return {"name": self.name, "queues": list(self.queues), "workers": self.workers,
                "concurrency": self.concurrency, "worker_ids": self.worker_ids, "runs": self.runs,
                **({"note": self.note} if self.note else {})}


def max_overlap(start: np.ndarray, end: np.ndarray, *, ignore: float = 0.0) -> int:
    """The largest number of intervals ``[start, end)`` open at once (an end before a start at a tie).

    With ``ignore`` > 0, an interval overlaps the ones that start before it ends only when the overlap lasts
    ``ignore`` s or more, or half its own length (so short intervals at once still count): it is counted
    as ending that much earlier.
    """
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    if start.size == 0:
        return 0
    if ignore > 0:
        end = end - np.clip((end - start) / 2, 0.0, ignore)
    t = np.concatenate([end, start])
    d = np.concatenate([-np.ones(end.size), np.ones(start.size)])
    order = np.lexsort((d, t))
    return int(np.cumsum(d[order]).max())


def runs_of(jobs: pd.DataFrame, attempts: pd.DataFrame) -> pd.DataFrame:
    """Every run as (worker, queue, start, end): the attempts where recorded, else each job's last attempt."""
    if len(attempts):
        queue_of = dict(zip(jobs["job_id"], jobs["queue"]))
        a = attempts[np.isfinite(attempts["start"].to_numpy(float)) & np.isfinite(attempts["end"].to_numpy(float))]
        return pd.DataFrame({"worker": a["worker"].to_numpy(), "queue": a["job_id"].map(queue_of).to_numpy(),
                             "start": a["start"].to_numpy(float), "end": a["end"].to_numpy(float)}).dropna()
    start = jobs["last_start"].to_numpy(float).copy()
    single = ~np.isfinite(start) & (jobs["attempts"].to_numpy() <= 1)
    start[single] = jobs["started"].to_numpy(float)[single]
    end = jobs["finished"].to_numpy(float)
    ok = np.isfinite(start) & np.isfinite(end) & (end >= start)
    return pd.DataFrame({"worker": jobs["worker"].to_numpy()[ok], "queue": jobs["queue"].to_numpy()[ok],
                         "start": start[ok], "end": end[ok]})


def busy_spans(jobs: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` plus, for jobs whose runs are not all known, their whole span from first start to finish.

    Over-counts busy slots (a retried job's backoff counts as busy): right
    for deciding when a slot was surely free, wrong for concurrency maxima.
    """
    if len(runs) and not (jobs["attempts"].to_numpy() > 1).any():
        return runs
    multi = jobs[(jobs["attempts"].to_numpy() > 1) & np.isfinite(jobs["started"].to_numpy(float))]
    end = multi["finished"].to_numpy(float)
    end = np.where(np.isfinite(end), end, np.inf)
    extra = pd.DataFrame({"worker": multi["worker"].to_numpy(), "queue": multi["queue"].to_numpy(),
                          "start": multi["started"].to_numpy(float), "end": end})
    return pd.concat([runs, extra], ignore_index=True) if len(runs) else extra


def _name(ids: list[str], taken: set[str]) -> str:
    stems = {_STEM.sub("", w) for w in ids}
    name = (stems.pop() if len(stems) == 1 else "") or "workers"
    base, i = name, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    taken.add(name)
    return name


def fit_pools(runs: pd.DataFrame, queues: list[str], *, round_trip: float = ROUND_TRIP) -> list[PoolFit]:
    """The pools seen in ``runs`` (see :func:`runs_of`); every queue in ``queues`` is served by one.

    Runs (and workers' spans) that overlap by less than ``round_trip`` s are not counted as at once.
    """
    pools: list[PoolFit] = []
    taken: set[str] = set()
    known = runs[runs["worker"] != ""]
    served: set[str] = set()
    if len(known):
        queues_of: dict[str, tuple[str, ...]] = {str(w): tuple(sorted(set(g)))
                                                 for w, g in known.groupby("worker", sort=True)["queue"]}
        groups: dict[tuple[str, ...], list[str]] = {}
        for w, qs in queues_of.items():
            groups.setdefault(qs, []).append(w)
        for qset, wids in sorted(groups.items()):
            mine = known[known["worker"].isin(wids)]
            spans = mine.groupby("worker").agg(first=("start", "min"), last=("end", "max"))
            workers = max(1, max_overlap(spans["first"].to_numpy(), spans["last"].to_numpy(), ignore=round_trip))
            conc = max(max_overlap(g["start"].to_numpy(), g["end"].to_numpy(), ignore=round_trip)
                       for _, g in mine.groupby("worker"))
            pools.append(PoolFit(name=_name(wids, taken), queues=qset, workers=workers,
                                 concurrency=max(1, conc), worker_ids=len(wids), runs=len(mine)))
            served.update(qset)
    rest = [q for q in queues if q not in served]
    if rest:
        anon = runs[(runs["worker"] == "") & runs["queue"].isin(rest)]
        conc = max(1, max_overlap(anon["start"].to_numpy(), anon["end"].to_numpy(), ignore=round_trip))
        note = ("no worker ids recorded: one worker whose concurrency is the most jobs seen running at once"
                if len(anon) else "no runs seen for these queues: one worker, concurrency 1")
        pools.append(PoolFit(name=_name(["workers"], taken), queues=tuple(rest), workers=1, concurrency=conc,
                             worker_ids=0, runs=len(anon), note=note))
    return pools
