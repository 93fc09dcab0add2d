"""``qsim compare --check``: verdicts, floors, the tolerance file, exit codes and the JSON part
(the engine replaced by a stand-in here; tests/e2e/test_fidelity_check.py runs the real one)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import qsim.analysis.fidelity.compare as compare_module
from qsim.analysis.fidelity.check import DEFAULT_TOLERANCES, Tolerance, check, check_document, dead_fixed_by_draws, \
    load_tolerances
from qsim.analysis.fidelity.compare import compare_summaries
from qsim.cli import main
from qsim.errors import ToleranceError
from qsim.model import simulate
from qsim.scenarios import builtin


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    return simulate(builtin("poison-dlq"), max_jobs=200).summary


def engine_like(model: dict[str, Any], **changes: float) -> dict[str, Any]:
    """The model's Summary with some numbers changed, as an engine measurement."""
    e = copy.deepcopy(model)
    e["source"] = "engine"
    for path, value in changes.items():
        node = e
        *parts, last = path.split("__")
        for p in parts:
            node = node[p]
        node[last] = value
    return e


def verdicts(model: dict[str, Any], engine: dict[str, Any], **kw: Any) -> dict[str, str]:
    return {v.quantity: v.verdict for v in check(model, engine, **kw)}


def test_defaults_are_the_issue_s_tolerances() -> None:
    d = DEFAULT_TOLERANCES
    assert all(d[f"{w}.{p}"] == Tolerance(0.10, 0.02) for w in ("wait", "latency") for p in ("p50", "p95"))
    assert d["throughput"] == Tolerance(0.03, 0.0)
    assert d["jobs.dead"] == d["jobs.lost"] == d["jobs.unfinished"] == Tolerance(0.0, 0.0)


def test_within_tolerance_passes_and_outside_fails(model: dict[str, Any]) -> None:
    lat = model["latency"]["p95"]
    assert set(verdicts(model, engine_like(model)).values()) == {"pass"}
    v = verdicts(model, engine_like(model, latency__p95=lat * 1.09, throughput=model["throughput"] * 0.975))
    assert v["latency.p95"] == "pass" and v["throughput"] == "pass"
    v = verdicts(model, engine_like(model, latency__p95=lat * 1.12, throughput=model["throughput"] * 0.96))
    assert v["latency.p95"] == "fail" and v["throughput"] == "fail"


def test_the_floor_keeps_tiny_times_from_failing_on_ratio(model: dict[str, Any]) -> None:
    # a p50 wait of 1 ms against 2 ms is a ratio of 2, but within the 20 ms floor
    m = engine_like(model, wait__p50=0.001)
    assert verdicts(m, engine_like(model, wait__p50=0.002))["wait.p50"] == "pass"
    assert verdicts(m, engine_like(model, wait__p50=0.0215))["wait.p50"] == "fail"
    # where 10% is more than the floor, 10% is the limit
    m = engine_like(model, wait__p95=1.0)
    assert verdicts(m, engine_like(model, wait__p95=1.095))["wait.p95"] == "pass"
    assert verdicts(m, engine_like(model, wait__p95=0.89))["wait.p95"] == "fail"


def test_counts_are_exact_and_lost_must_be_zero(model: dict[str, Any]) -> None:
    dead = model["jobs"]["dead"]
    assert dead > 0
    assert verdicts(model, engine_like(model, jobs__dead=dead + 1))["jobs.dead"] == "fail"
    assert verdicts(model, engine_like(model, jobs__unfinished=1))["jobs.unfinished"] == "fail"
    rows = check(model, engine_like(model, jobs__lost=1))
    lost = next(r for r in rows if r.quantity == "jobs.lost")
    assert lost.verdict == "fail" and "lost" in lost.note
    doc = check_document(rows)
    assert doc["passed"] is False and doc["failed"] == ["jobs.lost"]


def test_dead_is_skipped_where_crashes_decide_it() -> None:
    kill = builtin("sigkill-recovery")
    assert dead_fixed_by_draws(kill)  # one kill, max_stalled 1: a job stalls once at most
    s = kill.__class__.from_dict({**kill.to_dict(), "engine": {**kill.to_dict()["engine"], "max_stalled": 0}})
    assert not dead_fixed_by_draws(s)
    m = simulate(s, max_jobs=50).summary
    v = {r.quantity: r for r in check(m, engine_like(m, jobs__dead=m["jobs"]["dead"] + 2), scenario=s)}
    assert v["jobs.dead"].verdict == "skip" and "sigkill" in v["jobs.dead"].note
    assert dead_fixed_by_draws(builtin("poison-dlq")) and dead_fixed_by_draws(builtin("timeouts"))


def test_a_missing_statistic_on_one_side_fails(model: dict[str, Any]) -> None:
    assert verdicts(model, engine_like(model, latency__p95=None))["latency.p95"] == "fail"  # type: ignore[arg-type]


def test_the_tolerance_file_overrides_and_adds(tmp_path: Path, model: dict[str, Any]) -> None:
    f = tmp_path / "tol.toml"
    f.write_text('["wait.p95"]\nrel = 0.5\n\n["by_type.charge.latency.p50"]\nrel = 0.1\nabs = 0.001\n\n'
                 '["jobs.dead"]\ncheck = false\n')
    tols = load_tolerances(f, model)
    assert tols["wait.p95"] == Tolerance(0.5, 0.02) and tols["jobs.dead"].check is False
    assert tols["by_type.charge.latency.p50"] == Tolerance(0.1, 0.001)
    lat = model["by_type"]["charge"]["latency"]["p50"]
    e = engine_like(model, jobs__dead=0, by_type__charge__latency__p50=lat * 1.2)
    v = verdicts(model, e, tolerances=tols)
    assert v["jobs.dead"] == "skip" and v["by_type.charge.latency.p50"] == "fail"


@pytest.mark.parametrize("text,named", [
    ('["wait.p95"]\nrel = -1\n', '["wait.p95"].rel must be a number >= 0, got -1'),
    ('["wait.p95"]\nrel = "a"\n', '["wait.p95"].rel must be a number >= 0'),
    ('["wait.p95"]\nrell = 0.1\n', "rell is not a known key (did you mean 'rel'?)"),
    ('["wait.p95"]\ncheck = 1\n', '["wait.p95"].check must be true or false'),
    ('["wait.p955"]\nrel = 0.1\n', "is not a number of the Summary (did you mean 'wait.p95'?)"),
    ('"wait.p95" = 0.1\n', '["wait.p95"] must be a table'),
    ("[not toml\n", "not valid TOML"),
])
def test_a_bad_tolerance_file_is_an_error_naming_the_key(tmp_path: Path, model: dict[str, Any], text: str,
                                                         named: str) -> None:
    f = tmp_path / "tol.toml"
    f.write_text(text)
    with pytest.raises(ToleranceError) as e:
        load_tolerances(f, model)
    assert named in str(e.value) and str(f) in str(e.value)
    with pytest.raises(ToleranceError, match="cannot read"):
        load_tolerances(tmp_path / "nope.toml", model)


# --------------------------------------------------------------------------- the command


@pytest.fixture
def fake_engine(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace the engine run of ``qsim compare`` by the model's Summary, changed as the test says."""
    state: dict[str, Any] = {"changes": {}, "ran": 0}

    def fake_compare(scenario: Any, url: Any, *, seed: Any = None, max_jobs: Any = None, **_: Any) -> Any:
        state["ran"] += 1
        model = simulate(scenario, seed=seed, max_jobs=max_jobs).summary
        return compare_summaries(model, engine_like(model, **state["changes"]))

    monkeypatch.setattr(compare_module, "compare", fake_compare)
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # never used: the engine is the stand-in
    return state


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_check_exits_0_within_tolerance_and_prints_the_verdict_table(
        capsys: pytest.CaptureFixture[str], fake_engine: dict[str, Any]) -> None:
    code, out, _ = run(capsys, "compare", "poison-dlq", "--check", "--jobs", "100")
    assert code == 0
    head = next(line for line in out.splitlines() if line.startswith("quantity"))
    assert head.split() == ["quantity", "model", "engine", "ratio", "tolerance", "verdict"]
    assert "wait.p95" in out and "±10% or 0.02 s" in out and "check passed: 8 of 8" in out


def test_compare_check_exits_1_when_out_of_tolerance(capsys: pytest.CaptureFixture[str],
                                                     fake_engine: dict[str, Any]) -> None:
    fake_engine["changes"] = {"throughput": 1.0, "jobs__lost": 2}
    code, out, _ = run(capsys, "compare", "poison-dlq", "--check", "--jobs", "100")
    assert code == 1 and "check FAILED: 2 of 8 out of tolerance: throughput, jobs.lost" in out
    # without --check the same comparison exits 0 (it only reports)
    code, _, _ = run(capsys, "compare", "poison-dlq", "--jobs", "100")
    assert code == 0


def test_compare_check_json_adds_a_check_part(capsys: pytest.CaptureFixture[str], fake_engine: dict[str, Any]) -> None:
    fake_engine["changes"] = {"wait__p95": 100.0}
    code, out, _ = run(capsys, "compare", "poison-dlq", "--check", "--jobs", "100", "--json")
    doc = json.loads(out)
    assert code == 1 and set(doc) == {"model", "engine", "ratios", "check"}
    assert doc["check"]["passed"] is False and doc["check"]["failed"] == ["wait.p95"]
    row = next(q for q in doc["check"]["quantities"] if q["quantity"] == "wait.p95")
    assert set(row) == {"quantity", "model", "engine", "ratio", "rel", "abs", "limit", "diff", "verdict", "note"}
    assert row["verdict"] == "fail" and row["rel"] == 0.1 and row["abs"] == 0.02
    code, out, _ = run(capsys, "compare", "poison-dlq", "--jobs", "100", "--json")
    assert code == 0 and set(json.loads(out)) == {"model", "engine", "ratios"}  # unchanged without --check


def test_a_bad_tolerance_file_exits_2_before_the_engine_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              fake_engine: dict[str, Any]) -> None:
    f = tmp_path / "tol.toml"
    f.write_text('["latency.p95"]\nabs = -0.5\n')
    code, out, err = run(capsys, "compare", "poison-dlq", "--tolerance", str(f), "--jobs", "50")
    assert code == 2 and out == "" and fake_engine["ran"] == 0
    assert err.strip() == f'qsim compare: {f}: ["latency.p95"].abs must be a number >= 0, got -0.5'
    # a good file implies --check
    f.write_text('["wait.p95"]\nrel = 0.2\n')
    code, out, _ = run(capsys, "compare", "poison-dlq", "--tolerance", str(f), "--jobs", "50")
    assert code == 0 and fake_engine["ran"] == 1 and "±20% or 0.02 s" in out


@pytest.mark.parametrize("name", ["flows-fanout", "wrr", "workshop"])
def test_the_quantities_of_a_scenario_are_its_summary_numbers_without_a_run(name: str) -> None:
    from qsim.analysis.fidelity.check import quantities_of, summary_paths

    s = builtin(name)
    assert sorted(quantities_of(s)) == sorted(summary_paths(simulate(s).summary))
