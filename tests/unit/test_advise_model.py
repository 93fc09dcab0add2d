"""qsim.advise without Redis: advice from a calibration of model-made jobs, limits said in words,
the capacity arithmetic, the JSON/repr, what --watch calls a change, and the CLI's bad input."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from qsim.advise import Advice, Unavailable, advise_from, changes, parse_window
from qsim.advise.capacity import EXIT_MARGIN, attempts_per_job, search_range, shutdown_for
from qsim.analysis.plan import plan
from qsim.analysis.slo.language import parse_slo
from qsim.analysis.theory import mmc_wait_quantile
from qsim.calibrate import Calibration, from_frame
from qsim.cli import main
from qsim.cli.common import finite
from qsim.errors import ScenarioError
from qsim.model import simulate
from qsim.spec.redis_cost import describe
from qsim.spec.scenario import QueueSpec, RateLimit, Scenario

RATE, MEAN, CONC = 10.0, 0.5, 2
FAST = {"replications": 5, "jobs_per_run": 5000, "processes": 1}


@pytest.fixture(scope="module")
def cal() -> Calibration:
    """An M/M/c queue's jobs (10/s, exponential 0.5 s, 4 workers x 2), calibrated: the 'measured' window."""
    s = Scenario.from_dict({
        "name": "mmc", "seed": 3, "duration": 300.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "arrival": {"kind": "poisson", "rate": RATE},
                  "service": {"kind": "exponential", "mean": MEAN}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4, "concurrency": CONC}]})
    return from_frame(simulate(s, seed=1).records.jobs)


def with_queue(cal: Calibration, **limits: object) -> Calibration:
    queue = QueueSpec(name="q", **limits)  # type: ignore[arg-type]
    return dataclasses.replace(cal, scenario=dataclasses.replace(cal.scenario, queues=(queue,)))


def test_recommendation_agrees_with_erlang_c(cal: Calibration) -> None:
    # Given p95 wait <= 0.6 s: Erlang C says 3 workers x 2 give 1.23 s and 4 give 0.20 s
    assert mmc_wait_quantile(0.95, 3 * CONC, RATE, 1 / MEAN) > 0.6 > mmc_wait_quantile(0.95, 4 * CONC, RATE, 1 / MEAN)
    # When advised (auto replications: intervals decide)
    a = advise_from(cal, "p95_wait<=0.6", processes=1, jobs_per_run=5000)
    # Then the least count meeting it is 4, at the observed concurrency, with the measured figures beside it
    assert (a.recommended_workers, a.concurrency, a.current_workers, a.reason) == (4, CONC, 4, None)
    assert a.arrival_rate == pytest.approx(RATE, rel=0.08)
    assert a.offered_load == pytest.approx(RATE * MEAN, rel=0.1)
    assert a.utilization == pytest.approx(RATE * MEAN / (4 * CONC), rel=0.1)
    assert a.predicted is not None and a.predicted["wait"]["p95"] < 0.6
    lo, hi = a.search["workers"]
    assert lo == 3 and hi >= 8  # 2 workers have fewer slots than the load: not simulated


def test_advice_is_the_plan_of_its_own_scenario(cal: Calibration) -> None:
    a = advise_from(cal, "p95_wait<=0.6", **FAST)
    lo, hi = a.search["workers"]
    again = plan(a.scenario, [parse_slo("p95_wait<=0.6")], {a.search["path"]: list(range(lo, hi + 1))}, seed=0,
                 replications=5, search="auto", processes=1)
    assert again["recommended"] == {a.search["path"]: a.recommended_workers}
    assert a.plan is not None and a.plan["recommended"] == again["recommended"]
    # the planned scenario runs long enough for the asked jobs per run, a tenth of it warm-up
    assert a.scenario.duration * RATE == pytest.approx(5000, rel=0.1)
    assert a.scenario.warmup == pytest.approx(a.scenario.duration / 10)
    assert a.scenario.pool("p").concurrency == CONC


def test_a_rate_limit_below_the_arrivals_is_said_in_words(cal: Calibration) -> None:
    a = advise_from(with_queue(cal, rate_limit=RateLimit(max=5, per=1.0)), "p95_wait<=2", **FAST)
    assert a.recommended_workers is None and a.plan is None and a.search["runs"] == 0
    assert a.reason is not None and "rate limit of 5 per 1 s" in a.reason and "whatever the number" in a.reason
    doc = a.as_json()
    assert doc["recommended_workers"] is None and doc["reason"] == a.reason and doc["concurrency"] == CONC
    assert "no worker count can meet p95_wait<=2" in repr(a)
    # no recommendation: no Redis load either
    assert doc["redis"] is None and "redis:" not in repr(a)


def test_a_concurrency_limit_below_the_load_is_said_in_words(cal: Calibration) -> None:
    a = advise_from(with_queue(cal, concurrency_limit=4), "p95_wait<=2", **FAST)
    assert a.recommended_workers is None and a.search["runs"] == 0
    assert a.reason is not None and "concurrency limit of 4" in a.reason


def test_a_concurrency_limit_caps_the_search(cal: Calibration) -> None:
    # Given a limit of 8 jobs at once: more than 4 workers x 2 add nothing
    limited = with_queue(cal, concurrency_limit=8)
    a = advise_from(limited, "p95_wait<=0.6", **FAST)
    assert a.search["workers"] == [3, 4] and a.recommended_workers == 4
    # When the SLO needs more than the limit allows: none, in words, not a huge number
    b = advise_from(limited, "p95_wait<=0.01", **FAST)
    assert b.recommended_workers is None and b.reason is not None
    assert b.reason.startswith("no worker count from 3 to 4") and "concurrency limits" in b.reason


def test_an_slo_below_the_service_time_is_met_by_no_count(cal: Calibration) -> None:
    a = advise_from(cal, "p95_latency<=0.1", **FAST)
    assert a.recommended_workers is None and a.reason is not None
    assert "no worker count from 3 to" in a.reason and "p95_latency" in a.reason
    b = advise_from(cal, "p95_wait<=2", max_workers=2, **FAST)
    assert b.recommended_workers is None and b.reason is not None and "--max-workers 2" in b.reason


def test_redis_load_of_the_recommendation_and_its_ceiling(cal: Calibration) -> None:
    a = advise_from(cal, "p95_wait<=0.6", **FAST)
    r = a.as_json()["redis"]
    # priced at the recommendation's workers and the queue's rate, as the plan of its scenario prices it
    assert a.plan is not None and r == a.plan["redis"] and r["workers"] == a.recommended_workers
    assert r["throughput"] == pytest.approx(RATE, rel=0.1) and r["source"] == "default"
    assert r["utilization"] == pytest.approx(r["throughput"] * r["cpu_per_job_us"] / 1e6, rel=0.05)
    assert not r["above_ceiling"] and not any(w.startswith("Redis:") for w in a.warnings)
    assert [line.strip() for line in repr(a).splitlines() if line.strip().startswith("redis: ")] == [describe(r)]
    # a costlier Redis above a lower ceiling: flagged, the same sentence in the warnings and the text
    b = advise_from(cal, "p95_wait<=0.6", redis_cpu_per_job_us=1e6 / RATE, redis_ceiling=0.5, **FAST)
    rb = b.as_json()["redis"]
    assert b.recommended_workers == a.recommended_workers and rb["above_ceiling"] and rb["ceiling"] == 0.5
    assert rb["source"] == "--redis-cpu-per-job" and rb["utilization"] > 0.9
    assert any(w.startswith("Redis: the recommended point implies") for w in b.warnings)
    assert "ABOVE the ceiling 50%" in repr(b)
    with pytest.raises(ScenarioError, match="--redis-ceiling must be a share of one Redis core"):
        advise_from(cal, "p95_wait<=0.6", redis_ceiling=1.5, **FAST)


def test_json_repr_html_and_toml(cal: Calibration, tmp_path: Path) -> None:
    a = advise_from(cal, ["p95_wait<=0.6", "utilization<=0.9"], concurrency=3, window="5m", **FAST)
    doc = a.as_json()
    json.dumps(finite(doc), allow_nan=False)
    assert doc["concurrency"] == 3 and doc["observed_concurrency"] == CONC and doc["slo"] == ["p95_wait<=0.6",
                                                                                             "utilization<=0.9"]
    assert doc["recommended_workers"] == a.recommended_workers and isinstance(a.recommended_workers, int)
    assert set(doc) >= {"arrival_rate", "service", "utilization", "current_workers", "predicted", "shutdown",
                        "measured", "window", "plan_command", "scenario"}
    assert repr(a).splitlines()[0] == f"queue 'q' needs {a.recommended_workers} workers x 3 for p95_wait<=0.6 " \
                                      f"and utilization<=0.9 (now 4)"
    assert "in the last 5m" in repr(a) and "<table" in a._repr_html_()
    path = tmp_path / "advised.toml"
    s = a.write(path)
    assert Scenario.from_toml(path) == s and s.pool("p").concurrency == 3
    assert "Planned by `qsim advise`" in path.read_text()
    assert a.plan_command(str(path)).startswith(f"qsim plan {path} --slo \"p95_wait<=0.6\" --slo \"utilization<=0.9\"")
    slim = a.light()
    assert len(slim.calibration.measured.jobs) == 0 and slim.line() == a.line() and slim.as_json()["window"] == \
        doc["window"]


def test_what_watch_calls_a_change(cal: Calibration) -> None:
    a = advise_from(cal, "p95_wait<=0.6", **FAST)
    assert changes(None, a) == ["first"] and changes(a, a) == []
    assert changes(a, dataclasses.replace(a, arrival_rate=a.arrival_rate * 1.05)) == []
    moved = changes(a, dataclasses.replace(a, arrival_rate=a.arrival_rate * 1.2, recommended_workers=5))
    assert moved[0] == "recommended 4 -> 5" and moved[1].startswith("arrival ")
    assert changes(a, dataclasses.replace(a, utilization=a.utilization + 0.06))[0].startswith("utilization")
    assert changes(a, dataclasses.replace(a, current_workers=6)) == ["workers 4 -> 6"]
    gone = Unavailable(("q",), "no jobs in queue 'q' in the last 15m (--window)", 0.0)
    assert changes(a, gone) == ["no advice"] and changes(gone, gone) == [] and changes(gone, a) == ["advice again"]
    assert gone.as_json()["recommended_workers"] is None and "no jobs" in gone.line()


def test_capacity_arithmetic(cal: Calibration) -> None:
    f = next(iter(cal.types.values()))
    flaky = dataclasses.replace(f, attempts=3, failures=dataclasses.replace(f.failures, fail_prob=0.5,
                                                                           poison_prob=0.1))
    assert attempts_per_job(flaky) == pytest.approx(0.9 * 1.75 + 0.1 * 3)
    assert search_range(4.9, 2, 4, max_workers=500) == (3, 10)  # 3: the least with more slots than 4.9; 3 + 7
    assert search_range(4.9, 2, 4, max_workers=6) == (3, 6)
    assert search_range(4.9, 2, 4, max_workers=500, cap=4) == (3, 4)
    assert search_range(0.01, 4, 1, max_workers=500) == (1, 8)
    # the drain: the longest measured run x 1.5 without timeouts; the timeout when every type has one
    sd = shutdown_for(cal, cal.pools[0])
    assert sd.source.startswith("the longest measured run") and sd.shutdown_grace >= 1
    timed = dataclasses.replace(cal, types={k: dataclasses.replace(v, timeout=30.0) for k, v in cal.types.items()})
    sd = shutdown_for(timed, cal.pools[0], pre_stop=5)
    assert (sd.shutdown_grace, sd.termination_grace_period_seconds) == (30, math.ceil(30 + 5 + EXIT_MARGIN))


@pytest.mark.parametrize("text, seconds", [("15m", 900.0), ("90", 90.0), ("1h30m", 5400.0), ("45s", 45.0)])
def test_window(text: str, seconds: float) -> None:
    assert parse_window(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["2x", "0s", "-5", "2024-01-01", ""])
def test_bad_window(text: str) -> None:
    with pytest.raises(ScenarioError, match="--window must be a duration"):
        parse_window(text)


@pytest.mark.parametrize("argv, message", [
    (["--slo", "p95_wat<=2"], "--slo 'p95_wat<=2': unknown metric 'p95_wat'; use one of"),
    (["--slo", "p95_wait<=2", "--window", "soon"], "--window must be a duration"),
    (["--slo", "p95_wait<=2", "--metrics-port", "9999"], "--metrics-port needs --watch"),
    (["--slo", "p95_wait<=2", "--from", "bullmq", "--group", "g"], "--group applies only to --from qsim"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["advise", "--redis", "redis://127.0.0.1:1/0", "--queue", "q", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--advise-slo", "p95_wait<=2"], "--advise-slo needs --metrics-port"),
    # the messages name qsim worker's own options, not qsim advise's (--slo, --window)
    (["--advise-slo", "p95_wait<=", "--metrics-port", "9999"],
     "--advise-slo 'p95_wait<=': no number after '<='; write it like p95_wait<=2"),
    (["--advise-slo", "p95_wait<=2", "--advise-window", "1y", "--metrics-port", "9999"],
     "--advise-window must be a duration"),
])
def test_worker_advise_options_bad_input(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["worker", "stepped_load:sleep_handler", "--queue", "q", "--redis", "redis://127.0.0.1:1/0", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "--slo " not in err and "--window " not in err


def test_advice_type_is_exported() -> None:
    import qsim.advise

    assert qsim.advise.Advice is Advice and "advise" in qsim.advise.__all__
