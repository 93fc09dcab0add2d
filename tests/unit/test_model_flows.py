"""Model: flows (a parent waits for its children) and fan-out (a completed job adds children)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from qsim.model import JobDraws, Model, simulate
from qsim.spec.scenario import Scenario


def scenario(*, jobs: list[dict[str, Any]], pools: list[dict[str, Any]] | None = None, **top: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "t", "seed": 4, "duration": 200.0, "queues": [{"name": "q"}, {"name": "data"}],
        "jobs": jobs,
        "pools": pools or [{"name": "p", "queues": ["q", "data"], "workers": 4, "concurrency": 2}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


def flow(on_child_failure: str = "fail", poison: float = 0.0) -> Scenario:
    return scenario(jobs=[
        {"name": "invoice", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
         "service": {"kind": "exponential", "mean": 0.3},
         "flow": {"children": ["fetch", "tax"], "on_child_failure": on_child_failure}},
        {"name": "fetch", "queue": "data", "service": {"kind": "exponential", "mean": 1.0}, "attempts": 2,
         "fail_prob": 0.2, "poison_prob": poison, "backoff": {"kind": "fixed", "delay": 0.5}},
        {"name": "tax", "queue": "data", "service": {"kind": "lognormal", "mean": 0.5, "cv": 1.0}}])


def test_no_parent_starts_before_its_last_child_completes() -> None:
    r = simulate(flow())
    jobs = r.jobs
    parents = jobs[jobs["type"] == "invoice"].set_index("job_id")
    kids = jobs[jobs["parent"] != ""]
    assert len(parents) > 150 and (parents["outcome"] == "completed").sum() > 100
    # Then each parent has exactly one child of each child type, enqueued with it
    per = kids.groupby("parent")["type"].apply(sorted)
    assert (per == [["fetch", "tax"]] * len(per)).all() and set(per.index) == set(parents.index)
    assert (kids["enqueued"].to_numpy() == parents.loc[kids["parent"], "enqueued"].to_numpy()).all()
    # and a parent starts only after its last child completed
    last = kids.groupby("parent")["finished"].max()
    ran = parents[parents["started"].notna()]
    assert (ran["started"] >= last[ran.index]).all()
    assert (kids.groupby("parent")["outcome"].apply(lambda o: (o == "completed").all())[ran.index]).all()
    # and its wait (enqueue to first start) includes the time waiting for the children
    assert (ran["started"] - ran["enqueued"] >= last[ran.index] - ran["enqueued"]).all()
    assert r.summary["by_type"]["invoice"]["wait"]["mean"] > 0.5
    assert r.summary["jobs"]["lost"] == 0 and r.summary["jobs"]["unfinished"] == 0


def test_a_dead_child_sends_its_parent_to_the_dlq_under_fail() -> None:
    r = simulate(flow("fail", poison=0.3))
    jobs = r.jobs
    parents = jobs[jobs["type"] == "invoice"].set_index("job_id")
    kids = jobs[jobs["parent"] != ""]
    first_death = kids[kids["outcome"] == "dead"].groupby("parent")["finished"].min()
    assert len(first_death) > 30
    doomed = parents.loc[first_death.index]
    # Then the parent died when its first child died, never having started
    assert (doomed["outcome"] == "dead").all() and doomed["started"].isna().all()
    assert (doomed["finished"] == first_death).all()
    others = parents.drop(first_death.index)
    assert (others["outcome"] == "completed").all()
    assert r.summary["jobs"]["dead"] == int((jobs["outcome"] == "dead").sum()) and r.summary["jobs"]["lost"] == 0


def test_a_dead_child_is_ignored_under_ignore() -> None:
    r = simulate(flow("ignore", poison=0.3))
    jobs = r.jobs
    parents = jobs[jobs["type"] == "invoice"]
    kids = jobs[jobs["parent"] != ""]
    assert (kids["outcome"] == "dead").sum() > 30
    assert (parents["outcome"] == "completed").all()
    last = kids.groupby("parent")["finished"].max()
    assert (parents["started"].to_numpy() >= last[parents["job_id"]].to_numpy()).all()


def test_fan_out_adds_exactly_count_children_per_completed_parent() -> None:
    s = scenario(jobs=[
        {"name": "order", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0}, "attempts": 2,
         "service": {"kind": "exponential", "mean": 0.3}, "fail_prob": 0.3, "poison_prob": 0.1,
         "fan_out": {"job": "part", "count": 5}},
        {"name": "part", "queue": "data", "service": {"kind": "exponential", "mean": 0.1}, "attempts": 3,
         "fail_prob": 0.2}])
    r = simulate(s)
    jobs = r.jobs
    parents = jobs[jobs["type"] == "order"].set_index("job_id")
    kids = jobs[jobs["type"] == "part"]
    counts = kids.groupby("parent").size().reindex(parents.index, fill_value=0)
    done = parents["outcome"] == "completed"
    assert done.sum() > 100 and (~done).sum() > 10
    # Then every completed parent has exactly count children, others none, added when it completed
    assert (counts[done] == 5).all() and (counts[~done] == 0).all()
    assert (kids["enqueued"].to_numpy() == parents.loc[kids["parent"], "finished"].to_numpy()).all()
    # and the children retry on their own
    assert kids["failed_attempts"].sum() > 50 and r.summary["jobs"]["lost"] == 0
    assert r.summary["by_type"]["part"]["completed"] + r.summary["by_type"]["part"]["dead"] == len(kids)


def test_fan_out_children_of_a_batch_start_in_priority_order() -> None:
    s = scenario(pools=[{"name": "p", "queues": ["q", "data"], "workers": 1}], jobs=[
        {"name": "order", "queue": "q", "priority": 5, "arrival": {"kind": "constant", "rate": 1.0},
         "service": {"kind": "constant", "mean": 1.0}, "fan_out": {"job": "part", "count": 3}},
        {"name": "part", "queue": "q", "priority": 0, "service": {"kind": "constant", "mean": 1.0}}])
    d = JobDraws(time=np.array([0.0, 0.5]), type=np.array([0, 0]), service=np.array([1.0, 1.0]))
    r = Model(s, d, seed=0).run()
    order = r.jobs.sort_values("started")["type"].tolist()
    # the second order waits while the first's parts (better priority) run
    assert order == ["order", "part", "part", "part", "order", "part", "part", "part"]
    assert r.jobs["finished"].max() == pytest.approx(8.0)
