"""Redis as a planned resource: the cost model, the plan's and autoscale's ``redis`` part, the ceiling and its flags."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypothesis_budget import examples
from qsim import Scenario, ScenarioError
from qsim.analysis.autoscaling.contest import autoscale
from qsim.analysis.plan import plan
from qsim.analysis.plan.redis_load import summary_load
from qsim.analysis.slo.language import parse_slo
from qsim.cli import main
from qsim.spec.toml_writer import write_toml
from qsim.spec.redis_cost import (DEFAULT_CEILING, DEFAULT_CPU_PER_JOB_US, DEFAULT_IDLE_US_PER_WORKER, RENEW_US,
                                  RedisCost, check_ceiling, redis_cost, redis_load)


def small(**engine: float) -> Scenario:
    """Poisson 20 jobs/s of 0.1 s jobs on a pool whose workers the plan varies."""
    return Scenario.from_dict({
        "name": "small", "duration": 120.0, "seed": 5, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "arrival": {"kind": "poisson", "rate": 20.0},
                  "service": {"kind": "exponential", "mean": 0.1}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 1}],
        **({"engine": engine} if engine else {})})


# --------------------------------------------------------------------------- the cost model


@settings(max_examples=examples(100), deadline=None)
@given(rate=st.floats(0.0, 1e5), factor=st.floats(1.0, 50.0), workers=st.integers(0, 2000),
       cpu=st.floats(1.0, 500.0), idle=st.floats(0.0, 100.0))
def test_utilization_grows_with_throughput_by_the_cost_per_job(rate: float, factor: float, workers: int,
                                                                cpu: float, idle: float) -> None:
    cost = RedisCost(cpu, idle)
    low = redis_load(cost, throughput=rate, workers=workers)
    high = redis_load(cost, throughput=rate * factor, workers=workers)
    # the extra throughput costs exactly its jobs' CPU; the workers' idle cost stays as it was
    assert high.utilization - low.utilization == pytest.approx(rate * (factor - 1) * cpu / 1e6, rel=1e-9, abs=1e-12)
    assert low.utilization == pytest.approx((rate * cpu + workers * idle) / 1e6, rel=1e-9, abs=1e-12)
    assert low.cpu_per_job_us == high.cpu_per_job_us == pytest.approx(cpu)


def test_retries_and_long_jobs_cost_more_per_job() -> None:
    cost = RedisCost(100.0, 0.0)
    base = redis_load(cost, throughput=1000, workers=0)
    # every attempt is fetched and acknowledged again
    assert redis_load(cost, throughput=1000, workers=0, attempts_per_job=2.5).cpu_per_job_us == pytest.approx(250.0)
    # a job in its handler for 60 s with a 30 s lock has its lock renewed 4 times (every lock / 2)
    long = redis_load(cost, throughput=1000, workers=0, mean_service=60.0, lock_duration=30.0)
    assert long.cpu_per_job_us == pytest.approx(100.0 + 4 * RENEW_US)
    assert long.utilization > base.utilization


def test_the_warning_appears_above_the_ceiling_and_not_below() -> None:
    cost = RedisCost(100.0, 0.0)
    at_ceiling = DEFAULT_CEILING * 1e6 / 100.0  # jobs/s that take exactly the ceiling
    below = redis_load(cost, throughput=at_ceiling * 0.99, workers=0)
    above = redis_load(cost, throughput=at_ceiling * 1.01, workers=0)
    assert not below.above_ceiling and below.warning() is None
    assert above.above_ceiling and above.as_dict()["above_ceiling"] is True
    text = above.warning("the answer")
    assert text is not None and "71% of one Redis core" in text and "--redis-ceiling" in text
    # a lower ceiling flags the lower load
    assert redis_load(cost, throughput=at_ceiling * 0.99, workers=0, ceiling=0.5).above_ceiling


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.01, math.nan, math.inf, True, "0.7"])
def test_a_ceiling_outside_a_core_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="--redis-ceiling must be a share of one Redis core in"):
        check_ceiling(bad)  # type: ignore[arg-type]


def test_the_cost_comes_from_the_flag_then_the_scenario_then_the_default() -> None:
    assert redis_cost(small().engine).source == "default"
    assert redis_cost(small().engine).cpu_per_job_us == DEFAULT_CPU_PER_JOB_US
    measured = small(redis_cpu_per_job_us=80.0, redis_idle_us_per_worker=2.0).engine
    assert (redis_cost(measured).cpu_per_job_us, redis_cost(measured).idle_us_per_worker) == (80.0, 2.0)
    assert redis_cost(measured, cpu_per_job_us=30.0).source == "--redis-cpu-per-job"
    for key, value, said in (("redis_cpu_per_job_us", 0, "engine.redis_cpu_per_job_us must be > 0"),
                             ("redis_idle_us_per_worker", -1, "engine.redis_idle_us_per_worker must be >= 0"),
                             ("redis_cpu_per_job_us", "fast", "engine.redis_cpu_per_job_us must be a number")):
        with pytest.raises(ScenarioError, match=said):
            small(**{key: value})  # type: ignore[arg-type]


def test_the_default_cost_is_the_benchmarks_table() -> None:
    # Given the table benchmarks/redis_cost.py --snippet last wrote (docs/snippets/benchmarks/redis-cost.md)
    table = (Path(__file__).parents[2] / "docs" / "snippets" / "benchmarks" / "redis-cost.md").read_text()
    rows = re.findall(r"^\| \d+ \| [\d,]+ \| (\d+) \(", table, flags=re.M)
    idle = re.search(r"about (\d+(?:\.\d+)?) µs of Redis CPU per second", table)
    assert len(rows) == 3 and idle is not None
    # Then qsim's defaults are its qsim column's median and its idle worker's cost, within the
    # runs' spread: a benchmark that measures the engine anew moves the defaults with it
    assert DEFAULT_CPU_PER_JOB_US == pytest.approx(statistics.median(float(r) for r in rows), rel=0.2)
    assert DEFAULT_IDLE_US_PER_WORKER == pytest.approx(float(idle.group(1)), rel=0.5, abs=1.0)


def test_a_summary_with_retries_is_priced_per_attempt() -> None:
    summary = {"throughput": 50.0, "jobs": {"completed": 90, "dead": 10, "failed_attempts": 60},
               "wait": {"mean": 0.5}, "latency": {"mean": 2.5}}
    load = summary_load(small(), summary, cost=RedisCost(100.0, 10.0), workers=4)
    # (90 successful + 60 failed attempts) over 100 jobs = 1.5 attempts; 2 s in the handler: 2 / 15 renewals
    assert load.cpu_per_job_us == pytest.approx(150.0 + 2.0 / 15.0 * RENEW_US)
    assert load.utilization == pytest.approx((50.0 * load.cpu_per_job_us + 4 * 10.0) / 1e6)


# --------------------------------------------------------------------------- plan and autoscale


def test_plan_reports_the_recommended_points_redis_load_and_flags_it_above_the_ceiling() -> None:
    slos = [parse_slo("p95_wait<=2")]
    vary = {"pools.p.workers": [1, 2, 4, 8]}
    # Given the default cost, 20 jobs/s are far below a Redis core: a load, no warning
    quiet = plan(small(), slos, vary, processes=1)
    r = quiet["redis"]
    assert quiet["recommended"] is not None and r["workers"] == quiet["recommended"]["pools.p.workers"]
    assert r["cpu_per_job_us"] >= DEFAULT_CPU_PER_JOB_US and r["source"] == "default"
    assert r["utilization"] == pytest.approx((r["throughput"] * r["cpu_per_job_us"] + r["workers"] * DEFAULT_IDLE_US_PER_WORKER) / 1e6)
    assert 15 < r["throughput"] < 25 and not r["above_ceiling"] and "warnings" not in quiet
    assert "redis: " in quiet.table()
    # When each job costs Redis 40 ms of CPU (a slow Redis, or a heavy script), the same answer needs ~80 %
    loud = plan(small(), slos, vary, processes=1, redis_cpu_per_job_us=40_000.0)
    assert loud["recommended"] == quiet["recommended"]
    assert loud["redis"]["utilization"] > DEFAULT_CEILING and loud["redis"]["above_ceiling"]
    assert len(loud["warnings"]) == 1 and "above the ceiling of 70%" in loud["warnings"][0]
    # a notebook shows both: the load under the answer, the warning among the notes
    html = loud._repr_html_()
    assert "<b>Redis:</b>" in html and "ABOVE the ceiling 70%" in html and "above the ceiling of 70%" in html
    # and a ceiling above it takes the warning away
    assert "warnings" not in plan(small(), slos, vary, processes=1, redis_cpu_per_job_us=40_000.0, redis_ceiling=1.0)
    # the scenario's measured cost is used when no flag overrides it
    own = plan(small(redis_cpu_per_job_us=40_000.0), slos, vary, processes=1)
    assert own["redis"]["source"] == "engine.redis_cpu_per_job_us" and own["warnings"]


def test_autoscale_reports_the_answers_redis_load_at_its_peak() -> None:
    s = Scenario.from_dict({
        "name": "step", "duration": 600.0, "seed": 3, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 1.0},
                  "arrival": {"kind": "profile", "shape": "step", "points": [[0, 2.0], [300, 2.0], [300, 6.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2}]})
    doc = autoscale(s, "p95_wait<=30 in 50% of windows", policies=["hpa"], replications=1, processes=1,
                    redis_cpu_per_job_us=150_000.0)
    f = doc["policies"]["hpa"]
    # each policy is priced at its most workers and the profile's peak rate (6 jobs/s), not the run's mean
    assert f["redis"]["workers"] == math.ceil(f["max_workers"]) and f["redis"]["throughput"] == pytest.approx(6.0)
    assert f["redis"]["utilization"] == pytest.approx(
        (6.0 * f["redis"]["cpu_per_job_us"] + f["redis"]["workers"] * DEFAULT_IDLE_US_PER_WORKER) / 1e6)
    # the answer (the loose SLO is met) is the best policy's load: 6 jobs/s x 0.15 s of Redis CPU = 90 % of a core
    assert doc["best"] == "hpa" and doc["redis"] == f["redis"]
    assert doc["redis"]["above_ceiling"] and "policy hpa at its peak" in doc["warnings"][0]
    # the static peak is priced too when no policy meets the SLO
    none = autoscale(s, "p95_wait<=0.001", policies=["hpa"], replications=1, processes=1)
    assert none["best"] is None and none["redis"]["workers"] == none["static_peak"]["workers"] or \
        none["static_peak"]["workers"] is None and none["redis"] is None
    json.dumps(doc)


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("command", ["plan", "autoscale"])
@pytest.mark.parametrize("flag,value,said", [
    ("--redis-ceiling", "0", "argument --redis-ceiling: must be a share of one Redis core in (0, 1]"),
    ("--redis-ceiling", "1.5", "argument --redis-ceiling: must be a share of one Redis core in (0, 1]"),
    ("--redis-ceiling", "nan", "argument --redis-ceiling: must be a share of one Redis core in (0, 1]"),
    ("--redis-ceiling", "lots", "argument --redis-ceiling: must be a number, got 'lots'"),
    ("--redis-cpu-per-job", "-3", "argument --redis-cpu-per-job: must be > 0, got -3"),
])
def test_bad_redis_flags_exit_2_naming_the_flag(command: str, flag: str, value: str, said: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = [command, "steady", "--slo", "p95_wait<=2", flag, value]
    argv += ["--vary", "pools.workers.workers=1:2"] if command == "plan" else []
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and said in capsys.readouterr().err


def test_qsim_plan_prints_the_warning_on_stderr_and_in_json(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    path = tmp_path / "small.toml"
    write_toml(small(), path)
    argv = ["plan", str(path), "--slo", "p95_wait<=2", "--vary", "pools.p.workers=2,4", "--processes", "1", "--json"]
    assert main(argv + ["--redis-cpu-per-job", "40000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["redis"]["above_ceiling"] and doc["warnings"] and "qsim plan: warning: Redis: " in err
    assert main(argv + ["--redis-cpu-per-job", "40000", "--redis-ceiling", "0.95"]) == 0
    out, err = capsys.readouterr()
    assert "warnings" not in json.loads(out) and "warning" not in err


def test_the_probes_text_gives_the_engine_lines_redis_among_them() -> None:
    from qsim.calibrate.overhead import Overhead
    from qsim.cli.calibrate import _probe_text

    cost = RedisCost(120.5, 9.25, "probe", detail={"add_us": 70.0, "drain_us": 50.5, "commands_per_job": 20.0,
                                                   "idle_commands_per_worker_s": 1.5})
    o = Overhead(0.001, 0.0005, "probe", n=100, detail={"pickup_mean": 0.001, "in_slot_mean": 0.0015,
                                                       "utilization": 0.08}, redis=cost)
    text = _probe_text(o)
    assert "redis_cpu_per_job_us = 120.50" in text and "redis_idle_us_per_worker = 9.250" in text
    assert (o.engine().redis_cpu_per_job_us, o.engine().redis_idle_us_per_worker) == (120.5, 9.25)
    assert o.as_dict()["redis"]["cpu_per_job_us"] == 120.5


@pytest.mark.parametrize(("utilization", "ceiling", "said"), [
    (0.85, 0.7, "implies 85% of one Redis core"),  # whole percentages tell them apart
    (0.012, 0.01, "implies 1.2% of one Redis core"),  # (it read "1% ..., above the ceiling of 1%")
    (0.0013, 0.001, "implies 0.13% of one Redis core"),  # (it read "0% ..., above the ceiling of 0%")
])
def test_a_warning_shows_the_share_and_the_ceiling_apart(utilization: float, ceiling: float, said: str) -> None:
    from qsim.spec.redis_cost import RedisLoad, describe

    load = RedisLoad(cpu_per_job_us=50.0, utilization=utilization, throughput=utilization * 2e4, workers=3,
                     ceiling=ceiling, source="default")
    warning = load.warning()
    assert warning is not None and said in warning
    shown = warning.split("implies ")[1].split("%")[0], warning.split("ceiling of ")[1].split("%")[0]
    assert float(shown[0]) > float(shown[1])
    assert float(describe(load.as_dict()).split("ceiling ")[1].split("%")[0]) == pytest.approx(ceiling * 100)
