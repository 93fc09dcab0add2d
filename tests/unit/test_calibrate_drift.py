"""Calibrate tells drift from bursts: a changing rate comes out as a rate profile, batches as bursts,
a stationary stream as poisson (qsim/calibrate/drift.py, qsim/calibrate/arrivals.py), on drawn arrivals,
on the model's job records, and from a CSV through the command line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qsim.calibrate as cal
from qsim.calibrate.arrivals import fit_arrivals
from qsim.calibrate.drift import DAY, constant_rate_test, fit_profile, window_counts
from qsim.cli import main
from qsim.model import simulate
from qsim.spec import dists
from qsim.spec.scenario import Scenario

from drift_cases import DRIFT, RAMP, SPAN, STEP, STOPPED, check_recovery

# --------------------------------------------------------------------------- drawn arrivals


@pytest.mark.parametrize("seed", [1, 2])
def test_step_and_ramp_are_profiles_not_bursts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    fits = {"step": fit_arrivals(dists.ProfileArrivals(profile=STEP).times(rng, SPAN), 0.0, SPAN),
            "ramp": fit_arrivals(dists.ProfileArrivals(profile=RAMP).times(rng, SPAN), 0.0, SPAN),
            "steady": fit_arrivals(dists.PoissonArrivals(rate=20.0).times(rng, SPAN), 0.0, SPAN),
            "batches": fit_arrivals(dists.BurstArrivals(rate=4.0, size=20).times(rng, SPAN), 0.0, SPAN),
            "stopped": fit_arrivals(dists.ProfileArrivals(profile=STOPPED).times(rng, SPAN), 0.0, SPAN)}
    check_recovery(fits, SPAN)
    step, ramp = fits["step"], fits["ramp"]
    assert ramp.profile is not None and ramp.profile.shape == "linear" and ramp.drift is not None
    assert step.p_change < 1e-3 and step.drift is not None and step.drift.p_fit > 0.01
    # what the queue gets now (advise plans on it) and at the peak
    assert step.latest_rate == pytest.approx(10.0, rel=0.15) and step.peak_rate == pytest.approx(40.0, rel=0.1)
    assert ramp.latest_rate == pytest.approx(50.0, rel=0.15)
    # the scenario's arrival is the profile; its mean rate is the window's
    proc = step.process()
    assert isinstance(proc, dists.ProfileArrivals) and proc.rate == pytest.approx(step.n / SPAN, rel=1e-3)
    assert step.as_dict()["arrival"]["kind"] == "profile" and step.as_dict()["arrival"]["shape"] == "step"


#: A morning ramp 10 -> 50 jobs/s cut off at 240 s (a feature switched off): back to 10 jobs/s.
RAMP_STEP = dists.RateProfile(points=((0.0, 10.0), (240.0, 50.0), (240.0, 10.0), (360.0, 10.0)), shape="linear")


@pytest.mark.parametrize("seed", [1, 2])
def test_a_ramp_then_a_step_is_piecewise_linear_with_a_jump(seed: int, tmp_path: Path) -> None:
    # Given arrivals whose rate ramps from 10 to 50 jobs/s over 240 s, then drops back to 10
    t = dists.ProfileArrivals(profile=RAMP_STEP).times(np.random.default_rng(seed), SPAN)
    # When calibrated
    fit = fit_arrivals(t, 0.0, SPAN)
    # Then the profile is piecewise linear with one jump at 240 s, chosen by BIC over steps and a jump-less line
    d, prof = fit.drift, fit.profile
    assert fit.kind == "profile" and d is not None and prof is not None, fit.note
    assert min(d.bic, key=d.bic.__getitem__) == "linear-jumps" and d.model == "linear" and prof.shape == "linear"
    assert d.bic["linear-jumps"] < min(d.bic["steps"], d.bic["linear"]) - 10, d.bic
    (jump,) = prof.jumps
    assert jump == pytest.approx(240.0, abs=1.0) and d.change_points == (jump,) and d.segments == 2
    assert "jumping at" in fit.note
    # with the ramp's ends and the rate after the jump, and each minute's rate, within 10% of the truth
    assert prof.rate_at(0.0) == pytest.approx(10.0, rel=0.15) and d.peak == pytest.approx(50.0, rel=0.1)
    assert fit.latest_rate == pytest.approx(10.0, rel=0.15)
    errors = [abs(prof.mean_between(a, a + 60.0) / RAMP_STEP.mean_between(a, a + 60.0) - 1)
              for a in np.arange(0.0, SPAN, 60.0)]
    assert max(errors) < 0.10, errors
    # And the scenario written with it holds the jump (two points at one time) and runs as is
    path = tmp_path / "ramp-step.csv"
    pd.DataFrame({"type": "j", "enqueued": t, "started": t + 0.001, "finished": t + 0.002}).to_csv(path, index=False)
    toml = tmp_path / "ramp-step.toml"
    assert main(["calibrate", "--from", "csv", str(path), "--out", str(toml)]) == 0
    arrival = Scenario.from_toml(toml).job("j").arrival
    assert isinstance(arrival, dists.ProfileArrivals) and len(arrival.profile.jumps) == 1
    assert "linear-jumps" in toml.read_text()


@pytest.mark.parametrize("rate", [0.5, 5.0, 50.0, 500.0])
def test_stationary_poisson_stays_poisson(rate: float) -> None:
    for seed in range(5):
        t = dists.PoissonArrivals(rate=rate).times(np.random.default_rng(100 + seed), 300.0)
        fit = fit_arrivals(t, 0.0, 300.0)
        assert fit.kind == "poisson" and fit.drift is None, (rate, seed, fit.p_change, fit.note)
        assert fit.p_change >= 1e-3


def test_batches_stay_bursts_with_near_identical_stamps() -> None:
    rng = np.random.default_rng(3)
    exact = dists.BurstArrivals(rate=4.0, size=20).times(rng, 300.0)
    # a producer adding a batch job by job: the stamps of one batch spread over a few milliseconds
    spread = exact + np.tile(np.arange(20) * 2.5e-4, exact.size // 20)
    for t in (exact, spread):
        fit = fit_arrivals(t, 0.0, 300.0)
        assert (fit.kind, fit.size, fit.profile) == ("burst", 20, None), fit.note
        assert fit.p_batch < 1e-3 and fit.batch_mean == pytest.approx(20.0)


def test_batches_at_a_changing_rate_are_a_profiled_burst() -> None:
    truth = dists.RateProfile(points=((0.0, 20.0), (100.0, 80.0), (200.0, 80.0)), shape="step")
    t = dists.BurstArrivals(size=10, profile=truth).times(np.random.default_rng(0), 200.0)
    fit = fit_arrivals(t, 0.0, 200.0)
    assert fit.kind == "burst" and fit.size == 10 and fit.profile is not None
    proc = fit.process()
    assert isinstance(proc, dists.BurstArrivals) and proc.profile is not None
    assert proc.profile.rate_at(50.0) == pytest.approx(20.0, rel=0.05)
    assert proc.profile.rate_at(150.0) == pytest.approx(80.0, rel=0.05)
    assert fit.latest_rate == pytest.approx(80.0, rel=0.05)


def test_a_day_repeated_is_an_hour_of_day_profile() -> None:
    truth = dists.RateProfile(points=tuple((h * 3600.0, 0.5 + 0.4 * math.sin(2 * math.pi * h / 24))
                                           for h in range(24)), shape="linear", period=DAY)
    origin = 1_700_000_000.0 - (1_700_000_000.0 % DAY)  # a Unix midnight (UTC)
    t = dists.ProfileArrivals(profile=truth).times(np.random.default_rng(4), 3 * DAY)
    fit = fit_arrivals(origin + t, origin, origin + 3 * DAY)
    assert fit.kind == "profile" and fit.drift is not None and fit.drift.model == "daily"
    prof = fit.profile
    assert prof is not None and prof.period == DAY
    for h in range(0, 24, 3):  # hour by hour within 10% (about 5,400 arrivals per hour of the day)
        a = h * 3600.0
        assert prof.mean_between(a, a + 3600) == pytest.approx(truth.mean_between(a, a + 3600), rel=0.1), h


def test_the_penalised_fit_and_its_test_directly() -> None:
    # constant counts: nothing to fit; a stop: two steps, the second at rate 0
    rel = np.sort(np.random.default_rng(1).uniform(0, 100.0, 2000))
    counts, edges = window_counts(rel, 100.0)
    assert not constant_rate_test(rel, 100.0, counts).changed
    stop = rel[rel < 30.0]
    counts, edges = window_counts(stop, 100.0)
    test = constant_rate_test(stop, 100.0, counts)
    fit = fit_profile(stop, 100.0, counts, edges)
    assert test.changed and test.p_ks < 1e-10
    assert fit.model == "steps" and fit.segments == 2 and fit.change_points[0] == pytest.approx(30.0, abs=0.1)
    assert fit.profile is not None and fit.profile.points[-1] == (100.0, 0.0) and fit.latest == 0.0
    assert min(fit.bic, key=fit.bic.__getitem__) == "steps" and fit.bic["steps"] < fit.bic["constant"]


# --------------------------------------------------------------------------- the model


def test_model_runs_are_recovered(tmp_path: Path) -> None:
    # Given the drift scenario run on the model
    s = Scenario.from_dict(DRIFT)
    jobs = simulate(s).jobs
    # When calibrated from its job records
    c = cal.from_frame(jobs[["type", "enqueued", "started", "finished"]])
    # Then each type comes back as it was made
    figures = check_recovery({t: f.arrival for t, f in c.types.items()}, c.window[1] - c.window[0],
                             offset=-c.window[0])
    print("model recovery:", figures)
    # and the written scenario runs the profiles
    path = tmp_path / "drift.toml"
    written = c.write(path)
    assert written.job("step").arrival.kind == "profile"  # type: ignore[union-attr]
    assert "rate profile (steps, by BIC" in path.read_text()
    again = simulate(written).jobs
    n = (again["type"] == "step").sum()
    assert n == pytest.approx(STEP.cumulative(SPAN), rel=0.1)
    pngs = c.plots(tmp_path / "plots")
    assert {p.name for p in pngs} == {"step.png", "ramp.png", "steady.png", "batches.png", "stopped.png"}


# --------------------------------------------------------------------------- the CSV case


def test_a_type_that_stopped_is_a_profile_not_a_burst(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a CSV of a 560 s window where one Poisson type stopped arriving at 150 s
    rng = np.random.default_rng(9)
    kept = dists.PoissonArrivals(rate=5.0).times(rng, 560.0)
    stopped = dists.PoissonArrivals(rate=10.0).times(rng, 150.0)
    rows = pd.DataFrame({"type": ["kept"] * kept.size + ["stopped"] * stopped.size,
                         "enqueued": np.concatenate([kept, stopped])})
    rows["started"] = rows["enqueued"] + 0.001
    rows["finished"] = rows["started"] + rng.exponential(0.05, len(rows))
    path = tmp_path / "jobs.csv"
    rows.sort_values("enqueued").to_csv(path, index=False)
    # When calibrated from the command line
    out = tmp_path / "cal.toml"
    code = main(["calibrate", "--from", "csv", str(path), "--out", str(out), "--plots", str(tmp_path / "plots"),
                 "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    # Then the type that stopped is a step profile that drops to 0 at 150 s, with its test in the report
    fit = doc["fits"]["stopped"]
    arrival = fit["arrival"]
    assert arrival["kind"] == "profile" and arrival["shape"] == "step"
    (t0, r0), (t1, r1) = arrival["points"][:2]
    assert t0 == pytest.approx(0.0, abs=0.5) and r0 == pytest.approx(10.0, rel=0.1)
    assert t1 == pytest.approx(150.0, abs=0.5) and r1 == 0
    assert fit["arrival_fit"]["p_change"] < 1e-3 and "size" not in arrival
    assert doc["fits"]["kept"]["arrival"]["kind"] == "poisson"
    # and the TOML runs as is: nothing of that type arrives after 150 s
    s = Scenario.from_toml(out)
    assert s.to_dict() == doc["scenario"]
    jobs = simulate(s).jobs
    late = jobs[(jobs["type"] == "stopped")]["enqueued"]
    assert late.max() < 151.0 and len(late) == pytest.approx(1500, rel=0.1)
    assert (tmp_path / "plots" / "stopped.png").stat().st_size > 10_000


# --------------------------------------------------------------------------- advise plans on the same fit


def test_advise_plans_on_the_latest_rate_of_a_profile() -> None:
    from qsim.advise import advise_from
    from qsim.advise.core import steady_calibration
    from qsim.analysis.theory import mmc_wait_quantile

    # Given a queue whose rate stepped from 5/s to 20/s half-way through the window (exponential 0.25 s),
    # and another type that stopped arriving
    s = Scenario.from_dict({
        "name": "stepped", "seed": 3, "duration": 300.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 0.25},
                  "arrival": {"kind": "profile", "points": [[0, 5.0], [150, 20.0], [300, 20.0]], "shape": "step"}},
                 {"name": "gone", "queue": "q", "service": {"kind": "exponential", "mean": 0.01},
                  "arrival": {"kind": "profile", "points": [[0, 2.0], [100, 0.0], [300, 0.0]], "shape": "step"}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 6, "concurrency": 2}]})
    c = cal.from_frame(simulate(s, seed=1).records.jobs)
    assert c.types["j"].arrival.kind == "profile" and c.types["gone"].arrival.kind == "profile"
    # p95 wait <= 0.3 s: at 20/s Erlang C needs 8 slots (4 workers x 2); at the window's mean (12.5/s) 6 would do
    assert mmc_wait_quantile(0.95, 6, 20.0, 4.0) > 0.3 > mmc_wait_quantile(0.95, 8, 20.0, 4.0)
    assert mmc_wait_quantile(0.95, 6, 12.5, 4.0) < 0.3
    # When advised
    a = advise_from(c, "p95_wait<=0.3", concurrency=2, replications=5, jobs_per_run=5000, processes=1)
    # Then it planned on the latest rate (a stationary arrival at it), and says so
    assert a.arrival_rate == pytest.approx(20.0, rel=0.08)
    assert a.recommended_workers == 4
    assert a.scenario.job("j").arrival.kind == "poisson" and a.scenario.job("gone").arrival is None
    assert any("'j': the rate changed within the window" in w and "latest rate" in w for w in a.warnings)
    steady, notes = steady_calibration(c)
    assert len(notes) == 2 and steady.types["gone"].arrival.rate == 0.0
