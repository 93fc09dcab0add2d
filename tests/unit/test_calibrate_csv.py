"""qsim calibrate --from csv: the jobs.csv of `qsim simulate --out` back to a scenario that `qsim simulate` runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from qsim import Scenario
from qsim.calibrate import from_csv, from_frame
from qsim.cli import main
from qsim.model import simulate

TRUTH = """
name = "truth"
seed = 4
duration = 400.0
[[queues]]
name = "orders"
[[queues]]
name = "bulk"
[[jobs]]
name = "cut"
queue = "orders"
priority = 1
arrival = { kind = "poisson", rate = 6.0 }
service = { kind = "lognormal", mean = 0.3, cv = 0.7 }
fail_prob = 0.1
attempts = 3
[[jobs]]
name = "pack"
queue = "bulk"
arrival = { kind = "burst", rate = 2.0, size = 4 }
service = { kind = "gamma", mean = 0.5, cv = 0.5 }
poison_prob = 0.05
attempts = 2
[[pools]]
name = "shop"
queues = ["orders", "bulk"]
workers = 2
concurrency = 3
"""


@pytest.fixture(scope="module")
def jobs_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("calibrate-csv")
    (folder / "truth.toml").write_text(TRUTH)
    assert main(["simulate", str(folder / "truth.toml"), "--out", str(folder / "run"), "--json"]) == 0
    return folder / "run" / "jobs.csv"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["calibrate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_csv_round_trip(jobs_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the jobs.csv of a model run with known truth
    out_toml = tmp_path / "cal.toml"
    # When calibrated from it
    code, out, err = run(capsys, "--from", "csv", str(jobs_csv), "--out", str(out_toml), "--json")
    # Then the JSON has the contract's shape and the fits recover the truth
    assert code == 0, err
    doc = json.loads(out)
    assert {"scenario", "fits", "overhead"} <= set(doc)
    assert set(doc["overhead"]) >= {"fetch_overhead", "ack_overhead"}
    assert sorted(j["name"] for j in doc["scenario"]["jobs"]) == ["cut", "pack"]  # named as in the source
    cut, pack = doc["fits"]["cut"], doc["fits"]["pack"]
    for fit in (cut, pack):
        assert {"service", "ks", "n"} <= set(fit)
    assert cut["service"]["kind"] == "lognormal" and cut["service"]["mean"] == pytest.approx(0.3, rel=0.05)
    n_cut = int((pd.read_csv(jobs_csv)["type"] == "cut").sum())
    assert cut["arrival"]["kind"] == "poisson"
    assert cut["arrival"]["rate"] == pytest.approx(n_cut / 400.0, rel=0.005)  # the rate this sample realized
    assert cut["arrival"]["rate"] == pytest.approx(6.0, rel=4 / math.sqrt(n_cut))  # and the truth, within 4 sd
    assert cut["failures"]["fail_ci"][0] <= 0.1 <= cut["failures"]["fail_ci"][1]
    assert cut["attempts"] == 3 and cut["priority"] == 1 and cut["queue"] == "orders"
    assert pack["arrival"] == {"kind": "burst", "rate": pytest.approx(2.0, rel=0.01), "size": 4}
    assert pack["service"]["mean"] == pytest.approx(0.5, rel=0.06)
    assert pack["failures"]["poison_ci"][0] <= 0.05 <= pack["failures"]["poison_ci"][1]
    assert doc["scenario"]["pools"] == [{"name": "shop", "queues": ["bulk", "orders"], "policy": "priority",
                                         "weights": {}, "workers": 2, "concurrency": 3}]
    assert doc["overhead"]["fetch_overhead"] == pytest.approx(0.0, abs=1e-9)  # the model has no pickup latency
    # and the TOML is commented and runs in `qsim simulate` as is
    text = out_toml.read_text()
    assert "# lognormal by maximum likelihood from" in text and "95% CI" in text
    written = Scenario.from_toml(out_toml)
    assert written.to_dict() == doc["scenario"]
    assert main(["simulate", str(out_toml), "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    truth = json.loads((jobs_csv.parent / "summary.json").read_text())
    assert predicted["throughput"] == pytest.approx(truth["throughput"], rel=0.06)
    assert predicted["latency"]["mean"] == pytest.approx(truth["latency"]["mean"], rel=0.15)


def test_empirical_trace_and_plots(jobs_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_toml = tmp_path / "emp" / "cal.toml"
    out_toml.parent.mkdir()  # --out creates no folder (its own test: tests/unit/test_cli_edges.py)
    code, out, err = run(capsys, "--from", "csv", str(jobs_csv), "--service", "empirical", "--arrivals", "trace",
                         "--out", str(out_toml), "--plots", str(tmp_path / "plots"))
    assert code == 0, err
    assert "wrote" in out and "cut" in out
    assert sorted(p.name for p in out_toml.parent.iterdir()) == [
        "cal.cut.arrivals.csv", "cal.cut.service.csv", "cal.pack.arrivals.csv", "cal.pack.service.csv", "cal.toml"]
    s = Scenario.from_toml(out_toml)
    assert s.job("cut").service.kind == "empirical" and s.job("cut").arrival.kind == "trace"  # type: ignore[union-attr]
    assert len(s.job("pack").arrival.at) == len(pd.read_csv(out_toml.parent / "cal.pack.arrivals.csv"))  # type: ignore[union-attr]
    assert main(["simulate", str(out_toml), "--json"]) == 0
    capsys.readouterr()
    pngs = sorted((tmp_path / "plots").iterdir())
    assert [p.name for p in pngs] == ["cut.png", "pack.png"] and all(p.stat().st_size > 10_000 for p in pngs)


def test_python_api_and_report(jobs_csv: Path) -> None:
    df = pd.read_csv(jobs_csv)
    scenario, report = from_frame(df, until=200.0)
    assert scenario is report.scenario
    assert scenario.duration == pytest.approx(200.0, rel=0.01)
    assert report.types["cut"].jobs < len(df)
    text = repr(report)
    assert text.splitlines()[0].startswith("Calibration of ") and "lognormal" in text and "pools: shop 2 x 3" in text
    html = report._repr_html_()
    assert "<table" in html and "cut" in html
    assert list(report.table()["type"]) == ["cut", "pack"]
    late = from_csv(jobs_csv, since="100s")  # a duration back from the last enqueue
    assert late.window[0] == pytest.approx(df["enqueued"].max() - 100.0)
    # the minimum columns are enough: one attempt each, one queue
    tiny = df[["type", "enqueued", "started", "finished"]]
    cal = from_frame(tiny)
    assert [q.name for q in cal.scenario.queues] == ["default"] and cal.scenario.job("cut").attempts == 1
    assert math.isclose(cal.types["cut"].arrival.rate, (tiny["type"] == "cut").sum() / 400.0, rel_tol=0.01)


def _bad(tmp_path: Path, text: str) -> str:
    path = tmp_path / f"bad{len(list(tmp_path.glob('bad*.csv')))}.csv"
    path.write_text(text)
    return str(path)


def test_bad_input_is_one_sentence_and_exit_2(jobs_csv: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    head = "type,enqueued,started,finished\n"
    rows = "".join(f"a,{i},{i + 0.1},{i + 0.5}\n" for i in range(40))
    cases = [
        (["--from", "csv", str(tmp_path / "nope.csv")], "no such file"),
        (["--from", "csv", _bad(tmp_path, "type,enqueued\na,1\n")], "no columns started, finished"),
        (["--from", "csv", _bad(tmp_path, head + rows + "a,soon,1,2\n")], "line 42: enqueued is not a number: 'soon'"),
        (["--from", "csv", _bad(tmp_path, head)], "holds no jobs"),
        (["--from", "csv", _bad(tmp_path, "")], "not a CSV table of jobs"),
        (["--from", "csv", _bad(tmp_path, head + rows + "b,1,1.1,2\n")], "'b' (1): at least 30 are needed"),
        (["--from", "csv", _bad(tmp_path, "type,enqueued,started,finished,outcome\n" + "a,1,1,2,lost\na,2,2,3,eaten\n")],
         "outcome must be one of completed, dead, unfinished, lost, got 'eaten'"),
        (["--from", "csv", _bad(tmp_path, head + "a,5,4,6\n")], "started (4.0) is before enqueued (5.0)"),
        (["--from", "csv", str(jobs_csv), "--since", "1000000"], "no jobs enqueued in the window"),
        (["--from", "csv", str(jobs_csv), "--since", "20", "--until", "10"], "--until (10) must be after --since (20)"),
        (["--from", "csv", str(jobs_csv), "--since", "next tuesday"], "--since must be seconds, an ISO date-time"),
        (["--from", "csv"], "--from csv needs the CSV file"),
        ([], "give --from qsim|bullmq|csv"),
        (["--from", "csv", str(jobs_csv), "--queue", "x"], "--queue does not apply to --from csv"),
        (["--from", "qsim"], "--from qsim needs --queue NAME"),
        (["--from", "qsim", str(jobs_csv), "--queue", "x"], "is read only with --from csv"),
    ]
    for args, expected in cases:
        code, out, err = run(capsys, *args)
        assert code == 2, (args, err)
        assert expected in err, (args, err)
        assert err.startswith("qsim calibrate: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert out == ""
