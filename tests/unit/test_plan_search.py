"""Searching instead of sweeping (bisection per line) and the cost objective."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from qsim.analysis.plan import plan
from qsim.analysis.plan.cost import parse_cost
from qsim.analysis.plan.search import choose_axis, recommend
from qsim.analysis.slo.language import parse_slo
from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario


def random_case(rng: random.Random) -> tuple[dict[str, list[int]], Callable[[dict[str, Any]], bool], str]:
    """A grid (1 or 2 paths) and a verdict that changes at most once along the axis, on every line."""
    axis = "pools.p.concurrency"
    values = sorted(rng.sample(range(1, 600), rng.randint(5, 80)))
    vary: dict[str, list[int]] = {}
    if rng.random() < 0.6:
        vary["pools.p.workers"] = sorted(rng.sample(range(1, 12), rng.randint(1, 4)))
    vary[axis] = values if rng.random() < 0.8 else list(reversed(values))  # order as given must not matter
    if rng.random() < 0.3:
        vary = dict(reversed(list(vary.items())))  # the axis first
    capacity_like = rng.random() < 0.7  # meets above a threshold (slots); else below it (a load)
    workers = vary.get("pools.p.workers", [1])
    lo, hi = min(workers) * min(values), max(workers) * max(values)
    need = rng.uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))  # now and then outside: none or all meet

    def meets(p: dict[str, Any]) -> bool:
        slots = p.get("pools.p.workers", 1) * p[axis]
        return slots >= need if capacity_like else slots <= need

    return vary, meets, axis


@pytest.mark.parametrize("case", range(20))
def test_bisection_gives_the_grids_answer_on_random_monotone_cases(case: int) -> None:
    rng = random.Random(case)
    vary, meets, axis = random_case(rng)
    cost = parse_cost(rng.choice(["workers*concurrency", "concurrency", "workers*0.05 + concurrency*0.01",
                                  "-concurrency"]), list(vary)) if rng.random() < 0.6 and len(vary) == 2 else None
    calls: list[int] = []

    def evaluate(points: list[dict[str, Any]]) -> list[bool]:
        calls.append(len(points))
        return [meets(p) for p in points]

    # Given the grid's answer (every point evaluated)
    want = 3 if cost is not None else 1
    by_grid, grid_seen = recommend(vary, evaluate, axis=None, cost=cost, want=want)
    grid_calls = sum(calls)
    calls.clear()
    # When bisecting along the axis
    assert choose_axis(vary) == axis
    by_search, seen = recommend(vary, evaluate, axis=axis, cost=cost, want=want)
    # Then the answer (and the runner-ups) are the same, from far fewer points
    assert by_search == by_grid
    assert set(seen) <= set(grid_seen) and all(grid_seen[k] == v for k, v in seen.items())
    lines = len(grid_seen) // len(set(vary[axis]))
    assert sum(calls) <= lines * (2 + math.ceil(math.log2(len(set(vary[axis]))))) + want
    assert sum(calls) <= grid_calls


def test_bisection_of_1_to_512_takes_about_ten_points() -> None:
    seen: list[dict[str, Any]] = []

    def evaluate(points: list[dict[str, Any]]) -> list[bool]:
        seen.extend(points)
        return [p["pools.p.concurrency"] >= 300 for p in points]

    best, _ = recommend({"pools.p.concurrency": list(range(1, 513))}, evaluate, axis="pools.p.concurrency")
    assert best == [{"pools.p.concurrency": 300}] and len(seen) <= 11


def test_choose_axis_takes_a_monotone_numeric_path_with_enough_values() -> None:
    assert choose_axis({"pools.p.workers": [1, 2], "pools.p.concurrency": list(range(1, 65))}) == "pools.p.concurrency"
    assert choose_axis({"pools.p.workers": list(range(1, 33)), "pools.p.concurrency": [1, 2]}) == "pools.p.workers"
    assert choose_axis({"jobs.a.arrival.rate": [1, 2, 4, 8, 16]}) == "jobs.a.arrival.rate"
    assert choose_axis({"jobs.a.priority": list(range(10))}) is None  # not known to be monotone
    assert choose_axis({"pools.p.concurrency": [1, 2, 3]}) is None  # too short to gain anything


def mmc() -> Scenario:
    return Scenario.from_dict({
        "name": "mmc", "seed": 3, "duration": 200.0, "warmup": 20.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                  "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 1}],
    })


def test_plan_search_auto_agrees_with_the_grid_on_the_model() -> None:
    slos = [parse_slo("p95_wait<=0.5")]
    vary = {"pools.p.workers": [1, 2], "pools.p.concurrency": list(range(4, 17))}
    grid = plan(mmc(), slos, vary, replications=3, minimize="workers*concurrency")
    searched = plan(mmc(), slos, vary, replications=3, minimize="workers*concurrency", search="auto")
    assert searched["recommended"] == grid["recommended"] and searched["next"] == grid["next"]
    assert searched["search"]["method"] == "bisection" and searched["search"]["axis"] == "pools.p.concurrency"
    assert searched["search"]["points_simulated"] < grid["search"]["points_simulated"] == 26
    # the same point gives the same figures whichever way it was reached (same seeds)
    by_params = {tuple(p["params"].values()): p for p in grid["points"]}
    for p in searched["points"]:
        assert p["metrics"] == by_params[tuple(p["params"].values())]["metrics"]


# --------------------------------------------------------------------------- cost


def test_cost_expressions_over_the_varied_parameters() -> None:
    varied = ["pools.web.workers", "pools.web.concurrency"]
    point = {"pools.web.workers": 4, "pools.web.concurrency": 8}
    assert parse_cost("workers*concurrency", varied)(point) == 32
    assert parse_cost("workers*0.05 + concurrency*0.01", varied)(point) == pytest.approx(0.28)
    assert parse_cost("pools.web.workers ** 2 / 2 - -1", varied)(point) == 9
    assert parse_cost("10 ** 10 ** 10", varied)(point) == math.inf  # overflow: an infinite cost, not a hang
    # a scenario path that is not varied reads the scenario's value
    s = Scenario.from_dict({"name": "x", "duration": 10.0, "queues": [{"name": "q"}],
                            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
                                      "service": {"kind": "constant", "mean": 0.1}}],
                            "pools": [{"name": "web", "queues": ["q"], "workers": 3, "concurrency": 2}]})
    assert parse_cost("workers * pools.web.concurrency", ["pools.web.workers"], s)({"pools.web.workers": 5}) == 10


@pytest.mark.parametrize(("text", "message"), [
    ("__import__('os').system('true')", "Call is not allowed"),
    ("workers.__class__", "'workers.__class__' is not a varied parameter"),
    ("workers if concurrency else 1", "IfExp is not allowed"),
    ("[workers][0]", "is not allowed"),
    ("lambda: 1", "Lambda is not allowed"),
    ("workers // 2", "operator FloorDiv is not allowed"),
    ("workers < 2", "Compare is not allowed"),
    ("'a' * 3", "only numbers, names and + - * / ** are allowed"),
    ("not workers", "operator Not is not allowed"),
    ("workers *", "is not an expression"),
    ("", "needs an expression"),
    ("speed * workers", "'speed' is not a varied parameter"),
])
def test_cost_refuses_anything_but_arithmetic_on_parameters(text: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_cost(text, ["pools.web.workers", "pools.web.concurrency"])
    assert message in str(info.value)


def test_cost_names_must_be_unambiguous_and_defined() -> None:
    with pytest.raises(ScenarioError, match="could be any of pools.a.workers, pools.b.workers"):
        parse_cost("workers", ["pools.a.workers", "pools.b.workers"])
    assert parse_cost("pools.a.workers", ["pools.a.workers", "pools.b.workers"])({"pools.a.workers": 2,
                                                                                   "pools.b.workers": 5}) == 2
    with pytest.raises(ScenarioError, match="undefined"):
        parse_cost("1 / (workers - 2)", ["pools.a.workers"])({"pools.a.workers": 2})


def test_plan_minimizes_the_cost_and_lists_the_next_two() -> None:
    # Given slots = workers x concurrency: 8 jobs/s of 1 s need about 11 slots for p95 wait <= 0.5 s
    vary = {"pools.p.workers": [1, 2, 3, 4], "pools.p.concurrency": [2, 3, 4, 6, 8, 12]}
    result = plan(mmc(), [parse_slo("p95_wait<=0.5")], vary, replications=3, minimize="workers*concurrency + workers")
    met = [p for p in result["points"] if p["meets_slo"]]
    cheapest = sorted(met, key=lambda p: (p["cost"], tuple(p["params"].values())))
    # Then the recommendation is the cheapest point that meets the SLO, then the next two
    assert result["recommended"] == cheapest[0]["params"]
    assert result["next"] == [p["params"] for p in cheapest[1:3]]
    assert result["minimize"] == "workers*concurrency + workers"
    slots = result["recommended"]["pools.p.workers"] * result["recommended"]["pools.p.concurrency"]
    assert 10 <= slots <= 14


def test_plan_refuses_a_cost_undefined_at_a_point_before_running_anything() -> None:
    with pytest.raises(ScenarioError, match="undefined"):
        plan(mmc(), [parse_slo("p95_wait<=0.5")], {"pools.p.concurrency": [1, 2, 3]},
             minimize="1 / (concurrency - 2)", processes=1)
