"""Plans over a rate profile: the peak hour, per-window SLOs, static sizing costs, and compare's
per-window checks (model against model here; the engine run is in tests/e2e/test_windows_engine.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from qsim.analysis.autoscaling.baseline import static_peak
from qsim.analysis.autoscaling.runs import attainment
from qsim.analysis.fidelity.check import Tolerance, check, check_document, judge_slos, load_tolerances, quantities_of
from qsim.analysis.fidelity.window_check import window_agreement
from qsim.analysis.plan import plan
from qsim.analysis.plan.profile import expected_arrivals, peak_hour, peak_load, static_cost, time_varying
from qsim.analysis.plan.runner import make_runner
from qsim.analysis.slo.language import parse_slo
from qsim.cli import main
from qsim.errors import ToleranceError
from qsim.model import simulate
from qsim.scenarios import load
from qsim.spec.scenario import Scenario

# 4 jobs/s, a ramp to 20 jobs/s at 600 s and back by 1200 s; 0.5 s jobs: 10 busy workers at the peak
DAY: dict[str, Any] = {
    "name": "day", "seed": 3, "duration": 1800.0, "warmup": 60.0, "window": 60.0,
    "queues": [{"name": "q"}],
    "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "profile", "points": [[0, 4.0], [600, 20.0], [1200, 4.0]]},
              "service": {"kind": "exponential", "mean": 0.5}}],
    "pools": [{"name": "p", "queues": ["q"], "workers": 12}],
}


def day(**top: Any) -> Scenario:
    return Scenario.from_dict({**copy.deepcopy(DAY), **top})


def test_the_peak_hour_is_the_busiest_stretch_on_the_window_grid() -> None:
    s = day()
    assert time_varying(s) and not time_varying(load("steady"))
    hour = peak_hour(s, 600.0)
    # the busiest 600 s of a symmetric triangle peaking at 600 are centred on it, on the 60 s grid from 60
    assert (hour.start, hour.end) == (300.0, 900.0)
    assert hour.rate == pytest.approx(16.0)  # (12 + 20) / 2
    assert hour.mean_rate == pytest.approx(float(expected_arrivals(s, 1800.0) - expected_arrivals(s, 60.0)) / 1740)
    whole = peak_hour(s)  # longer than the run: the run itself
    assert (whole.start, whole.end) == (60.0, 1800.0)
    assert peak_load(s, "p") == pytest.approx(10.0)  # busy slots: 20 jobs/s x 0.5 s, one slot per worker


def test_static_cost_is_the_workers_held_over_the_arrival_span() -> None:
    cost = static_cost(day())
    assert cost == {"workers": {"p": 12}, "worker_seconds": 12 * 1800.0, "worker_hours": 6.0, "span": [0.0, 1800.0]}


def test_a_plan_over_a_profile_judges_windows_and_answers_for_the_peak() -> None:
    # Given the day and an SLO over 80% of its windows
    s = day()
    result = plan(s, [parse_slo("p95_wait<=1 in 80% of windows")], {"pools.p.workers": list(range(8, 15))},
                  processes=1, peak=600.0)
    rows = {p["params"]["pools.p.workers"]: p for p in result["points"]}
    key = "share_of_windows(p95_wait<=1)"
    # Then each point's value is the share of its windows meeting the test, and it meets the SLO from some count up
    shares = [rows[w]["metrics"][key]["mean"] for w in range(8, 15)]
    assert shares == sorted(shares) and shares[-1] == 1.0
    best = result["recommended"]["pools.p.workers"]
    assert rows[best]["metrics"][key]["mean"] >= 0.8 > rows[best - 1]["metrics"][key]["mean"]
    # the peak alone (its 10 windows, each must meet 80%) asks for at least as many workers
    prof = result["profile"]
    assert prof["peak"]["start"] == 300.0 and prof["peak"]["slo"] == ["p95_wait<=1 in 80% of windows (peak)"]
    peak_best = prof["peak"]["recommended"]["pools.p.workers"]
    assert peak_best >= best and rows[peak_best]["meets_peak"] and not rows[peak_best - 1]["meets_peak"]
    # and what those sizings cost held over the profile
    assert prof["static_peak"]["worker_seconds"] == peak_best * 1800.0
    assert prof["static_recommended"]["worker_hours"] == best * 0.5
    # the trend check is left out over a profile (waits follow the load by design)
    assert not any(p["run_length"]["unstable"] for p in result["points"])
    text = result.table()
    assert "peak: [300, 900) s" in text and "worker-hours" in text and key in text


def test_static_peak_is_the_least_static_count_meeting_the_slo_all_day() -> None:
    s = day()
    slo = parse_slo("p95_wait<=1 in every window")
    with make_runner(processes=1) as runner:
        out = static_peak(s, "p", slo, runner, [s.seed])
    assert out["workers"] is not None and out["meets_slo"]
    n = out["workers"]
    assert out["worker_seconds"] == n * 1800.0 and out["worker_hours"] == n * 0.5
    assert out["attainment"] == 1.0
    fewer = simulate(day(pools=[{"name": "p", "queues": ["q"], "workers": n - 1}]), records=False).summary
    assert not parse_slo("p95_wait<=1 in every window").met(fewer)
    assert attainment(parse_slo("p95_wait<=1 in every window"), fewer) < 1.0


def test_window_agreement_counts_windows_within_tolerance() -> None:
    def runs(*pairs: tuple[float | None, float | None]) -> tuple[dict[str, Any], dict[str, Any]]:
        return ({"windows": [{"wait_p95": a} for a, _ in pairs]}, {"windows": [{"wait_p95": b} for _, b in pairs]})

    m, e = runs((1.0, 1.15), (1.0, 1.3), (0.01, 0.05), (None, None), (None, 0.2))
    a = window_agreement(m, e, "windows.wait_p95", rel=0.2, abs_=0.05)
    # 1.15 within 20%; 1.3 not; 0.05 within 50 ms; neither has a value: left out; one side only: disagrees
    assert a == {"compared": 4, "agreeing": 2, "share": 0.5, "worst": 4}


def test_compare_check_holds_windows_of_a_profiled_scenario_and_judges_slos() -> None:
    s = day()
    model = simulate(s).summary
    engine = simulate(s, seed=s.seed).summary  # the same draws: every window agrees
    rows = check(model, engine, scenario=s)
    win = next(r for r in rows if r.quantity == "windows.wait_p95")
    assert win.verdict == "pass" and win.tolerance == Tolerance(0.2, 0.05, share=0.9)
    agreement = win.as_dict()["windows"]
    assert agreement["agreeing"] == agreement["compared"] == sum(w["wait_p95"] is not None for w in model["windows"])
    # not added for a steady scenario
    assert "windows.wait_p95" not in {r.quantity for r in check(model, engine, scenario=load("steady"))}
    slos = judge_slos([parse_slo("p95_wait<=1 in 80% of windows"), parse_slo("p95_wait<=0.001 in every window")],
                      model, engine)
    doc = check_document(rows, slos)
    assert [s["engine_met"] for s in slos] == [True, False]
    assert not doc["passed"] and doc["failed"] == ["slo p95_wait<=0.001 in every window"]


def test_a_tolerance_file_may_check_any_window_field_with_a_share(tmp_path: Path) -> None:
    f = tmp_path / "tol.toml"
    f.write_text('["windows.throughput"]\nrel = 0.05\nshare = 0.8\n')
    tols = load_tolerances(f, quantities_of(day()))
    assert tols["windows.throughput"] == Tolerance(0.05, 0.0, share=0.8)
    assert tols["windows.throughput"].describe("/s") == "±5% in 80% of windows"
    f.write_text('["windows.throughput"]\nshare = 1.5\n')
    with pytest.raises(ToleranceError, match=r'\["windows.throughput"\].share must be a fraction of the windows'):
        load_tolerances(f, quantities_of(day()))
    f.write_text('["wait.p95"]\nshare = 0.5\n')
    with pytest.raises(ToleranceError, match=r"share is not a known key"):
        load_tolerances(f, quantities_of(day()))


def test_cli_simulate_windows_table_and_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.spec.toml_writer import write_toml

    path = write_toml(day(), tmp_path / "day.toml")
    assert main(["simulate", str(path), "--window", "300", "--windows", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("window  start"):].split("\n\n")[0].splitlines()
    assert len(table) == 1 + 6 and table[1].split()[:3] == ["0", "60", "360"]
    assert (tmp_path / "out" / "windows.csv").read_text().startswith("source,window,start,end,arrivals")
    assert (tmp_path / "out" / "windows.png").stat().st_size > 1000
    assert main(["simulate", str(path), "--json", "--window", "600"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [w["start"] for w in doc["windows"]] == [60.0, 660.0, 1260.0]
    assert main(["theory", str(path)]) == 2
    assert "arrives by a rate profile (time-varying load), which closed forms do not cover" in capsys.readouterr().err


def test_cli_plan_over_a_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.spec.toml_writer import write_toml

    path = write_toml(day(), tmp_path / "day.toml")
    code = main(["plan", str(path), "--slo", "p95_wait<=1 in 80% of windows", "--vary", "pools.p.workers=10:13",
                 "--processes", "1", "--peak", "600", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["recommended"] is not None
    assert set(doc["profile"]) == {"peak", "static_peak", "static_recommended"}
    assert main(["plan", str(path), "--slo", "p95_wait<=1 in most windows", "--vary", "pools.p.workers=10:13"]) == 2
    assert "--slo over windows must look like" in capsys.readouterr().err


def test_the_how_to_pages_example_says_what_the_model_does(tmp_path: Path) -> None:
    # docs/how-to/time-varying-load.md: its scenarios are valid and its figures are the model's
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "how-to" / "time-varying-load.md").read_text()
    files = dict((t, c) for t, c in re.findall(r'```toml title="([^"]+)"\n(.*?)```', page, re.S))
    assert set(files) == {"day.toml", "ramp.toml"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        assert time_varying(Scenario.from_toml(tmp_path / name))
    s = Scenario.from_toml(tmp_path / "day.toml")
    w = simulate(s, records=False).summary["windows"]
    assert len(w) == 70 and max(range(70), key=lambda i: w[i]["wait_p95"] or 0.0) == 27
    assert w[27]["wait_p95"] == pytest.approx(3.402, abs=1e-3) and w[27]["max_depth"] == 47
    assert parse_slo("p95_wait<=2 in 95% of windows").measure({"windows": w}) == pytest.approx(69 / 70)
    hour = peak_hour(s)
    assert (hour.start, hour.end, hour.rate) == (7200.0, 10800.0, 8.0)
