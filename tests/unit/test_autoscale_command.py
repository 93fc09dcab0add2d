"""qsim autoscale: policies side by side, the static peak, --tune, the JSON of the contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qsim import Scenario, ScenarioError
from qsim.analysis.autoscaling.baseline import static_scenario
from qsim.analysis.autoscaling.contest import AutoscaleResult, autoscale
from qsim.analysis.autoscaling.runs import attainment, recovery, with_policy
from qsim.analysis.slo.language import parse_slo
from qsim.analysis.theory import mmc_wait_quantile
from qsim.spec.toml_writer import write_toml

SLO = "p95_wait<=2 in 90% of windows"


def step_load(low: float = 2.0, high: float = 6.0, half: float = 600.0, **autoscaler: Any) -> Scenario:
    return Scenario.from_dict({
        "name": "step", "duration": 2 * half, "seed": 3, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 1.0},
                  "arrival": {"kind": "profile", "shape": "step",
                              "points": [[0, low], [half, low], [half, high]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 30, "poll": 15.0, **autoscaler}] if autoscaler else []})


def erlang_c_workers(rate: float, mean: float = 1.0, wait: float = 2.0) -> int:
    return next(c for c in range(1, 500) if mmc_wait_quantile(0.95, c, rate, 1.0 / mean) <= wait)


def test_policies_side_by_side_with_the_static_peak() -> None:
    # Given a step from 2 to 6 jobs/s of 1 s jobs and two policies, each run twice with the same seeds
    doc = autoscale(step_load(), SLO, policies=["hpa", "step"], replications=2, processes=1)
    # Then every policy has the contract's figures, with intervals over the replications
    assert doc["slo"] == SLO and doc["pool"] == "p" and doc["replications"] == 2
    for name in ("hpa", "step"):
        f = doc["policies"][name]
        for key in ("worker_seconds", "flaps", "cut_jobs", "attainment", "meets_slo", "ci", "params"):
            assert key in f, key
        assert f["params"]["policy"] == name and 0.0 <= f["attainment"] <= 1.0
        assert f["worker_hours"] == pytest.approx(f["worker_seconds"] / 3600)
    # And the static peak is the least fixed count meeting the SLO: at least the Erlang C count at the peak
    peak = doc["static_peak"]
    assert {"workers", "worker_seconds", "attainment"} <= set(peak)
    assert erlang_c_workers(6.0) - 1 <= peak["workers"] <= erlang_c_workers(6.0) + 3
    assert peak["worker_seconds"] == pytest.approx(peak["workers"] * 1200.0)
    assert peak["meets_slo"]
    assert doc["best"] in (None, "hpa", "step")
    # And the answer is typed, its JSON the plain document's
    assert isinstance(doc, AutoscaleResult) and doc.best == doc["best"] and doc.static_peak == peak
    assert set(doc.policies) == {"hpa", "step"} and json.dumps(doc) == json.dumps(doc.to_dict())


def test_parameters_come_from_the_slo_unless_the_scenario_gives_them() -> None:
    slo = parse_slo("p95_wait<=2 in 95% of windows")
    s = step_load()
    assert with_policy(s, "p", "step", slo).autoscaler("p").up_when == 2.0  # type: ignore[union-attr]
    assert with_policy(s, "p", "target-tracking", slo).autoscaler("p").acceptable_latency == 2.0  # type: ignore[union-attr]
    assert with_policy(s, "p", "hpa", slo).autoscaler("p").target == 2.0  # type: ignore[union-attr] # 2 s x 1 / 1 s
    assert with_policy(s, "p", "qsim", slo).autoscaler("p").slo == "p95_wait<=2"  # type: ignore[union-attr]
    own = step_load(policy="hpa", target=7, min=2)
    kept = with_policy(own, "p", "hpa", slo).autoscaler("p")
    assert kept is not None and kept.target == 7.0 and kept.min == 2
    assert static_scenario(own, "p", 9).autoscalers == () and static_scenario(own, "p", 9).pool("p").workers == 9


def test_attainment_and_recovery_read_the_windows() -> None:
    slo = parse_slo("p95_wait<=2 in 90% of windows")
    windows = [{"start": 60.0 * i, "end": 60.0 * (i + 1), "wait_p95": v}
               for i, v in enumerate([0.5, 3.0, 4.0, None, 1.0, 2.5, 0.1])]
    summary = {"windows": windows}
    assert attainment(slo, summary) == pytest.approx(3 / 6)      # the window without a p95 is left out
    assert recovery(windows, slo) == [120.0, 60.0]               # 60..180 missed, then 300..360


def test_tune_keeps_the_cheapest_point_that_meets_the_slo() -> None:
    s = step_load(policy="step", up_when=2.0, down_when=0.5, up_delay=15.0, down_delay=120.0)
    doc = autoscale(s, SLO, tune_policy="step", vary={"autoscalers.p.up_when": [1.0, 2.0, 8.0],
                                                      "autoscalers.p.min": [1, 10]},
                    replications=2, processes=1, static=False)
    tuned = doc["tuned"]
    # Every grid point ran on the first training seed, beside the policy as configured
    assert len(tuned["points"]) == 7 and sum(p["configured"] for p in tuned["points"]) == 1
    assert {tuple(sorted(p["params"].items())) for p in tuned["points"] if not p["configured"]} == \
        {(("autoscalers.p.min", m), ("autoscalers.p.up_when", u)) for m in (1, 10) for u in (1.0, 2.0, 8.0)}
    # The survivors (the best third, and the configured one) ran on both, and the tuned point is the cheapest of
    # them meeting the SLO
    full = [p for p in tuned["points"] if p["seeds"] == 2]
    assert 2 <= len(full) <= 4 and any(p["configured"] for p in full)
    meeting = [p for p in full if p["meets_slo"]]
    assert meeting
    cheapest = min(meeting, key=lambda p: p["worker_seconds"])
    assert tuned["point"] == cheapest["params"]
    assert tuned["params"]["up_when"] == cheapest["params"].get("autoscalers.p.up_when", 2.0)
    assert doc["best"] in (*doc["policies"], "step-tuned", None)
    # And the tuned point and the policy as configured were judged again on held-out seeds
    assert tuned["seeds"]["held_out"] and not set(tuned["seeds"]["held_out"]) & set(tuned["seeds"]["train"])
    assert tuned["held_out"]["replications"] == 2 and tuned["configured_held_out"]["replications"] == 2
    assert doc["policies"]["step"]["tuned"]["point"] == tuned["point"]


def test_bad_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--policy must be one of"):
        autoscale(step_load(), SLO, policies=["knative"], processes=1)
    with pytest.raises(ScenarioError, match=r"--vary autoscalers.p.up_when: down_when must be < up_when \(0.5\)"):
        autoscale(step_load(policy="step", up_when=2.0, down_when=0.5), SLO, tune_policy="step",
                  vary={"autoscalers.p.up_when": [0.5, 2.0]}, processes=1, static=False)
    with pytest.raises(ScenarioError, match="is not a parameter of the autoscaler"):
        autoscale(step_load(), SLO, tune_policy="hpa", vary={"jobs.j.service.mean": [1.0]}, processes=1,
                  static=False)
    path = write_toml(step_load(), tmp_path / "s.toml")
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(path), "--slo", "p95_wait<=2 in 95% of"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "--slo" in run.stderr


def test_cli_json_is_the_contract(tmp_path: Path) -> None:
    path = write_toml(step_load(half=300.0, policy="step", up_when=2.0, down_when=0.5), tmp_path / "s.toml")
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(path), "--slo", SLO, "--replications", "1",
                          "--processes", "1", "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(run.stdout)
    assert doc["slo"] == SLO and set(doc["policies"]) == {"step"}
    assert {"worker_seconds", "flaps", "cut_jobs", "attainment"} <= set(doc["policies"]["step"])
    assert {"workers", "worker_seconds", "attainment"} <= set(doc["static_peak"])


def ramp() -> Scenario:
    """20 minutes at 4 jobs/s of exponential 1 s jobs, a 10-minute ramp, 20 minutes at 12 jobs/s; the qsim policy."""
    return Scenario.from_dict({
        "name": "ramp", "duration": 3000.0, "seed": 3, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 1.0},
                  "arrival": {"kind": "profile", "shape": "linear", "points": [[0, 4.0], [1200, 4.0], [1800, 12.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 6}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 40, "poll": 30.0, "policy": "qsim", "slo": "p95_wait<=2"}]})


@pytest.mark.long
def test_tune_lands_within_one_worker_of_erlang_c_per_segment() -> None:
    # Given two long segments (4 then 12 jobs/s of exponential 1 s jobs, a ramp between) and the qsim policy
    # (the advisor's recommendation for p95 wait <= 2 s), whose advice window and scale-down window --tune searches
    from qsim.advise.load import advisors

    s = ramp()
    doc = autoscale(s, "p95_wait<=2", tune_policy="qsim", vary={"autoscalers.p.window": [60.0, 300.0],
                                                               "autoscalers.p.scale_down_stabilization": [600.0]},
                    replications=2, processes=1, static=False, advisors=advisors)
    tuned = doc["tuned"]
    assert tuned["params"] is not None, tuned["points"]
    # When the tuned policy runs
    from qsim.model import simulate

    best = with_policy(s, "p", "qsim", parse_slo("p95_wait<=2"), window=tuned["params"]["window"])
    traj = simulate(best, records=False, recommend=advisors(best)).summary["autoscaling"]["p"]["trajectory"]
    t = np.array([r[0] for r in traj] + [np.inf])
    n = np.array([r[1] for r in traj], dtype=float)

    def mean_workers(a: float, b: float) -> float:
        overlap = np.clip(np.minimum(t[1:], b) - np.maximum(t[:-1], a), 0, None)
        return float((n * overlap).sum() / (b - a))

    # Then in each segment's second half it holds the static Erlang C count of that segment, within one worker
    assert abs(mean_workers(600.0, 1200.0) - erlang_c_workers(4.0)) <= 1.0
    assert abs(mean_workers(2400.0, 3000.0) - erlang_c_workers(12.0)) <= 1.0
