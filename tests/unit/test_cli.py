"""The qsim command: exit codes, the JSON contract, files written by --out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qsim.cli import main

SUMMARY_KEYS = {"scenario", "source", "seed", "jobs", "throughput", "wait", "latency", "utilization",
                "by_type", "by_queue", "windows"}
JOB_KEYS = {"arrived", "completed", "dead", "failed_attempts", "stalled", "unfinished", "lost"}
STAT_KEYS = {"mean", "p50", "p95", "p99", "max"}

MMC = """
name = "mmc"
seed = 11
duration = 200.0
warmup = 20.0
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
workers = 10
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_summary_shape(doc: dict[str, Any]) -> None:
    assert set(doc) == SUMMARY_KEYS
    assert set(doc["jobs"]) == JOB_KEYS and all(isinstance(v, int) for v in doc["jobs"].values())
    assert set(doc["wait"]) == STAT_KEYS and set(doc["latency"]) == STAT_KEYS
    for t in doc["by_type"].values():
        assert set(t) == {"completed", "dead", "wait", "latency"}
    for q in doc["by_queue"].values():
        assert set(q) == {"completed", "dead", "max_depth", "wait"}
    j = doc["jobs"]
    assert j["lost"] == j["arrived"] - j["completed"] - j["dead"] - j["unfinished"]


def test_simulate_builtin_prints_exactly_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "--json")
    assert code == 0
    doc = json.loads(out)  # exactly one JSON document
    check_summary_shape(doc)
    assert (doc["scenario"], doc["source"], doc["seed"]) == ("workshop", "model", 7)
    assert doc["jobs"]["completed"] > 0 and doc["jobs"]["lost"] == 0


def test_simulate_table_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate")
    assert code == 0 and "scenario workshop" in out and "p95" in out


def test_seed_and_jobs_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mmc.toml"
    path.write_text(MMC)
    _, out_a, _ = run(capsys, "simulate", str(path), "--json", "--seed", "3")
    _, out_b, _ = run(capsys, "simulate", str(path), "--json", "--seed", "3")
    _, out_c, _ = run(capsys, "simulate", str(path), "--json")
    a, b, c = json.loads(out_a), json.loads(out_b), json.loads(out_c)
    assert a == b and a["seed"] == 3 and c["seed"] == 11
    assert a["wait"] != c["wait"]
    _, out, _ = run(capsys, "simulate", str(path), "--json", "--jobs", "100", "--seed", "1")
    limited = json.loads(out)
    assert limited["jobs"]["arrived"] <= 100 and limited["jobs"]["completed"] == limited["jobs"]["arrived"]


def test_out_dir_writes_records_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, _ = run(capsys, "simulate", "--out", str(out), "--json")
    assert code == 0
    for name in ("jobs.csv", "attempts.csv", "timeseries.csv", "summary.json", "queue_depth.png",
                 "wait_distribution.png"):
        assert (out / name).stat().st_size > 0, name
    check_summary_shape(json.loads((out / "summary.json").read_text()))
    header = (out / "jobs.csv").read_text().splitlines()[0]
    assert header.startswith("job_id,type,queue,priority,enqueued,started,finished")


def test_bad_scenario_exits_2_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "shop.toml"
    path.write_text(MMC.replace('mean = 1.0 }', 'mean = -1.0 }'))
    code, out, err = run(capsys, "simulate", str(path), "--json")
    assert code == 2 and out == ""
    assert "shop.toml: jobs[0].service.mean must be > 0, got -1.0" in err


def test_missing_file_and_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "simulate", str(tmp_path / "nope.toml"))
    assert code == 2 and "no such scenario file" in err
    for args in (["simulate", "--jobs", "0"], ["simulate", "--seed", "-1"], ["simulate", "--bogus"], []):
        with pytest.raises(SystemExit) as info:
            main(args)
        assert info.value.code == 2


def test_theory_applies_or_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mmc.toml"
    path.write_text(MMC)
    code, out, _ = run(capsys, "theory", str(path), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["model"] == "M/M/c" and doc["c"] == 10
    assert doc["wait"]["mean"] == pytest.approx(0.2046, abs=1e-3)
    path.write_text(MMC.replace('kind = "poisson"', 'kind = "constant"'))
    code, out, err = run(capsys, "theory", str(path), "--json")
    assert code == 2 and "constant" in err
    assert json.loads(out) == {"scenario": "mmc", "source": "theory", "applicable": False,
                               "reason": err.strip().removeprefix("qsim theory: ")}


@pytest.mark.parametrize("extra", [
    '[[events]]\nat = 50.0\nkind = "sigkill"\npool = "p"\n',
    None,  # retries: fail_prob and attempts on the job type
])
def test_theory_json_says_why_no_closed_form_applies(extra: str | None, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # Given a valid scenario that no closed form covers (a pool event, or retries)
    path = tmp_path / "mmc.toml"
    path.write_text(MMC + extra if extra else MMC.replace("[[pools]]", "attempts = 3\nfail_prob = 0.2\n[[pools]]"))
    # When theory is asked for JSON
    code, out, err = run(capsys, "theory", str(path), "--json")
    # Then it still exits 2 with the reason on stderr, and stdout is one JSON document saying why
    doc = json.loads(out)
    assert code == 2 and err.count("\n") == 1 and err.startswith("qsim theory: ")
    assert doc == {"scenario": "mmc", "source": "theory", "applicable": False,
                   "reason": err.strip().removeprefix("qsim theory: ")}
    # And without --json stdout stays empty
    code, out, _ = run(capsys, "theory", str(path))
    assert code == 2 and out == ""
    # And a scenario that is bad input, not beyond theory, prints no document
    path.write_text(MMC.replace("mean = 1.0 }", "mean = -1.0 }"))
    code, out, _ = run(capsys, "theory", str(path), "--json")
    assert code == 2 and out == ""


def test_console_entry_point_runs_in_a_fresh_process() -> None:
    done = subprocess.run([sys.executable, "-m", "qsim", "simulate", "--json", "--jobs", "200"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    check_summary_shape(json.loads(done.stdout))
