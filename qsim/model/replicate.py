"""Replications of one scenario: the first run's result, its windows banded over all of them.

``qsim simulate --replications N`` runs the model N times with seeds ``seed,
seed + 1, ..., seed + N - 1`` (as ``qsim plan`` numbers its replications) and
returns the *first* replication's result, so its Summary is the one ``qsim
simulate`` prints without the flag, with each window's ``bands``: the 5-95%
range over the N replications of ``wait_p95`` and ``mean_wait``
(:func:`qsim.results.windows.with_bands`). Replications after the first run
without records (their windows only).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from qsim.model.autoscaling import Recommenders
from qsim.model.run import simulate
from qsim.model.result import ModelResult
from qsim.results.windows import with_bands
from qsim.spec.scenario import Scenario

__all__ = ["simulate_replications"]


def simulate_replications(scenario: Scenario | str | os.PathLike[str], replications: int, *, seed: int | None = None,
                          max_jobs: int | None = None, progress: Callable[[float], None] | None = None,
                          records: bool = True, recommend: Recommenders | None = None) -> ModelResult:
    """The first of ``replications`` model runs, its Summary's windows with ``bands`` over all of them.

    Args:
        scenario, seed, max_jobs, records, recommend: as for :func:`qsim.model.simulate` (``records``
            applies to the first replication; the others keep none).
        replications: how many runs (>= 2: a band needs several).
        progress: called with the fraction (0..1) of all the replications' jobs settled.

    Raises:
        ValueError: ``replications`` is not an integer >= 2.
    """
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 2:
        raise ValueError(f"replications must be an integer >= 2, got {replications!r}")
    if not isinstance(scenario, Scenario):
        from qsim.scenarios import load

        scenario = load(os.fspath(scenario))
    first_seed = scenario.seed if seed is None else seed
    seeds = [first_seed + r for r in range(replications)]  # replication r: seed + r, as qsim plan's

    def part(r: int) -> Callable[[float], None] | None:
        return None if progress is None else (lambda f: progress((r + f) / replications))

    first = simulate(scenario, seed=seeds[0], max_jobs=max_jobs, progress=part(0), records=records,
                     recommend=recommend)
    runs = [first.summary.get("windows") or []]
    for r, s in enumerate(seeds[1:], start=1):
        runs.append(simulate(scenario, seed=s, max_jobs=max_jobs, progress=part(r), records=False,
                             recommend=recommend).summary.get("windows") or [])
    summary = first.summary.copy()
    summary["windows"] = with_bands(runs[0], runs)
    return dataclasses.replace(first, summary=summary)
