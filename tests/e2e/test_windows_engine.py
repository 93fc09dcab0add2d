"""The Summary's windows on the real engine: the same definitions as the model's, from the engine's
records, and a profiled scenario the engine follows window by window.

The default run keeps a short run with pool events (about 10 s); the profiled ``qsim compare --check``
(150 s of load through a step profile: 12 -> 42 -> 12 jobs/s on 8 slots, windows of 10 s) is ``long``.
It holds the engine to the model in every quantity of the default check (p50/p95 wait and latency within
10% or 20 ms, throughput 3%, dead/lost/unfinished exact) and window by window (p95 wait within 20% or
50 ms in at least 90% of the windows), and prints the per-window agreement.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qsim.cli import main
from qsim.cli.output import format_check
from qsim.cli.windows import format_window_comparison
from qsim.harness.run import run_scenario
from qsim.model import simulate
from qsim.spec.scenario import Scenario

pytestmark = pytest.mark.redis

PROFILED = """
name = "profiled"
seed = 5
duration = 150.0
warmup = 5.0
window = 10.0

[[queues]]
name = "work"

[[jobs]]
name = "task"
queue = "work"
arrival = { kind = "profile", points = [[0, 12.0], [50, 12.0], [50, 42.0], [100, 42.0], [100, 12.0]], shape = "step" }
service = { kind = "lognormal", mean = 0.15, cv = 1.2 }

[[pools]]
name = "workers"
queues = ["work"]
workers = 2
concurrency = 4

[engine]   # the engine's per-job overhead on a small 2-core VM (qsim calibrate --probe)
fetch_overhead = 0.001
ack_overhead = 0.0015
"""


@pytest.mark.timeout(120)
def test_engine_windows_follow_its_records_and_its_processes(redis_url: str) -> None:
    # Given a short run whose pool gains a process at 3 s, in windows of 2 s
    s = Scenario.from_dict({
        "name": "windows", "seed": 2, "duration": 8.0, "warmup": 1.0, "window": 2.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 20.0},
                  "service": {"kind": "exponential", "mean": 0.05}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 2}],
        "events": [{"at": 3.0, "kind": "start", "pool": "p", "count": 1}],
        "engine": {"lock_duration": 2.0, "stalled_interval": 1.0}})
    # When it runs on the engine
    result = run_scenario(s, redis_url)
    summary, w = result.summary, result.summary["windows"]
    # Then the windows run from warm-up in steps of 2 s and add up to the whole run
    assert [x["start"] for x in w] == [1.0 + 2 * i for i in range(len(w))] and len(w) >= 4
    assert sum(x["arrivals"] for x in w) == summary["jobs"]["arrived"] == int(summary["jobs"]["completed"])
    assert sum(x["throughput"] for x in w) * 2.0 == pytest.approx(summary["jobs"]["completed"])
    # the pool's processes: 1 until the new one took work (after its start-up), then 2
    started = result.records.workers["p"]
    assert [n for _, n in started] == [1, 2] and 3.0 <= started[1][0] < 7.0
    assert w[0]["workers"] == {"p": 1.0} and w[-1]["workers"] == {"p": 2.0}
    assert all(x["oldest_age"] >= (x["wait_p95"] or 0.0) for x in w)
    # and the model's windows of the same run have the same shape
    model = simulate(s).summary["windows"]
    assert [x["arrivals"] for x in model] == [x["arrivals"] for x in w][:len(model)]


@pytest.mark.long
@pytest.mark.timeout(420)
def test_the_engine_follows_a_profile_window_by_window(redis_url: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "profiled.toml"
    path.write_text(PROFILED)
    code = main(["compare", str(path), "--check", "--redis", redis_url, "--json", "--out", str(tmp_path / "out")])
    doc = json.loads(capsys.readouterr().out)
    check = doc["check"]
    report = format_window_comparison(doc["model"], doc["engine"]) + "\n\n" + format_check(check)
    with capsys.disabled():
        print("\n" + report)
    rows = {q["quantity"]: q for q in check["quantities"]}
    agreement = rows["windows.wait_p95"]["windows"]
    # the per-window p95 wait within 20% or 50 ms, or inside the model's 5-95% band over other seeds (the model's
    # windows carry them), in at least 90% of the windows
    assert doc["bands"]["replications"] >= 5 and rows["windows.wait_p95"]["band_replications"] == \
        doc["bands"]["replications"]
    assert all(set(w["bands"]) == {"wait_p95", "mean_wait"} for w in doc["model"]["windows"])
    assert agreement["compared"] >= 12 and agreement["share"] >= 0.9, report
    # (at low load the model's waits are its fixed fetch overhead, the same for every seed: a band of a point,
    # and the tolerance judges those windows)
    assert agreement["banded"] == agreement["compared"] and agreement["agreeing"] >= agreement["inside_band"], report
    # and the whole-run figures within today's tolerances
    assert check["passed"] and code == 0, report
    assert doc["engine"]["jobs"]["lost"] == 0
    assert (tmp_path / "out" / "windows.png").exists() and (tmp_path / "out" / "comparison.json").exists()
