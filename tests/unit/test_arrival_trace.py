"""``qsim simulate --arrivals trace FILE``: measured arrival times replayed instead of drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qsim.cli import main
from qsim.errors import ScenarioError
from qsim.model import simulate
from qsim.spec.arrival_trace import read_arrival_trace, replay_arrivals
from qsim.spec.scenario import Scenario

TWO = {
    "name": "two", "seed": 4, "duration": 120.0, "warmup": 10.0, "window": 20.0,
    "queues": [{"name": "q"}],
    "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0},
              "service": {"kind": "exponential", "mean": 0.3}},
             {"name": "b", "queue": "q", "arrival": {"kind": "profile", "points": [[0, 1.0], [60, 4.0]]},
              "service": {"kind": "lognormal", "mean": 0.5, "cv": 1.0}}],
    "pools": [{"name": "p", "queues": ["q"], "workers": 2}],
}


def test_replaying_a_runs_own_jobs_gives_the_same_run(tmp_path: Path) -> None:
    # Given a run of two types (one Poisson, one on a rate profile) written out as jobs.csv
    s = Scenario.from_dict(TWO)
    result = simulate(s, seed=9)
    result.jobs.to_csv(tmp_path / "jobs.csv", index=False)
    # When the same scenario replays those arrivals with the same seed
    replayed = simulate(replay_arrivals(s, tmp_path / "jobs.csv"), seed=9)
    # Then it is the same run: every job at the same time, the same Summary
    assert replayed.jobs["enqueued"].tolist() == pytest.approx(result.jobs["enqueued"].tolist())
    assert replayed.summary["windows"] == result.summary["windows"]
    assert replayed.summary["wait"] == result.summary["wait"]


def test_every_seed_replays_the_same_arrivals(tmp_path: Path) -> None:
    s = Scenario.from_dict(TWO)
    simulate(s, seed=1).jobs.to_csv(tmp_path / "jobs.csv", index=False)
    replay = replay_arrivals(s, tmp_path / "jobs.csv")
    runs = [simulate(replay, seed=k).summary for k in (2, 3)]
    # the arrivals per window are those of the trace whatever the seed; the waits are the seeds' own
    assert [w["arrivals"] for w in runs[0]["windows"]] == [w["arrivals"] for w in runs[1]["windows"]]
    assert runs[0]["wait"] != runs[1]["wait"]


def test_unix_times_are_taken_from_the_first_arrival_and_json_works(tmp_path: Path) -> None:
    # Given arrivals on Unix time (they do not fit in the run's 120 s) as JSON, one child row to leave out
    rows = [{"type": "a", "enqueued": 1.7e9 + 15.0}, {"type": "b", "enqueued": 1.7e9 + 2.5},
            {"type": "a", "enqueued": 1.7e9 + 19.0}, {"type": "a", "enqueued": 1.7e9 + 3.0, "parent": "j1"}]
    (tmp_path / "t.json").write_text(json.dumps(rows))
    # Then each type's times count from the first arrival in the file
    assert read_arrival_trace(tmp_path / "t.json", duration=120.0) == {"a": [12.5, 16.5], "b": [0.0]}
    s = replay_arrivals(Scenario.from_dict(TWO), tmp_path / "t.json")
    assert simulate(s).summary["jobs"]["arrived"] == 2  # b's job at 0 is before the 10 s warm-up


@pytest.mark.parametrize("text, said", [
    ("type,enqueued\na,1\nc,2\n", "job type(s) c not in scenario two (its types: a, b)"),
    ("type,enqueued\na,1\n", "no arrivals of job type(s) b, which arrive in scenario two"),
    ("type,enqueued\na,1\nb,soon\n", "line 3: enqueued must be a number of seconds, got 'soon'"),
    ("type,time\na,1\n", "a CSV with a header and the columns type and enqueued; missing enqueued"),
    ("type,enqueued\n", "no arrivals in it"),
])
def test_a_bad_trace_is_refused_naming_what_is_wrong(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(ScenarioError, match=said.replace("(", r"\(").replace(")", r"\)")):
        replay_arrivals(Scenario.from_dict(TWO), tmp_path / "t.csv")


def test_the_command_replays_and_refuses_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text('name = "one"\nseed = 2\nduration = 60.0\n[[queues]]\nname = "q"\n[[jobs]]\nname = "a"\n'
                        'queue = "q"\narrival = { kind = "poisson", rate = 2.0 }\n'
                        'service = { kind = "exponential", mean = 0.2 }\n[[pools]]\nname = "p"\nqueues = ["q"]\n')
    (tmp_path / "t.csv").write_text("type,enqueued\n" + "".join(f"a,{t}\n" for t in range(0, 50, 5)))
    assert main(["simulate", str(scenario), "--arrivals", "trace", str(tmp_path / "t.csv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"]["arrived"] == 10
    assert main(["simulate", str(scenario), "--arrivals", "fit", str(tmp_path / "t.csv")]) == 2
    assert "--arrivals 'fit': the mode is trace" in capsys.readouterr().err
    assert main(["simulate", str(scenario), "--arrivals", "trace", str(tmp_path / "none.csv")]) == 2
    assert "none.csv: no such file" in capsys.readouterr().err
