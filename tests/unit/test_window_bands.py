"""Per-window bands over replications (qsim.results.windows.window_bands) and their use in the autoscaled
model-vs-engine verdict (qsim.analysis.fidelity.autoscaling)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from qsim.analysis.fidelity.autoscaling import autoscaling_agreement, format_agreement
from qsim.analysis.fidelity.compare import BAND_JOBS, band_seeds
from qsim.results.windows import window_bands


def test_a_band_is_the_5_to_95_percentiles_of_the_replications_that_have_the_window() -> None:
    # Given 20 replications whose window 0 holds 0..19, window 1 a value in only a few, window 2 in one run
    runs: list[list[dict[str, Any]]] = [[{"wait_p95": float(i)}, {"wait_p95": 1.0 if i < 5 else None}]
                                        for i in range(20)]
    runs[0].append({"wait_p95": 3.0})
    bands = window_bands(runs, "wait_p95")
    # Then window 0's band is the 5th and 95th percentiles at ranks k / (n + 1) (a further value falls inside
    # 90% of the time): ranks 1.05 and 19.95 of 20; windows seen by fewer than half have none
    lo, hi = np.percentile(np.arange(20.0), [5, 95], method="weibull")
    assert (lo, hi) == pytest.approx((0.05, 18.95))
    assert bands[0] == pytest.approx((lo, hi))
    assert bands[1] is None and bands[2] is None
    assert window_bands([], "wait_p95") == []


def _doc(p95: list[float | None]) -> dict[str, Any]:
    trajectory = [[0.0, 2.0]]
    auto = {"trajectory": trajectory, "cut_jobs": 0, "scale_events": 0, "flaps": 0, "worker_seconds": 20.0}
    return {"windows": [{"wait_p95": x} for x in p95], "autoscaling": {"p": auto}, "jobs": {"lost": 0}}


def test_a_window_outside_the_tolerance_agrees_when_it_is_inside_the_models_band() -> None:
    # Given windows where the engine's p95 is 2x the model's seed run (outside 25% and 100 ms)
    model, engine = _doc([0.5, 0.5, 0.5, 0.5]), _doc([1.0, 1.0, 1.0, 3.0])
    # When judged by the tolerance alone, no window agrees
    plain = autoscaling_agreement(model, engine, duration=10.0)["p"]
    assert plain["windows_within"] == 0.0 and not plain["passed"]
    # Then with the model's bands over other seeds (the first three windows wide, the last one narrow)
    bands = [(0.4, 1.2), (0.4, 1.2), (0.4, 1.2), (0.4, 1.2)]
    banded = autoscaling_agreement(model, engine, duration=10.0, bands=bands, replications=20)["p"]
    assert banded["windows_within"] == 0.75 and not banded["passed"]  # 3.0 is outside every band
    assert "inside the model's 5-95% band over 20 seeds" in format_agreement({"p": banded})


def test_band_seeds_are_other_seeds_and_fewer_for_large_runs() -> None:
    assert band_seeds(7, 1000) == list(range(8, 28))
    assert len(band_seeds(7, BAND_JOBS // 8)) == 8
    assert len(band_seeds(7, BAND_JOBS * 10)) == 5


def test_compare_check_counts_a_window_inside_the_models_band_as_agreeing() -> None:
    from qsim.analysis.fidelity.check import Tolerance, check, check_document
    from qsim.analysis.fidelity.window_check import window_agreement
    from qsim.cli.output import format_check

    # Given the model's windows with bands over 20 seeds, and an engine 2x the model's seed run in 3 of them
    model = {"windows": [{"wait_p95": 0.5, "bands": {"wait_p95": [0.4, 1.2], "mean_wait": None}},
                         {"wait_p95": 0.5, "bands": {"wait_p95": [0.4, 1.2], "mean_wait": None}},
                         {"wait_p95": 0.5, "bands": {"wait_p95": [0.4, 0.6], "mean_wait": None}},
                         {"wait_p95": 0.5, "bands": {"wait_p95": None, "mean_wait": None}}]}
    engine = {"windows": [{"wait_p95": 1.0}, {"wait_p95": 0.55}, {"wait_p95": 1.0}, {"wait_p95": 1.0}]}
    # When judged by the tolerance alone, only the second agrees
    plain = window_agreement(model, engine, "windows.wait_p95", rel=0.2, abs_=0.05)
    assert plain["agreeing"] == 1 and "inside_band" not in plain
    # Then with the bands the first agrees too (inside its band, as the second); the third is outside its
    # narrow band and the fourth has none
    banded = window_agreement(model, engine, "windows.wait_p95", rel=0.2, abs_=0.05, banded=True)
    assert banded == {"compared": 4, "agreeing": 2, "share": 0.5, "worst": 2, "inside_band": 2, "banded": 3}
    # and the --check row says so, in its tolerance and its note
    tols = {"windows.wait_p95": Tolerance(0.2, 0.05, share=0.5)}
    rows = check(model, engine, tols, band_replications=20)
    assert rows[0].verdict == "pass" and rows[0].as_dict()["band_replications"] == 20
    text = format_check(check_document(rows))
    assert "±20% or 0.05 s or in the band in 50% of windows" in text
    assert "2 of 4 windows agree, 2 inside the model's 5-95% band over 20 seeds; worst: window 2" in text
    # without bands the row is as before
    assert "band" not in format_check(check_document(check(model, engine, tols)))


def test_a_comparison_of_a_profiled_scenario_bands_the_models_windows_over_other_seeds() -> None:
    from qsim.analysis.fidelity.compare import add_bands, compare_summaries, wants_bands
    from qsim.model import simulate
    from qsim.scenarios import load
    from qsim.spec.scenario import Scenario

    # Given a scenario whose arrivals follow a rate profile (its windows are checked), and one that does not
    s = Scenario.from_dict({
        "name": "ramp", "seed": 2, "duration": 120.0, "warmup": 10.0, "window": 20.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "profile", "points": [[0, 2.0], [120, 8.0]]},
                  "service": {"kind": "exponential", "mean": 0.3}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 3}]})
    assert wants_bands(s) and not wants_bands(load("steady"))
    model = simulate(s).summary
    doc = compare_summaries(model, model)
    # When the comparison gets its bands
    runs = add_bands(doc, s)
    # Then they come from the band seeds (other seeds than the compared run's) and sit on the model's windows
    seeds = band_seeds(s.seed, int(model["jobs"]["arrived"]))
    assert doc["bands"] == {"replications": len(seeds), "seeds": seeds} and s.seed not in seeds
    assert len(runs) == len(seeds)
    want = window_bands([simulate(s, seed=k).summary["windows"] for k in seeds], "wait_p95")
    assert [w["bands"]["wait_p95"] for w in doc["model"]["windows"]] == \
        [None if b is None else pytest.approx(list(b)) for b in want[:len(doc["model"]["windows"])]]
    assert "bands" not in doc["engine"]["windows"][0]
