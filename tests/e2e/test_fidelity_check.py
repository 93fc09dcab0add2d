"""``qsim compare NAME --check`` on the real engine, for every scenario of the standard set.

Each must pass with the default tolerances (p50/p95 within 10% or 20 ms, throughput 3%,
dead/lost/unfinished exact). The set is enumerated from :data:`qsim.scenarios.STANDARD`, so a
scenario added there is checked here without an edit: in the ``long`` step, at full length,
unless :data:`CUT` says otherwise. Where a cut keeps what the scenario shows, a run stops its
arrivals after the first N jobs (``--jobs``): past the event of sigterm-grace, sigkill-recovery
and scale-up, over several bursts, windows or flows. The default run keeps two short ones
(keyed-rate-limit: keyed windows in fetch.lua; poison-dlq: retries, backoff, the DLQ; about
20 s); the others are marked ``long`` (CI's second step, or ``--long``): about 4 minutes, and ``alone`` (CI runs
them one at a time).
``benchmarks/fidelity.py`` runs the whole set with several seeds and a calibrated overhead.

A scenario that starts processes (scale-up) is checked with this machine's process start-up, as
the run itself measured it (``[engine] start_delay``: the file's 1 s is one machine's figure; a
loaded 2-core machine takes 1.2 s and more, and every second of it is a second of backlog). The
model is run again with the measured start-up and held to the engine by the same check.
``test_a_noisy_tenants_5000_job_backlog_stays_within_tolerance`` (``long``) holds keyed-rate-limit's tenants
with a noisy tenant's backlog of 5,000 jobs (per-key lanes) to the same tolerances.

A run that fails its check is measured again, at most twice (``waiting.measured_until_passed``): on a shared
machine one run of a timing check can be slowed by other work (seen in CI: a noisy backlog at 0.85 of the
model's throughput, which the next runs and every run on an idle machine or beside three CPU hogs met
within 1 %), where an engine that is off fails all three. The earlier runs' verdicts go to the output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import qsim
from qsim.cli import main
from qsim.cli.output import format_check
from qsim.scenarios import STANDARD
from waiting import measured_until_passed

pytestmark = [pytest.mark.redis, pytest.mark.slow]

#: Jobs per run where the whole scenario is longer than its point needs (None: every job).
CUT: dict[str, int | None] = {
    "keyed-rate-limit": 60, "poison-dlq": 150,
    "steady": 400, "priority-starvation": 300, "wrr": 300, "concurrency-limit": 250, "timeouts": 150,
    "sigterm-grace": 100, "sigkill-recovery": 200, "flows-fanout": 60, "bursty": 240, "scale-up": 450,
    "mixed-lengths": 100,
}
#: The short ones in the default run; the rest in the ``long`` step.
DEFAULT_RUN = ("keyed-rate-limit", "poison-dlq")
#: The long ones run in CI one at a time (marker ``alone``): a run beside them moves the engine's per-job overhead.
LONG = [pytest.mark.long, pytest.mark.alone]
CASES = [pytest.param(name, CUT.get(name), marks=() if name in DEFAULT_RUN else LONG, id=name) for name in STANDARD]


def test_every_standard_scenario_is_checked_once() -> None:
    assert [c.values[0] for c in CASES] == list(STANDARD) and set(DEFAULT_RUN) <= set(STANDARD)
    assert set(CUT) <= set(STANDARD), "a cut for a scenario that is no longer standard"


@pytest.mark.timeout(450)
@pytest.mark.parametrize("name,jobs", CASES)
def test_the_engine_behaves_as_the_model_plans(name: str, jobs: int | None, redis_url: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    scenario = qsim.load(name)

    def measure() -> Any:
        if any(e.kind == "start" for e in scenario.events):
            return checked_with_measured_start_up(scenario, jobs, redis_url)
        cut = ["--jobs", str(jobs)] if jobs is not None else []
        code = main(["compare", name, "--check", *cut, "--redis", redis_url, "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert code == (0 if doc["check"]["passed"] else 1)
        return doc

    runs = measured_until_passed(measure, lambda doc: doc["check"]["passed"],
                                 describe=lambda doc: format_check(doc["check"]))
    doc = runs[-1]
    check = doc["check"]
    assert check["passed"], f"{name}, {len(runs)} runs, the last:\n{format_check(check)}"
    assert all(run["engine"]["jobs"]["lost"] == 0 for run in runs), "a run lost jobs"  # (no run may hide a loss)
    assert doc["engine"]["jobs"]["arrived"] == doc["model"]["jobs"]["arrived"]
    assert {q["quantity"] for q in check["quantities"]} >= {"wait.p50", "wait.p95", "latency.p50", "latency.p95",
                                                            "throughput", "jobs.dead", "jobs.lost"}


def start_up(engine: qsim.EngineResult, scenario: qsim.Scenario) -> float:
    """This run's process start-up: from each ``start`` event to the slot count's next step up, the mean."""
    steps = engine.records.slots
    delays = [next(t for (t, n), (_, before) in zip(steps[1:], steps) if t >= e.at and n > before) - e.at
              for e in scenario.events if e.kind == "start"]
    return sum(delays) / len(delays)


def checked_with_measured_start_up(scenario: qsim.Scenario, jobs: int | None, redis_url: str) -> qsim.Comparison:
    """``qsim compare --check``'s document for a scenario that starts processes, the model given the
    start-up the engine run measured."""
    engine = qsim.run(scenario, redis_url, max_jobs=jobs)
    delay = start_up(engine, scenario)
    assert 0 < delay < 5, f"processes took {delay:.2f} s to start"
    model = qsim.simulate(qsim.with_params(scenario, {"engine.start_delay": delay}), max_jobs=jobs)
    return qsim.compare(model, engine).checked(scenario=scenario)


#: keyed-rate-limit with a noisy tenant: acme's 6,000 jobs arrive in four bursts (a backlog of 5,400 at its
#: peak) under 200 starts/s per tenant; globex and the anonymous jobs have room all along.
NOISY_BACKLOG = """
name = "noisy-backlog"
seed = 15
duration = 4.0

[[queues]]
name = "webhooks"
rate_limit = { max = 200, per = 1.0, key = "tenant" }

[[jobs]]
name = "acme-backlog"
queue = "webhooks"
arrival = { kind = "burst", rate = 1500.0, size = 1500 }
service = { kind = "constant", mean = 0.01 }
data = { tenant = "acme" }

[[jobs]]
name = "globex-hook"
queue = "webhooks"
arrival = { kind = "poisson", rate = 5.0 }
service = { kind = "constant", mean = 0.01 }
data = { tenant = "globex" }

[[jobs]]
name = "anonymous-hook"
queue = "webhooks"
arrival = { kind = "poisson", rate = 3.0 }
service = { kind = "constant", mean = 0.01 }

[[pools]]
name = "senders"
queues = ["webhooks"]
workers = 2
concurrency = 8

[engine]
fetch_overhead = 0.001
ack_overhead = 0.0015
"""


@pytest.mark.long
@pytest.mark.alone
@pytest.mark.timeout(450)
def test_a_noisy_tenants_5000_job_backlog_stays_within_tolerance(redis_url: str, tmp_path: Any,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Given keyed-rate-limit's tenants, one of them with a backlog of 5,400 jobs at its peak
    path = tmp_path / "noisy-backlog.toml"
    path.write_text(NOISY_BACKLOG)
    # When model and engine run it
    def measure() -> tuple[int, Any]:
        code = main(["compare", str(path), "--check", "--redis", redis_url, "--json"])
        return code, json.loads(capsys.readouterr().out)

    runs = measured_until_passed(measure, lambda run: run[1]["check"]["passed"],
                                 describe=lambda run: format_check(run[1]["check"]))
    code, doc = runs[-1]
    assert all(run["engine"]["jobs"]["lost"] == 0 for _, run in runs), "a run lost jobs"
    check = doc["check"]
    model, engine = doc["model"], doc["engine"]
    quiet = {t: (model["by_type"][t]["wait"], engine["by_type"][t]["wait"]) for t in ("globex-hook", "anonymous-hook")}
    print("\n" + format_check(check), {t: (round(m["p50"], 4), round(e["p50"], 4), round(e["p95"], 4))
                                       for t, (m, e) in quiet.items()})
    # Then the engine is within the default tolerances of the model (the backlog drains at the limit)
    assert check["passed"], format_check(check)
    assert code == 0 and engine["by_queue"]["webhooks"]["max_depth"] >= 5000
    # and the quiet tenants start at once, as the model's lanes say (before per-key lanes: ~30 s behind the
    # backlog). Their tail is the moments acme's window has room: its older jobs go first then, at most a
    # window's worth (200 jobs on 16 slots of 10 ms: ~0.13 s, longer as the engine's starts lag the window)
    for t, (m, e) in quiet.items():
        assert abs(e["p50"] - m["p50"]) <= 0.02 and e["p95"] < 0.5, (t, m, e)
