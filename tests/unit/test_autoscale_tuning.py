"""qsim autoscale --tune all: fair search spaces, held-out judging, ties, the SPEC elasticity figures, flaps."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypothesis_budget import examples
from qsim import Scenario, ScenarioError
from qsim.analysis.autoscaling.contest import HELD_OUT_OFFSET, autoscale, held_out_seeds
from qsim.analysis.autoscaling.elasticity import elasticity
from qsim.analysis.autoscaling.search import SEARCH_SPACES, apply_point, rank_key, scale_rules, search_space
from qsim.analysis.autoscaling.runs import with_policy
from qsim.analysis.plan.sweep import replication_seeds
from qsim.analysis.slo.language import parse_slo
from qsim.autoscale.tally import count_flaps
from qsim.spec.autoscaler import AUTOSCALE_POLICIES
from qsim.spec.toml_writer import write_toml

SLO = "p95_wait<=2 in 90% of windows"


def step_load(half: float = 300.0, **autoscaler: Any) -> Scenario:
    """2 jobs/s of 1 s exponential jobs for ``half`` s, then 6 jobs/s."""
    return Scenario.from_dict({
        "name": "step", "duration": 2 * half, "seed": 3, "window": 30.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 1.0},
                  "arrival": {"kind": "profile", "shape": "step", "points": [[0, 2.0], [half, 2.0], [half, 6.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 30, "poll": 15.0, "start_delay":
                         {"kind": "constant", "mean": 20.0}, "policy": "hpa", "target": 2.0, **autoscaler}]})


def test_elasticity_of_a_hand_computed_trajectory() -> None:
    # Given three 10 s windows demanding 2, 4, 2 workers, and a supply ready at 2, then 3 from t=12, then 5 from
    # t=25 (asked counts differ: only ready workers supply)
    edges, demand = [0.0, 10.0, 20.0, 30.0], [2.0, 4.0, 2.0]
    trajectory = [[0.0, 3, 2], [12.0, 5, 3], [25.0, 5, 5]]
    e = elasticity(trajectory, demand, edges)
    # Then under: 10..12 short by 2 of 4, 12..20 by 1 of 4; over: 20..25 by 1 of 2, 25..30 by 3 of 2
    assert e["under_accuracy"] == pytest.approx((2 * 0.5 + 8 * 0.25) / 30)
    assert e["over_accuracy"] == pytest.approx((5 * 0.5 + 5 * 1.5) / 30)
    assert e["under_timeshare"] == pytest.approx(10 / 30)
    assert e["over_timeshare"] == pytest.approx(10 / 30)
    # And window means of supply 2, 2.8, 4: the second step has demand down (4 -> 2) and supply up: one of two
    assert e["instability"] == pytest.approx(1 / 2)
    # And a supply that follows the demand exactly has none of them
    exact = elasticity([[0.0, 2, 2], [10.0, 4, 4], [20.0, 2, 2]], demand, edges)
    assert exact == {"under_accuracy": 0.0, "over_accuracy": 0.0, "under_timeshare": 0.0, "over_timeshare": 0.0,
                     "instability": 0.0}
    with pytest.raises(ValueError, match="one demand per window"):
        elasticity(trajectory, [1.0], edges)


def test_no_workers_are_demanded_after_the_arrivals_end() -> None:
    from qsim.analysis.autoscaling.elasticity import demanded_workers

    # Given 6 jobs/s of 1 s jobs from t = 300 to the end (600 s), and windows past the end (the drain)
    s = step_load()
    d = demanded_workers(s, "p", [540.0, 600.0, 660.0, 720.0])
    # Then the last window of arrivals demands 6 workers, the drain's none (the profile went on: 6 each)
    assert list(d) == [6.0, 0.0, 0.0]


def test_flaps_count_reversals_of_a_size_and_within_a_window() -> None:
    # up 3 at 0, down 1 at 100, up 1 at 200, down 4 at 1000
    traj = [[0.0, 2, 2], [0.0, 5, 2], [100.0, 4, 4], [200.0, 5, 4], [1000.0, 1, 1]]
    assert count_flaps(traj, window=600.0) == 2          # 100 and 200; 1000 is 800 s after the last event
    assert count_flaps(traj, window=900.0) == 3
    assert count_flaps(traj, window=900.0, size=2) == 1  # only the reversal of 4 workers
    with pytest.raises(ValueError):
        count_flaps(traj, size=0)


def test_held_out_seeds_are_disjoint_from_training() -> None:
    for seed in (0, 7, 123456):
        train = set(replication_seeds(seed, 50))
        held = held_out_seeds(seed, 50)
        assert len(set(held)) == 50 and not train & set(held)
        assert min(held) == seed + HELD_OUT_OFFSET


def test_every_policy_has_a_space_over_its_decisive_knobs() -> None:
    slo = parse_slo(SLO)
    s = step_load()
    assert set(SEARCH_SPACES) == set(AUTOSCALE_POLICIES)
    hpa = search_space("hpa", s, "p", slo)
    assert {"autoscalers.p.min", "autoscalers.p.target", "autoscalers.p.scale_down_rate",
            "autoscalers.p.scale_down_stabilization", "autoscalers.p.tolerance"} == set(hpa)
    assert len(hpa["autoscalers.p.min"]) > 1 and len(hpa["autoscalers.p.target"]) > 1
    # The advice window is never longer than the run
    short = search_space("qsim", step_load(half=100.0), "p", slo)
    assert max(short["autoscalers.p.window"]) <= 200.0
    # A point's knobs are set together: a step's thresholds can both move below the old ones
    base = with_policy(s, "p", "step", slo)
    moved = apply_point(base, {"autoscalers.p.up_when": 0.5, "autoscalers.p.down_when": 0.1,
                               "autoscalers.p.step": 2})
    spec = moved.autoscaler("p")
    assert spec is not None and (spec.up_when, spec.down_when, spec.step) == (0.5, 0.1, 2)
    q = apply_point(with_policy(s, "p", "qsim", slo), {"autoscalers.p.slo_margin": 0.5,
                                                       "autoscalers.p.scale_down_rate": "2/60s"})
    qs = q.autoscaler("p")
    assert qs is not None and qs.slo == "p95_wait<=1" and qs.scale_down == scale_rules("2/60s")
    assert scale_rules("100%/15s")[0].type == "percent"


@pytest.mark.parametrize(("knob", "value", "message"), [
    ("target", 0, "autoscalers[0].target must be > 0, got 0.0"),  # was a ValueError traceback from the HPA
    ("window", 0, "autoscalers[0].window must be > 0, got 0.0"),
    ("tolerance", -0.5, "autoscalers[0].tolerance must be >= 0, got -0.5"),  # was simulated
    ("poll", 0, "autoscalers[0].poll must be > 0, got 0.0"),
])
def test_a_tuning_grid_point_is_held_to_the_scenarios_rules(knob: str, value: float, message: str,
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.cli import main

    base = with_policy(step_load(), "p", "hpa", parse_slo(SLO))
    with pytest.raises(ScenarioError, match=re.escape(f"--vary autoscalers.p.{knob}={value!r}: {message}")):
        apply_point(base, {f"autoscalers.p.{knob}": value})
    # and from the command line: exit 2, one line, before anything runs
    path = write_toml(step_load(), tmp_path / "step.toml")
    code = main(["autoscale", str(path), "--slo", SLO, "--tune", "hpa", "--processes", "1", "--vary",
                 f"autoscalers.p.{knob}={value}"])
    out, err = capsys.readouterr()
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and not out, err


def test_equal_costs_are_ties_not_an_arbitrary_best() -> None:
    # Given a pool held at 8 workers whatever the policy (min = max): every policy costs the same
    s = step_load(min=8, max=8)
    doc = autoscale(s, SLO, policies=["hpa", "step"], replications=1, processes=1, static=False)
    assert doc["policies"]["hpa"]["meets_slo"] and doc["policies"]["step"]["meets_slo"]
    assert doc["policies"]["hpa"]["worker_seconds"] == doc["policies"]["step"]["worker_seconds"]
    # Then both are best, and none is named alone
    assert doc["tied"] == ["hpa", "step"] and doc["best"] is None and doc.tied == ["hpa", "step"]


@pytest.mark.long
@pytest.mark.timeout(900)  # the qsim policy's advisor plans at every new load it measures
def test_each_tuned_point_beats_or_equals_the_policy_as_configured_on_held_out_seeds() -> None:
    from qsim.advise.load import advisors

    # Given a step in load and every policy as configured from the SLO (a 20 s cold start)
    s = step_load()
    slo = parse_slo(SLO)
    doc = autoscale(s, SLO, tune_policy="all", replications=2, held_out=2, budget=6, processes=1, static=False,
                    advisors=advisors, cost_per_worker_hour=0.05)
    assert set(doc["policies"]) == set(AUTOSCALE_POLICIES)
    held = doc["held_out_seeds"]
    for name, f in doc["policies"].items():
        t = f["tuned"]
        assert t["seeds"]["held_out"] == held and not set(held) & set(t["seeds"]["train"])
        for key in ("under_accuracy", "over_accuracy", "under_timeshare", "over_timeshare", "instability"):
            assert 0.0 <= f["elasticity"][key] <= (1.0 if "timeshare" in key or key == "instability" else 50.0)
        assert f["cost"] == pytest.approx(0.05 * f["worker_hours"])
        if t["held_out"] is None:  # nothing met the SLO on the training seeds, the policy as configured included
            assert not f["meets_slo"], name
            continue
        # Then on seeds it never saw, the tuned point ranks no worse than the policy as configured
        assert rank_key(t["held_out"], slo) <= rank_key(t["configured_held_out"], slo), name
        assert t["train"]["meets_slo"] and t["held_out"]["replications"] == 2


def test_emit_with_no_tuned_point_prints_the_table_and_exits_1(tmp_path: Path) -> None:
    # Given a pool that cannot grow past 2 workers under 6 jobs/s of 1 s jobs: no point meets the SLO
    path = write_toml(step_load(half=150.0, max=2, min=1), tmp_path / "s.toml")
    out = tmp_path / "keda.yaml"
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(path), "--slo", SLO, "--tune", "hpa",
                          "--vary", "autoscalers.p.target=1,4", "--replications", "1", "--processes", "1",
                          "--no-static", "--emit", "keda", str(out)], capture_output=True, text=True)
    # Then the table is printed, stderr says why nothing was written, and the exit code is 1
    assert run.returncode == 1, run.stderr
    assert "tuned hpa: no point searched meets the SLO" in run.stdout and "hpa tuned" not in run.stdout
    assert "nothing written" in run.stderr and not out.exists()


def test_cli_tune_all_json_is_the_contract(tmp_path: Path) -> None:
    path = write_toml(step_load(half=150.0), tmp_path / "s.toml")
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(path), "--slo", SLO, "--policy", "hpa",
                          "--policy", "step", "--tune", "all", "--budget", "2", "--replications", "1",
                          "--processes", "1", "--no-static", "--cost-per-worker-hour", "0.5", "--flap-size", "2",
                          "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(run.stdout)
    assert set(doc["policies"]) == {"hpa", "step"} and doc["flap_size"] == 2
    for f in doc["policies"].values():
        t = f["tuned"]
        assert {"params", "train", "held_out"} <= set(t)
        assert set(f["elasticity"]) == {"under_accuracy", "over_accuracy", "under_timeshare", "over_timeshare",
                                        "instability"}
        assert f["cost"] == pytest.approx(0.5 * f["worker_hours"])
        assert t["seeds"]["held_out"] == doc["held_out_seeds"] == [3 + HELD_OUT_OFFSET]
        assert len(t["points"]) == 3  # two drawn from the space, and the policy as configured


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 20), min_size=2, max_size=12), st.lists(st.integers(0, 20), min_size=1, max_size=30),
       st.floats(0.0, 1.0))
def test_elasticity_shares_add_up_and_exact_supply_scores_zero(demand: list[int], supply: list[int],
                                                                jitter: float) -> None:
    edges = [10.0 * i for i in range(len(demand) + 1)]
    span = edges[-1]
    times = sorted({0.0, *(span * ((k + jitter) / len(supply)) for k in range(1, len(supply)))})
    trajectory = [[t, s, s] for t, s in zip(times, supply)]
    e = elasticity(trajectory, demand, edges)
    # The shares of time under, over and exactly provisioned make the whole run
    assert 0.0 <= e["under_timeshare"] <= 1.0 and 0.0 <= e["over_timeshare"] <= 1.0
    assert e["under_timeshare"] + e["over_timeshare"] <= 1.0 + 1e-9
    # Shortfall is at most the demand itself (relative accuracy <= 1); none of it without time under
    assert 0.0 <= e["under_accuracy"] <= e["under_timeshare"] + 1e-9
    assert (e["over_accuracy"] > 0) == (e["over_timeshare"] > 0)
    assert 0.0 <= e["instability"] <= 1.0  # type: ignore[operator]
    # A supply equal to the demand in every window has none of them
    exact = elasticity([[edges[i], d, d] for i, d in enumerate(demand)], demand, edges)
    assert all(v == 0.0 for v in exact.values())


def test_each_figures_interval_stays_within_the_values_it_can_take() -> None:
    from qsim.analysis.autoscaling.runs import FIGURES, summarize_runs

    # Given two replications far apart: a share of windows of 0.6 and 1.0, waits of 0 and 10 s
    runs = [{**{name: 0.0 for name in FIGURES}, "attainment": a, "p95_wait": w, "recover_seconds": w * 40,
             "lost": 0, "slo_value": a} for a, w in ((0.6, 0.0), (1.0, 10.0))]
    out = summarize_runs(runs, parse_slo(SLO))
    # Then the t-interval is clipped as qsim plan clips it (it read [-0.6, 2.2] and a negative wait)
    low, high = out["ci"]["attainment"]
    assert 0.0 <= low < out["attainment"] < high == 1.0
    assert out["ci"]["p95_wait"][0] == 0.0 and out["ci"]["recover_seconds"][0] == 0.0
    assert out["ci"]["p95_wait"][1] > 10.0  # only the impossible side is cut
