"""Sweeps and capacity planning: parameter paths, SLOs, the recommendation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from qsim.analysis.slo.language import parse_slo

from qsim.analysis.plan import AUTO_MAX, AUTO_START, plan
from qsim.analysis.plan.runlength import MIN_TAIL_JOBS
from qsim.analysis.plan.sweep import grid, parse_values, sweep, with_params
from qsim.analysis.stats import estimate, mean_summary
from qsim.analysis.theory import mmc_wait_quantile
from qsim.cli import main
from qsim.errors import ScenarioError
from qsim.model import simulate
from qsim.spec.scenario import Scenario


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
    # a varied value is held to the scenario's own rules, as its TOML would be (these ran, or divided by 0)
    ({"jobs.a.arrival.rate": 0}, "jobs[0].arrival.rate must be > 0, got 0"),
    ({"jobs.a.arrival.rate": -2}, "jobs[0].arrival.rate must be > 0, got -2"),
    ({"jobs.a.fail_prob": 2}, "jobs[0].fail_prob must be <= 1, got 2"),
    ({"duration": 0}, "duration must be > 0, got 0"),
    ({"warmup": 400}, "warmup must be < duration (300), got 400"),
    # with a window set, the warmup still (it named the window: "duration - warmup = -100 s")
    ({"window": 30, "warmup": 400}, "warmup must be < duration (300), got 400"),
])
def test_with_params_refuses_bad_paths_and_values(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        with_params(mmc(), params)


def test_a_varied_scenario_whose_distribution_came_from_a_file_is_checked_without_reading_it(tmp_path: Path) -> None:
    # Given a scenario whose service times were read from a CSV that is gone since (qsim advise builds one in memory)
    csv = tmp_path / "times.csv"
    csv.write_text("0.5\n1.0\n1.5\n")
    raw = mmc().to_dict()
    raw["jobs"][0]["service"] = {"kind": "empirical", "path": str(csv)}
    s = Scenario.from_dict(raw)
    csv.unlink()
    # Then a varied value is still held to the scenario's rules, and a good one is set (it said "cannot be read")
    assert with_params(s, {"pools.p.workers": 3}).pool("p").workers == 3
    with pytest.raises(ScenarioError, match=re.escape("jobs[0].arrival.rate must be > 0, got 0")):
        with_params(s, {"jobs.a.arrival.rate": 0})


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
    for bad, message in (("p95<=2", "unknown metric 'p95'"), ("p95_wait=2", "'=' is not a comparison"),
                         ("p95_wait<=x", "the value after '<=' must be a number"), ("throughput[a]>1", "no per-type")):
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
    nothing = plan(mmc(), [parse_slo("p95_wait<=0.001")], {"pools.p.concurrency": [9, 10]})  # P(wait) ~ 0.4
    assert nothing["recommended"] is None


def test_qsim_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "workshop", "--slo", "p95_wait<=1", "--vary", "pools.craftsmen.workers=1:3", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and set(doc) >= {"points", "recommended"}
    assert [p["params"]["pools.craftsmen.workers"] for p in doc["points"]] == [1, 2, 3]
    assert set(doc["points"][0]["summary"]["jobs"]) >= {"arrived", "lost"}
    code = main(["plan", "workshop", "--slo", "p95_wait<=1", "--vary", "pools.nope.workers=1:3"])
    assert code == 2 and "no pool named 'nope'" in capsys.readouterr().err


# --------------------------------------------------------------------------- replications and confidence


def short_mmc(concurrency: int = 1) -> Scenario:
    """M/M/c with lambda = 8/s, 1 s jobs, 270 s measured (about 2,200 jobs): a run too short for one seed."""
    return Scenario.from_dict({
        "name": "mmc-short", "seed": 0, "duration": 300.0, "warmup": 30.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0},
                  "service": {"kind": "exponential", "mean": 1.0}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": concurrency}],
    })


def test_plan_with_replications_recommends_the_erlang_c_answer_where_one_seed_does_not() -> None:
    # Given an SLO whose least c by Erlang C is 11 (p95 wait 0.53 s at c = 11, 1.05 s at c = 10)
    slo = parse_slo("p95_wait<=0.9")
    exact = next(c for c in range(9, 20) if mmc_wait_quantile(0.95, c, 8.0, 1.0) <= slo.value)
    assert exact == 11
    vary = {"pools.p.concurrency": list(range(9, 14))}
    # When the plan uses one short run per point, the answer depends on the seed
    single = {plan(short_mmc(), [slo], vary, seed=s, processes=1)["recommended"]["pools.p.concurrency"]
              for s in range(10)}
    assert single != {exact}, f"one seed was enough in this case ({single}): the check would show nothing"
    # Then with 10 replications it is the exact least c, whatever the seeds
    for seed in (0, 100, 1000):
        result = plan(short_mmc(), [slo], vary, seed=seed, replications=10)
        assert result["recommended"] == {"pools.p.concurrency": exact}, seed
        point = {p["params"]["pools.p.concurrency"]: p for p in result["points"]}[exact]
        low, high = point["ci"]["p95_wait"]
        assert point["replications"] == 10 and low < point["summary"]["wait"]["p95"] < high <= slo.value


def test_replication_r_uses_seed_plus_r_at_every_point() -> None:
    # Given 3 replications from seed 5
    result = plan(short_mmc(), [parse_slo("p95_wait<=1")], {"pools.p.concurrency": [11, 12]}, seed=5,
                  replications=3, processes=1)
    # Then each point's p95 interval is the t-interval of the runs with seeds 5, 6, 7
    for point in result["points"]:
        scenario = with_params(short_mmc(), point["params"])
        runs = [simulate(scenario, seed=s, records=False).summary["wait"]["p95"] for s in (5, 6, 7)]
        expected = estimate(runs, 0.95, bounds=(0.0, None))  # a wait is never below 0
        assert point["metrics"]["p95_wait"]["mean"] == pytest.approx(expected.mean)
        assert point["ci"]["p95_wait"] == pytest.approx(expected.ci)
        assert point["summary"]["wait"]["p95"] == pytest.approx(expected.mean)


def test_an_slo_is_met_by_the_intervals_bound() -> None:
    est = estimate([1.0, 1.2, 1.4], 0.95)  # mean 1.2, half width 0.497
    assert est.low is not None and est.high is not None and est.high == pytest.approx(1.2 + 0.4968, abs=1e-3)
    assert parse_slo("p95_wait<=1.8").check(est) == "met"
    assert parse_slo("p95_wait<=1.5").check(est) == "undecided"  # the mean meets it, the upper bound does not
    assert parse_slo("p95_wait<=0.6").check(est) == "failed"
    assert parse_slo("throughput>=0.6").check(est) == "met"  # the lower bound, 0.70, meets it
    assert parse_slo("throughput>=1").check(est) == "undecided"
    assert parse_slo("throughput>2").check(est) == "failed"
    assert parse_slo("p95_wait<=1").check(estimate([None, 1.0])) == "failed"  # undefined in a run
    clipped = estimate([0.0, 0.1, 0.9], 0.95, bounds=(0.0, 1.0))
    assert clipped.low == 0.0 and clipped.high == 1.0 and clipped.half_width is not None and clipped.half_width > 1
    one = estimate([1.2])  # one replication: the value itself
    assert one.ci is None and parse_slo("p95_wait<=1.2").check(one) == "met"


def test_auto_replications_add_runs_only_where_the_verdict_is_open() -> None:
    # Given p95 waits near 0.6 s at c = 11 and far from the SLO elsewhere
    result = plan(short_mmc(), [parse_slo("p95_wait<=0.6")], {"pools.p.concurrency": [9, 11, 14]},
                  replications="auto")
    runs = {p["params"]["pools.p.concurrency"]: p["replications"] for p in result["points"]}
    # Then the clear points stop at the first batch and the close one gets more, within the budget
    assert runs[9] == AUTO_START and runs[14] == AUTO_START
    assert AUTO_START < runs[11] <= AUTO_MAX
    assert result["replications"] == "auto" and result["search"]["runs"] == sum(runs.values())
    close = [p for p in result["points"] if p["params"]["pools.p.concurrency"] == 11][0]
    assert close["checks"]["p95_wait<=0.6"] in ("met", "failed") or runs[11] == AUTO_MAX


def test_plan_flags_an_overloaded_point_and_a_short_quantile() -> None:
    # Given 8 jobs/s of 1 s on 6 slots (overloaded) and on 12 (fine), in short runs
    result = plan(short_mmc(), [parse_slo("p99_wait<=100")], {"pools.p.concurrency": [6, 12]}, replications=3,
                  max_jobs=400)
    over, fine = sorted(result["points"], key=lambda p: p["params"]["pools.p.concurrency"])
    # Then the overloaded point is unstable and meets nothing, though its p99 is under 100 s
    assert over["run_length"]["unstable"] and not over["meets_slo"]
    assert over["metrics"]["p99_wait"]["mean"] < 100
    assert any(w.startswith("unstable") for w in over["warnings"])
    assert not fine["run_length"]["unstable"] and fine["meets_slo"]
    # And 400 jobs leave 4 beyond the p99: the figure is flagged short
    assert fine["run_length"]["short"]["p99_wait"] < MIN_TAIL_JOBS
    assert result["recommended"] == {"pools.p.concurrency": 12}
    long = plan(short_mmc(), [parse_slo("p95_wait<=100")], {"pools.p.concurrency": [12]}, processes=1)
    assert "p95_wait" not in long["points"][0]["run_length"]["short"]
    assert not long["points"][0]["run_length"]["unstable"]


def test_plan_result_reads_at_a_glance() -> None:
    result = plan(short_mmc(), [parse_slo("p95_wait<=0.9")], {"pools.p.concurrency": [10, 11, 12]},
                  replications=3, processes=1)
    text = repr(result)
    assert text.startswith("PlanResult(recommended={'pools.p.concurrency': ") and "replications=3" in text
    assert len(text) < 200
    page = result._repr_html_()
    assert page.index("Recommended") < page.index("<table") and "±" in page and page.count("<tr") == 4
    table = result.table()
    assert "p95_wait" in table and " ± " in table and "recommended: pools.p.concurrency = " in table
    assert json.loads(json.dumps(result)) == dict(result)  # the JSON is the dict


def test_qsim_plan_json_has_intervals_and_replications(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "mmc.toml"
    path.write_text(MMC_TOML)
    png = tmp_path / "plan.png"
    code = main(["plan", str(path), "--slo", "p95_wait<=0.9", "--vary", "pools.p.concurrency=9:13",
                 "--replications", "4", "--confidence", "0.9", "--plot", str(png), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["recommended"] == {"pools.p.concurrency": 11}
    for point in doc["points"]:
        assert point["replications"] == 4 and set(point["ci"]) >= {"p95_wait", "utilization"}
        low, high = point["ci"]["p95_wait"]
        assert low <= point["summary"]["wait"]["p95"] <= high
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code = main(["plan", str(path), "--slo", "p95_wait<=0.9", "--vary", "pools.p.concurrency=9:13",
                 "--replications", "3", "--processes", "1"])
    out = capsys.readouterr().out
    assert code == 0 and " ± " in out and "recommended: pools.p.concurrency = " in out


@pytest.mark.parametrize(("args", "message"), [
    (["--vary", "pools.p.concurrency"], "--vary must look like"),
    (["--vary", "pools.p.concurrency=9:x"], "--vary pools.p.concurrency: values must look like"),
    (["--vary", "pools.p.speed=1:3"], "has no field 'speed'"),
    (["--slo", "p95_wait=<1"], "--slo 'p95_wait=<1': '=<' is not a comparison qsim knows; use <="),
    (["--slo", "p96_wait<=1"], "--slo 'p96_wait<=1': unknown metric 'p96_wait'; use one of mean_wait"),
    (["--slo", "p95_wait<="], "--slo 'p95_wait<=': no number after '<='; write it like p95_wait<=2"),
    (["--minimize", "__import__('os').system('true')"], "is not allowed"),
    (["--minimize", "workers*speed"], "'workers' is not a varied parameter"),
    (["--minimize", "concurrency*"], "is not an expression"),
    (["--replications", "0"], "must be a whole number >= 1 or auto"),
    (["--replications", "many"], "must be a whole number >= 1 or auto"),
    (["--confidence", "95"], "must be between 0 and 1"),
    (["--search", "binary"], "invalid choice"),
    (["--dask", "tcp://127.0.0.1:9"], "no Dask scheduler answered at tcp://127.0.0.1:9"),
    (["--plot", "/no/such/dir/plan.png"], "--plot /no/such/dir/plan.png: the folder '/no/such/dir' does not exist"),
])
def test_qsim_plan_refuses_bad_input_with_exit_2(args: list[str], message: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mmc.toml"
    path.write_text(MMC_TOML)
    base = {"--slo": "p95_wait<=1", "--vary": "pools.p.concurrency=9:12"}
    given = dict(zip(args[::2], args[1::2]))
    argv = ["plan", str(path), "--processes", "1"] + [x for k, v in {**base, **given}.items() for x in (k, v)]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = int(e.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "Traceback" not in err


MMC_TOML = """
name = "mmc"
seed = 0
duration = 300.0
warmup = 30.0

[[queues]]
name = "q"

[[jobs]]
name = "a"
queue = "q"
arrival = { kind = "poisson", rate = 8.0 }
service = { kind = "exponential", mean = 1.0 }

[[pools]]
name = "p"
queues = ["q"]
workers = 1
concurrency = 1
"""


def test_mean_summary_averages_every_figure_and_keeps_the_shape() -> None:
    runs = [simulate(short_mmc(12), seed=s, records=False).summary for s in (1, 2, 3)]
    mean = mean_summary(runs)
    assert mean["seed"] == 1 and mean["scenario"] == "mmc-short" and set(mean) == set(runs[0])
    assert mean["wait"]["p95"] == pytest.approx(sum(r["wait"]["p95"] for r in runs) / 3)
    assert mean["by_type"]["a"]["latency"]["mean"] == pytest.approx(sum(r["latency"]["mean"] for r in runs) / 3)
    assert isinstance(mean["jobs"]["arrived"], int)
    assert abs(mean["jobs"]["arrived"] - sum(r["jobs"]["arrived"] for r in runs) / 3) <= 0.5
    assert mean_summary(runs[:1]) == runs[0]
    undefined = dict(runs[1], wait=dict(runs[1]["wait"], p95=None))
    assert mean_summary([runs[0], undefined])["wait"]["p95"] is None
