"""Calibration at the edges of its input: impossible CSV rows, odd names, the KS p-value, and where the
pickup goes for a source other than qsim's own engine."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from qsim import Scenario
from qsim.calibrate import from_csv, from_frame
from qsim.calibrate.overhead import BETWEEN_RUNS, LATENCY
from qsim.calibrate.service import bootstrap_ks_p, fit_service
from qsim.cli import main
from qsim.errors import CalibrationError
from qsim.model import simulate


def queue_csv(path: Path, *, n: int, rate: float, slots: int, run_mean: float = 0.05, pickup: float = 0.01,
              holds_slot: bool = False, seed: int = 1, name: str = "cut") -> Path:
    """A CSV of one queue served by ``slots`` slots in FIFO order: Poisson arrivals, runs exactly exponential
    with mean ``run_mean``, pickups uniform within 20% of ``pickup``. ``holds_slot``: the pickup holds the
    slot that takes the job, between the runs (start = slot free + pickup); else it is a latency that holds
    none (start = max(enqueue + pickup, slot free))."""
    rng = np.random.default_rng(seed)
    enq = np.cumsum(rng.exponential(1 / rate, n))
    pick = rng.uniform(0.8 * pickup, 1.2 * pickup, n)
    run = rng.exponential(run_mean, n)
    free = np.zeros(slots)
    start, fin = np.empty(n), np.empty(n)
    for i in range(n):
        k = int(np.argmin(free))
        start[i] = max(enq[i], free[k]) + pick[i] if holds_slot else max(enq[i] + pick[i], free[k])
        fin[i] = free[k] = start[i] + run[i]
    pd.DataFrame({"type": name, "enqueued": enq, "started": start, "finished": fin}).to_csv(path, index=False)
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["calibrate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- the overhead per source


def test_a_csv_pickup_is_a_latency_and_the_runs_keep_their_distribution(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Given a CSV whose runs are exactly exponential with mean 50 ms and whose pickups take about 10 ms
    # (10,000 jobs at 4/s on 4 slots: mostly idle, so the low-load pickups are seen)
    path = queue_csv(tmp_path / "jobs.csv", n=10_000, rate=4.0, slots=4)
    df = pd.read_csv(path)
    runs = (df["finished"] - df["started"]).to_numpy()
    # When calibrated (the CLI, as a user runs it)
    code, out, err = cli(capsys, "--from", "csv", str(path), "--out", str(tmp_path / "cal.toml"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    fit, overhead = doc["fits"]["cut"], doc["overhead"]
    # Then the fitted service is the runs' own distribution: exponential (or a gamma of cv 1, the same thing
    # to 3%), mean within 3% of theirs and of 50 ms, and a KS p-value (parametric bootstrap) that does not
    # reject it
    assert fit["service"]["kind"] == "exponential" or (fit["service"]["kind"] == "gamma" and
                                                       fit["service"]["cv"] == pytest.approx(1.0, rel=0.03)), fit
    assert fit["service"]["mean"] == pytest.approx(runs.mean(), rel=0.03)
    assert fit["service"]["mean"] == pytest.approx(0.050, rel=0.03)
    assert fit["ks_p"] >= 0.05 and fit["shift"] == 0.0, fit
    assert "parametric bootstrap" in fit["ks_p_method"]
    # and the pickup (not known to hold a slot in a CSV) belongs to the wait: pickup_latency, no fetch_overhead
    assert overhead["treatment"] == LATENCY and overhead["in_run"] is False
    assert overhead["pickup_latency"] == pytest.approx(0.010, rel=0.05)
    assert overhead["fetch_overhead"] == 0.0 and overhead["ack_overhead"] == 0.0
    # and the scenario written predicts the measured wait and latency (p50s within 5%)
    s = Scenario.from_toml(tmp_path / "cal.toml")
    assert s.engine.pickup_latency == pytest.approx(overhead["pickup_latency"])
    model = simulate(s).summary
    wait, latency = df["started"] - df["enqueued"], df["finished"] - df["enqueued"]
    assert model["wait"]["p50"] == pytest.approx(wait.median(), rel=0.05)
    assert model["latency"]["p50"] == pytest.approx(latency.median(), rel=0.05)


def test_a_pickup_that_holds_the_slot_shows_in_the_handovers(tmp_path: Path) -> None:
    # Given a CSV where the pickup does hold a slot, between the runs, and enough load for jobs to wait
    path = queue_csv(tmp_path / "jobs.csv", n=10_000, rate=55.0, slots=4, holds_slot=True, seed=2)
    c = from_csv(path)
    # Then the data prove it: the pickup is fetch_overhead between runs, and the runs are still fitted as measured
    o = c.overhead
    assert o.treatment == BETWEEN_RUNS and not o.in_run and o.pickup_latency == 0.0
    assert o.fetch_overhead == pytest.approx(0.010, rel=0.1) and o.detail["handovers"] >= 30
    assert c.types["cut"].service.mean == pytest.approx(0.050, rel=0.03) and c.types["cut"].service.shift == 0.0
    # while the same load with a pickup that holds no slot keeps it a latency
    free = from_csv(queue_csv(tmp_path / "free.csv", n=10_000, rate=55.0, slots=4, seed=2))
    assert free.overhead.treatment == LATENCY and free.overhead.detail["handover_gap_p50"] < 0.001


def test_the_model_adds_a_pickup_latency_to_every_wait() -> None:
    base = Scenario.from_dict({"name": "mmc", "seed": 3, "duration": 300.0, "queues": [{"name": "q"}],
                               "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 7.0},
                                         "service": {"kind": "exponential", "mean": 0.5}}],
                               "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 4}]})
    late = Scenario.from_dict({**base.to_dict(), "engine": {"pickup_latency": 0.25}})
    a, b = simulate(base).jobs, simulate(late).jobs
    # the same jobs, each taken exactly 0.25 s later: the queueing is the same, shifted (a constant delay
    # before every arrival changes no order), holding no slot (the run times are unchanged)
    assert np.allclose(b["enqueued"], a["enqueued"])
    assert np.allclose(b["started"] - b["enqueued"], a["started"] - a["enqueued"] + 0.25)
    assert np.allclose(b["finished"] - b["started"], a["finished"] - a["started"])
    assert simulate(late, records=False).summary["wait"]["mean"] == pytest.approx(
        simulate(base, records=False).summary["wait"]["mean"] + 0.25, rel=1e-6)


# ----------------------------------------------------------------------------- the KS p-value


def test_the_ks_p_value_is_a_parametric_bootstrap_and_holds_its_level() -> None:
    rng = np.random.default_rng(5)
    boot, naive = [], []
    for _ in range(40):
        x = rng.exponential(0.05, 400)
        boot.append(bootstrap_ks_p("exponential", x, seed=1)[0])
        naive.append(stats.kstest(x, stats.expon(scale=x.mean()).cdf).pvalue)  # parameters from the same data
    # Under the null the bootstrap p is uniform (mean 1/2, about 5% below 0.05); the textbook p with fitted
    # parameters is far too kind (Lilliefors): its mean is well above 1/2 and it almost never rejects
    assert 0.35 < np.mean(boot) < 0.65 and np.mean(np.array(boot) < 0.05) <= 0.15
    assert np.mean(naive) > np.mean(boot) + 0.1 and np.mean(np.array(naive) < 0.05) < 0.03
    # and it has power: gamma(cv 0.7) runs are not exponential
    assert bootstrap_ks_p("exponential", rng.gamma(2.0, 0.025, 2000))[0] < 0.01
    # a large sample: a random 5,000 of them, said so
    fit = fit_service(rng.lognormal(-3, 0.8, 20_000))
    assert fit.kind == "lognormal" and fit.ks_p_n == 5000 and "a random 5000 of the 20000 runs" in fit.p_method


# ----------------------------------------------------------------------------- impossible rows


HEAD = "type,enqueued,started,finished,attempts\n"
GOOD = "".join(f"a,{i},{i + 0.1},{i + 0.5},1\n" for i in range(40))


@pytest.mark.parametrize("row, said", [
    ("a,50,50.2,50.1,1", "finished (50.1) is before started (50.2): a negative run time"),
    ("a,50,49,50.5,1", "started (49.0) is before enqueued (50.0): the job ran before it existed"),
    ("a,50,,49,1", "finished (49.0) is before enqueued (50.0)"),
    ("a,50,50.1,inf,1", "a time that is not finite"),
    ("a,,50.1,50.5,1", "enqueued is empty"),
    ("a,NaN,50.1,50.5,1", "enqueued is empty"),
    ("a,50,50.1,50.5,-1", "attempts, failed_attempts or timeout is negative"),
])
def test_an_impossible_row_is_refused_with_its_line_or_dropped_and_counted(
        row: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(HEAD + GOOD[: GOOD.index("a,5,")] + row + "\n" + GOOD[GOOD.index("a,5,"):])
    # Refused: exit 2, one line naming the file, the line (the header is line 1) and what is impossible
    code, out, err = cli(capsys, "--from", "csv", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{path} line 7: {said}" in err and "--drop-bad-rows" in err, err
    # With --drop-bad-rows: left out, and the warning counts it
    code, out, err = cli(capsys, "--from", "csv", str(path), "--drop-bad-rows", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["jobs"] == 40
    assert any(w.startswith(f"dropped 1 impossible row of 41 from {path}") and "(first at line 7)" in w
               for w in doc["warnings"]), doc["warnings"]


def test_impossible_rows_are_counted_per_kind(tmp_path: Path) -> None:
    df = pd.read_csv(queue_csv(tmp_path / "jobs.csv", n=200, rate=4.0, slots=2))
    df.loc[[3, 8], "finished"] = df.loc[[3, 8], "started"] - 0.01  # the case: finished < started
    df.loc[5, "started"] = df.loc[5, "enqueued"] - 1.0
    with pytest.raises(CalibrationError, match=r"line 5: finished .* is before started .* \(2 more impossible rows"):
        from_frame(df, label="t.csv")
    c = from_frame(df, label="t.csv", drop_bad_rows=True)
    assert len(c.measured.jobs) == 197
    assert c.warnings[0] == ("dropped 3 impossible rows of 200 from t.csv (--drop-bad-rows): 1 started before "
                             "enqueued (first at line 7), 2 finished before started (first at line 5)")
    # the fit is not dragged by the clamped negative runs: no "constant 5e-07 s"
    assert c.types["cut"].service.kind == "exponential" and c.types["cut"].service.mean > 0.03
    with pytest.raises(CalibrationError, match="--drop-bad-rows applies only to --from csv"):
        raise CalibrationError(_cli_problem(["--from", "qsim", "--queue", "q", "--drop-bad-rows"]))


def _cli_problem(argv: list[str]) -> str:
    from qsim.cli import build_parser
    from qsim.cli.calibrate import _check

    return _check(build_parser().parse_args(["calibrate", *argv])) or ""


# ----------------------------------------------------------------------------- names from measured data


def test_a_job_name_toml_must_escape_round_trips_through_the_cli(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    odd = "odd\x7fname\x00\u2028"
    path = queue_csv(tmp_path / "jobs.csv", n=300, rate=4.0, slots=2, name=odd)
    code, out, err = cli(capsys, "--from", "csv", str(path), "--out", str(tmp_path / "cal.toml"))
    assert code == 0, err
    s = Scenario.from_toml(tmp_path / "cal.toml")  # valid TOML: U+007F and NUL written as \u escapes
    assert [j.name for j in s.jobs] == [odd]
    assert main(["simulate", str(tmp_path / "cal.toml"), "--json"]) == 0
    capsys.readouterr()
    assert math.isfinite(s.job(odd).service.mean)


def test_times_in_milliseconds_are_named_not_fitted_or_a_traceback(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # Given a table whose times are epoch milliseconds (it crashed writing --out: year 55840 is out of range;
    # without --out it fitted jobs 1,000 times rarer and slower than they were)
    path = queue_csv(tmp_path / "jobs.csv", n=100, rate=4.0, slots=2)
    df = pd.read_csv(path)
    for c in ("enqueued", "started", "finished"):
        df[c] = (df[c] + 1.7e9) * 1000
    df.to_csv(path, index=False)
    for extra in ([], ["--out", str(tmp_path / "fit.toml")]):
        code, out, err = cli(capsys, "--from", "csv", str(path), *extra)
        # Then it is bad input, in one line naming the line, the column and the likely cause
        assert code == 2 and out == "" and "line 2: enqueued is 1.7e+12, not a time in seconds (milliseconds" in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "fit.toml").exists()


def test_a_time_beyond_the_calendar_is_shown_as_seconds() -> None:
    from qsim.calibrate.report import _when

    assert _when(1.7e9).endswith("UTC") and _when(9e15) == "9e+15 s"
