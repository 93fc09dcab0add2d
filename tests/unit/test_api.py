"""The flat notebook API (qsim.api, re-exported by qsim): verbs that take a Scenario, a TOML path or a
built-in name alike, sync and awaitable forms named alike and working inside a running event loop,
and an ``import qsim`` that stays light."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import qsim
import qsim.api

#: The verbs that take time: each has a sync form and an awaitable one named ``<verb>_async``.
TIMED = ("simulate", "run", "compare", "plan", "sweep", "calibrate", "probe", "advise", "autoscaling")
PACKAGES = ("calibrate", "advise")  # subpackages that are also verbs (qsim.callable_module)
HEAVY = ("simpy", "redis", "matplotlib", "scipy", "locust", "qsim.model", "qsim.harness", "qsim.analysis",
         "qsim.api", "qsim.engine", "qsim.calibrate", "qsim.advise")

TOML = """
name = "tiny"
seed = 3
duration = 60.0
[[queues]]
name = "q"
[[jobs]]
name = "a"
queue = "q"
arrival = { kind = "poisson", rate = 4.0 }
service = { kind = "exponential", mean = 0.5 }
[[pools]]
name = "p"
queues = ["q"]
workers = 3
"""


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(TOML, encoding="utf-8")
    return path


def test_import_qsim_stays_light() -> None:
    # When a fresh interpreter imports qsim
    code = f"import sys, qsim; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # Then no simulation, engine, Redis client, plotting or Locust module came with it
    assert out.strip() == "[]"


def test_every_verb_is_exported_with_its_awaitable_form() -> None:
    verbs = [n for n in qsim.api.__all__ if n != "ScenarioLike"]
    assert set(verbs) <= set(qsim.__all__)
    for name in verbs:
        assert getattr(qsim.api, name).__doc__, name
        if name not in PACKAGES:
            assert getattr(qsim, name) is getattr(qsim.api, name), name
    for verb in TIMED:
        sync, awaitable = getattr(qsim.api, verb), getattr(qsim, f"{verb}_async")
        assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(awaitable), verb
        assert list(inspect.signature(sync).parameters) == list(inspect.signature(awaitable).parameters), verb
    assert [n for n in verbs if n.endswith("_async")] == [f"{v}_async" for v in TIMED]
    assert qsim.plots.__name__ == "qsim.analysis.plots"


def test_a_package_that_is_also_a_verb_stays_callable() -> None:
    # Given the subpackages qsim.calibrate and qsim.advise, imported (Python binds them to qsim's attributes)
    import qsim.advise.core  # noqa: F401
    import qsim.calibrate.report  # noqa: F401
    # Then qsim.calibrate and qsim.advise are still the verbs, and still the packages
    for name in PACKAGES:
        package = getattr(qsim, name)
        assert callable(package) and package.__name__ == f"qsim.{name}"
        api_verb = getattr(qsim.api, name)
        assert list(inspect.signature(package).parameters)[:2] == list(inspect.signature(api_verb).parameters)[:2]
    assert qsim.calibrate.from_csv is not None and qsim.advise.advise_from is not None
    # and a function named as its package's submodule keeps the name once the submodule is imported
    from qsim.calibrate.probe import probe_scenario  # noqa: F401
    assert callable(qsim.calibrate.probe) and qsim.calibrate.probe.__name__ == "probe"
    with pytest.raises(qsim.ScenarioError, match="needs the queues"):
        qsim.calibrate("redis://127.0.0.1:1/0")


def test_a_verb_takes_a_scenario_a_path_or_a_name_alike(toml: Path) -> None:
    # Given one scenario as an object, a path (str and Path) and, for a built-in, its name
    s = qsim.load(toml)
    assert qsim.load(str(toml)) == s and qsim.load(s) is s and qsim.load(None).name == "workshop"
    # Then the model, the closed forms and the sweep give the same for each form
    assert qsim.simulate(s).summary == qsim.simulate(toml).summary == qsim.simulate(str(toml)).summary
    assert qsim.simulate("workshop", max_jobs=50).summary == qsim.simulate(qsim.load("workshop"), max_jobs=50).summary
    assert qsim.theory(toml) == qsim.theory(s) and qsim.theory(s).model == "M/M/c"
    vary = {"pools.p.workers": "3:4"}  # the --vary syntax, or a list
    by_path = qsim.sweep(toml, vary, processes=1)
    assert by_path == qsim.sweep(s, {"pools.p.workers": [3, 4]}, processes=1)
    assert qsim.with_params(toml, {"pools.p.workers": 4}).pool("p").workers == 4
    # and a plan takes its SLO as text
    p = qsim.plan(str(toml), "p95_wait<=2", {"pools.p.workers": [2, 3, 4, 5]}, processes=1)
    assert p["recommended"] is not None and p["slo"] == ["p95_wait<=2"]
    with pytest.raises(qsim.ScenarioError, match="no-such"):
        qsim.simulate("no-such")
    # and so does the model's own simulate (it used to fail on a name with AttributeError)
    from qsim.model import simulate
    assert simulate("workshop", max_jobs=50).summary == qsim.simulate("workshop", max_jobs=50).summary
    assert simulate(toml).summary == qsim.simulate(s).summary


def test_the_sync_and_awaitable_forms_work_inside_a_running_loop(toml: Path) -> None:
    async def notebook_cell() -> None:
        asyncio.get_running_loop()  # as in Jupyter: a loop runs in this thread
        direct = qsim.simulate(toml)
        assert (await qsim.simulate_async(toml)).summary == direct.summary
        assert await qsim.sweep_async(toml, {"pools.p.workers": [3]}, processes=1) == \
            qsim.sweep(toml, {"pools.p.workers": [3]}, processes=1)
        p = await qsim.plan_async(toml, ["p95_wait<=2"], {"pools.p.workers": [3, 4]}, processes=1)
        assert p["recommended"] is not None
        cal = await qsim.calibrate_async(direct.jobs)
        assert cal.scenario.jobs[0].name == "a"

    asyncio.run(notebook_cell())


def test_compare_two_runs_you_have(toml: Path) -> None:
    # Given two model runs (the second standing in for an engine run)
    a, b = qsim.simulate(toml), qsim.simulate(toml)
    # Then compare(a, b) runs nothing and compares them, from results or Summaries alike
    doc = qsim.compare(a, b)
    assert doc["ratios"]["throughput"] == 1.0 and doc == qsim.compare(a.summary, b.summary)
    assert asyncio.run(qsim.compare_async(a, b.summary)) == doc
    assert doc.checked(scenario=qsim.load(toml)).passed
    with pytest.raises(TypeError, match="two results"):
        qsim.compare(a, "redis://127.0.0.1:1/0")


def test_calibrate_takes_a_frame_a_csv_or_a_url(tmp_path: Path, toml: Path) -> None:
    jobs = qsim.simulate(toml).jobs
    path = tmp_path / "jobs.csv"
    jobs.to_csv(path, index=False)
    from_frame, from_csv = qsim.calibrate(jobs), qsim.calibrate(path)
    assert from_frame.scenario == from_csv.scenario
    assert from_frame.scenario.jobs[0].service.mean == pytest.approx(0.5, rel=0.15)
    with pytest.raises(qsim.ScenarioError, match="needs the queues"):
        qsim.calibrate("redis://127.0.0.1:1/0")
    with pytest.raises(qsim.ScenarioError, match="takes no queues"):
        qsim.calibrate(jobs, "q")
    with pytest.raises(qsim.ScenarioError, match="Redis URL"):
        qsim.calibrate(pd.DataFrame(), "q", source="bullmq")


def test_save_writes_a_scenario_that_loads_back_the_same(tmp_path: Path) -> None:
    # Given a built-in scenario changed in Python
    planned = qsim.with_params("steady", {"pools.workers.concurrency": 7})
    # When it is saved and loaded again
    path = qsim.save(planned, tmp_path / "planned.toml")
    # Then it is the same scenario, and a missing folder is a clear error (nothing created)
    assert qsim.load(path) == planned
    with pytest.raises(qsim.QsimError, match="does not exist"):
        qsim.save(planned, tmp_path / "no" / "such" / "x.toml")
    assert not (tmp_path / "no").exists()
