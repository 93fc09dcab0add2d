"""The built-in scenarios: the standard set parses, says what it shows, simulates quickly, is listed by
``qsim scenarios`` and loads by name everywhere a SCENARIO is asked for."""

from __future__ import annotations

import json
import time
from importlib import resources

import pytest

from qsim.cli import main
from qsim.harness.plan import plan_jobs
from qsim.model import simulate
from qsim.scenarios import BUILTIN, STANDARD, builtin, describe

ISSUE_MECHANISMS = {  # what the issue asks the set to demonstrate -> the scenario that does
    "steady lognormal load": "steady", "priority starvation": "priority-starvation",
    "weighted round-robin": "wrr", "global concurrency limit": "concurrency-limit",
    "keyed rate limit": "keyed-rate-limit", "poison jobs, retries, DLQ": "poison-dlq", "timeouts": "timeouts",
    "SIGTERM under load with a short grace": "sigterm-grace", "SIGKILL and stalled recovery": "sigkill-recovery",
    "flows and fan-out": "flows-fanout", "bursty arrivals": "bursty", "a scale-up event": "scale-up",
    "fetching ahead with 1 ms and multi-second jobs (issue 25)": "mixed-lengths",
}


def test_the_standard_set_covers_every_mechanism_of_the_issue() -> None:
    assert set(ISSUE_MECHANISMS.values()) == set(STANDARD) and BUILTIN == ("workshop", *STANDARD)


@pytest.mark.parametrize("name", BUILTIN)
def test_every_builtin_parses_says_what_it_shows_and_simulates_quickly(name: str) -> None:
    s = builtin(name)
    assert s.name == name and s.description and "\n" not in s.description
    text = resources.files("qsim.scenarios").joinpath(f"{name}.toml").read_text()
    assert text.startswith("# ") and text.count("\n#") >= 2  # its comments say what it demonstrates
    t = time.perf_counter()
    r = simulate(s)
    assert time.perf_counter() - t < 10.0
    j = r.summary["jobs"]
    assert j["lost"] == 0 and j["unfinished"] == 0 and j["completed"] > 30
    if name in STANDARD:  # small enough for the engine: arrivals within 30 s, a few processes, drained soon
        assert s.duration <= 30 and sum(p.workers for p in s.pools) <= 4
        assert r.jobs["finished"].max() < s.duration + 30


def test_each_scenario_shows_its_mechanism_in_the_model() -> None:
    by = {n: simulate(builtin(n)) for n in ("priority-starvation", "keyed-rate-limit", "poison-dlq", "timeouts",
                                            "sigterm-grace", "sigkill-recovery", "scale-up", "wrr")}
    ps = by["priority-starvation"].summary["by_type"]
    assert ps["report"]["wait"]["p50"] > 4 * ps["interactive"]["wait"]["p50"]
    kr = by["keyed-rate-limit"].summary["by_type"]
    assert kr["acme-hook"]["wait"]["p95"] > 3.0 and kr["globex-hook"]["wait"]["p95"] < 0.05
    assert by["poison-dlq"].summary["jobs"]["dead"] > 0
    assert (by["timeouts"].records.attempts["result"] == "timeout").sum() > 10
    assert (by["sigterm-grace"].records.attempts["result"] == "cutoff").sum() >= 1
    assert by["sigkill-recovery"].summary["jobs"]["stalled"] >= 1
    assert by["scale-up"].records.slots == ((0.0, 4), (13.0, 12))  # [engine] start_delay 1.0
    wrr = by["wrr"].summary["by_queue"]
    assert wrr["email"]["wait"]["p50"] > 4 * wrr["bulk"]["wait"]["p50"] > 1.0  # both backlogged, email 3x faster


def test_qsim_scenarios_lists_every_builtin_one_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(BUILTIN)
    for line, name in zip(lines, BUILTIN):
        assert line.split(None, 1)[1] == describe(name)
    assert main(["scenarios", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in doc["scenarios"]] == list(BUILTIN)


def test_builtins_load_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("keyed-rate-limit", "sigkill-recovery"):
        assert main(["simulate", name, "--json", "--jobs", "50"]) == 0
        assert json.loads(capsys.readouterr().out)["scenario"] == name
    assert main(["simulate", "no-such-scenario"]) == 2
    assert "built-in scenarios: workshop, steady" in capsys.readouterr().err


def test_job_data_travels_in_every_planned_payload() -> None:
    plan = plan_jobs(builtin("keyed-rate-limit"), max_jobs=40)
    tenants = {(p.type, p.payload.get("tenant")) for p in plan}
    assert tenants == {("acme-hook", "acme"), ("globex-hook", "globex"), ("anonymous-hook", None)}
    assert all({"s", "x"} <= set(p.payload) for p in plan)
