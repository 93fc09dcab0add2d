"""Sweeps and capacity planning: parameter paths, SLOs, the recommendation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from qsim.analysis.plan import parse_slo, plan
from qsim.analysis.sweep import grid, parse_values, sweep, with_params
from qsim.cli import main
from qsim.errors import ScenarioError
from qsim.scenario import Scenario


def mmc(concurrency: int = 1) -> Scenario:
    return Scenario.from_dict({
        "name": "mmc", "seed": 4, "duration": 300.0, "warmup": 30.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                  "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": concurrency}],
    })


def test_with_params_sets_nested_fields_and_keeps_types() -> None:
    s = with_params(mmc(), {"pools.p.concurrency": 12.0, "jobs.a.arrival.rate": 5, "duration": 100})
    assert s.pool("p").concurrency == 12 and isinstance(s.pool("p").concurrency, int)
    assert s.job("a").arrival is not None and s.job("a").arrival.rate == 5.0
    assert s.duration == 100.0
    s = with_params(mmc(), {"queues.q.concurrency_limit": 3.0})
    assert s.queue("q").concurrency_limit == 3 and isinstance(s.queue("q").concurrency_limit, int)


@pytest.mark.parametrize(("params", "message"), [
    ({"pools.nope.concurrency": 2}, "no pool named 'nope' (defined: p)"),
    ({"pools.p.speed": 2}, "PoolSpec has no field 'speed'"),
    ({"pools.p": 2}, "expected pools.<name>.<field>"),
    ({"pools.p.concurrency": 2.5}, "must be a whole number"),
    ({"pools.p.concurrency": 0}, "must be >= 1, got 0"),
])
def test_with_params_refuses_bad_paths_and_values(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(").replace(")", r"\)")):
        with_params(mmc(), params)


def test_parse_values_forms() -> None:
    assert parse_values("1:4") == [1, 2, 3, 4]
    assert parse_values("2:10:4") == [2, 6, 10]
    assert parse_values("0.5:1.5:0.5") == [0.5, 1, 1.5]
    assert parse_values("1,2,8") == [1, 2, 8]
    for bad in ("4:1", "1:4:0", "a:b", "", "1:2:3:4"):
        with pytest.raises(ScenarioError, match="values must look like"):
            parse_values(bad)
    assert grid({"x": [1, 2], "y": [3]}) == [{"x": 1, "y": 3}, {"x": 2, "y": 3}]


def test_parse_slo() -> None:
    slo = parse_slo("p95_wait<=2")
    assert (slo.metric, slo.op, slo.value, slo.job_type) == ("p95_wait", "<=", 2.0, None)
    assert parse_slo("p99_latency[cut] < 5").job_type == "cut"
    for bad, message in (("p95<=2", "metric must be one of"), ("p95_wait=2", "must look like"),
                         ("p95_wait<=x", "value must be a number"), ("throughput[a]>1", "no per-type")):
        with pytest.raises(ScenarioError, match=message):
            parse_slo(bad)


def test_sweep_in_a_pool_equals_sweep_here() -> None:
    vary = {"pools.p.concurrency": [9, 10]}
    here = sweep(mmc(), vary, processes=1)
    pooled = sweep(mmc(), vary, processes=2)
    assert here == pooled
    assert here[0]["summary"]["wait"]["mean"] > here[1]["summary"]["wait"]["mean"]


def test_plan_recommends_the_smallest_concurrency_that_meets_the_slo() -> None:
    # Given lambda = 8/s of 1 s jobs: fewer than 9 slots is unstable
    result = plan(mmc(), [parse_slo("p95_wait<=0.5")], {"pools.p.concurrency": list(range(8, 15))})
    best = result["recommended"]["pools.p.concurrency"]
    by_value = {p["params"]["pools.p.concurrency"]: p for p in result["points"]}
    # Then the recommendation meets it and the value below does not
    assert by_value[best]["meets_slo"] and by_value[best]["summary"]["wait"]["p95"] <= 0.5
    assert not by_value[best - 1]["meets_slo"]
    nothing = plan(mmc(), [parse_slo("p95_wait<0")], {"pools.p.concurrency": [9, 10]})
    assert nothing["recommended"] is None


def test_qsim_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "workshop", "--slo", "p95_wait<=1", "--vary", "pools.craftsmen.workers=1:3", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and set(doc) >= {"points", "recommended"}
    assert [p["params"]["pools.craftsmen.workers"] for p in doc["points"]] == [1, 2, 3]
    assert set(doc["points"][0]["summary"]["jobs"]) >= {"arrived", "lost"}
    code = main(["plan", "workshop", "--slo", "p95_wait<=1", "--vary", "pools.nope.workers=1:3"])
    assert code == 2 and "no pool named 'nope'" in capsys.readouterr().err
