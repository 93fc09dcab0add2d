"""The qsim policy's recommendation: qsim advise's plan for a measured load (qsim/advise/load.py)."""

from __future__ import annotations

import pickle

from qsim.advise.load import LoadAdvisor
from qsim.analysis.theory import mmc_wait_quantile
from qsim.autoscale import Observation


def obs(rate: float | None, mean: float | None = 0.5, cv: float = 1.0) -> Observation:
    return Observation(now=0.0, workers=1, ready=1, arrival_rate=rate, mean_service=mean, service_cv=cv)


def test_the_recommendation_meets_the_slo_like_erlang_c() -> None:
    # Given an advisor for p95 wait <= 2 s on workers of concurrency 1
    advisor = LoadAdvisor("p95_wait<=2", concurrency=1)
    # When it sees 20 jobs/s of exponential 0.5 s jobs
    n = advisor(obs(20.0))
    # Then it recommends the M/M/c answer, within one worker (the plan's intervals are conservative)
    c = next(c for c in range(1, 100) if mmc_wait_quantile(0.95, c, 20.0, 2.0) <= 2.0)
    assert n is not None and c <= n <= c + 1


def test_nothing_measured_gives_no_recommendation_and_answers_are_remembered() -> None:
    advisor = LoadAdvisor("p95_wait<=2", concurrency=2)
    assert advisor(obs(None)) is None and advisor(obs(5.0, None)) is None
    assert advisor(obs(0.0)) == 1
    first = advisor(obs(8.0))
    assert advisor(obs(8.1)) == first and len(advisor.memo) == 1   # 8.1 rounds to the same grid point
    assert pickle.loads(pickle.dumps(advisor)).memo == advisor.memo
