"""The workload: every job of a run drawn once, played alike by the model and the engine harness."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from qsim.harness.plan import plan_jobs, plan_workload
from qsim.model import Model, simulate
from qsim.spec.scenario import Scenario
from qsim.spec.workload import JobDraws, Workload, draw_jobs, draw_workload, plan_attempts


def scenario(**top: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "w", "seed": 4, "duration": 40.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0}, "attempts": 3,
                  "fail_prob": 0.3, "service": {"kind": "exponential", "mean": 0.2}, "fan_out": {"job": "k", "count": 2}},
                 {"name": "b", "queue": "q", "arrival": {"kind": "burst", "rate": 0.5, "size": 3},
                  "service": {"kind": "constant", "mean": 0.1}},
                 {"name": "k", "queue": "q", "attempts": 2, "fail_prob": 0.5, "service": {"kind": "constant", "mean": 0.1}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 2}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


def test_a_workload_is_the_arrivals_and_the_attempt_draws_of_its_seed() -> None:
    s = scenario()
    w = draw_workload(s, seed=11, max_jobs=50)
    d = draw_jobs(s, seed=11, max_jobs=50)
    assert len(w) == len(d) == 50 and w.seed == 11
    for a, b in [(w.arrivals.time, d.time), (w.arrivals.type, d.type), (w.arrivals.service, d.service)]:
        assert np.array_equal(a, b)
    assert "attempts" not in vars(w)  # drawn on first use only (a core run never needs them)
    plan = plan_attempts(s, d, 11)
    assert w.attempts is w.attempts  # then kept
    assert w.attempts.kids == plan.kids and np.array_equal(w.attempts.rank, plan.rank)
    for mine, theirs in zip(w.attempts.own + w.attempts.child, plan.own + plan.child):
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert np.array_equal(mine.service, theirs.service) and np.array_equal(mine.fails, theirs.fails)


def test_the_model_and_the_harness_play_one_workload() -> None:
    s = scenario()
    w = draw_workload(s)
    # the harness's plan of this workload is the plan of the scenario and seed
    assert plan_workload(w) == plan_jobs(s)
    # the model run of this workload is simulate's
    ran = Model.from_workload(w).run()
    again = simulate(s)
    pd.testing.assert_frame_equal(ran.jobs, again.jobs)
    pd.testing.assert_frame_equal(ran.records.attempts, again.records.attempts)
    assert ran.summary == again.summary
    # and it played the workload's attempts: each attempt's length is its drawn service time
    plan = w.attempts
    att = ran.records.attempts.merge(ran.jobs[["job_id", "type", "parent"]], on="job_id")
    own = att[att["parent"] == ""]
    assert len(own) > 50
    for _, a in own.iterrows():
        i = int(a["job_id"][1:])
        table = plan.own[int(w.arrivals.type[i])]
        assert table is not None
        assert a["end"] - a["start"] == pytest.approx(table.service[int(plan.rank[i]), a["attempt"] - 1])


def test_hand_made_arrivals_make_a_workload_too() -> None:
    s = scenario()
    w = Workload(s, 0, JobDraws(time=np.array([0.0, 0.5, 0.5]), type=np.array([1, 1, 0]),
                                service=np.array([1.0, 2.0, 3.0])))
    jobs = Model.from_workload(w).run().jobs
    assert jobs["enqueued"].tolist()[:3] == [0.0, 0.5, 0.5] and jobs["type"].tolist()[:3] == ["b", "b", "a"]
    assert (jobs["finished"] - jobs["started"]).tolist()[:2] == [1.0, 2.0]


@pytest.mark.parametrize("seed", [-1, 1.5, True, "7"])
def test_a_bad_seed_is_refused_in_one_sentence(seed: Any) -> None:
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0, got"):
        draw_workload(scenario(), seed=seed)
