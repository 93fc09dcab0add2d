"""One WorkerSettings, every surface: each field of the engine's WorkerSettings reaches

- ``Worker(queues, handler, **keywords)``;
- ``qsim worker`` (its flags, through the command's own code);
- the pool worker processes of ``qsim run`` and Locust's ``--start-workers`` (their argv, read back by
  ``python -m qsim.harness.pool_worker``);
- the Scenario: an ``[engine]`` key (SharedSettings' fields) that every pool worker gets, or, for a
  per-worker field, the value a run takes from the scenario's pools, events or itself;
- the reference pages.

The fields are listed from the dataclass, so a field added to WorkerSettings is tried here on each
surface without a change to this file (a per-worker field must say where a run takes it: EXPECTED).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from qsim.cli import build_parser
from qsim.cli import worker as worker_cli
from qsim.engine import Worker, WorkerSettings
from qsim.engine.payload import DEFAULT_REDACT
from qsim.engine.settings import SettingField, SharedSettings, reference_table, setting_fields
from qsim.harness import pool_worker
from qsim.harness.processes import PoolProcessSpec, WorkerProcesses
from qsim.loadtest.workers import WorkerPool
from qsim.spec.scenario import EngineSettings, Scenario

FIELDS = setting_fields()
SHARED = [f for f in FIELDS if f.shared]
PER_WORKER = [f for f in FIELDS if not f.shared]
DOCS = Path(__file__).resolve().parents[2] / "docs"
#: Settings every variant starts from (worker_id fixed so that the derived id is the same on both sides).
BASE = WorkerSettings(queues=("a", "b"), worker_id="w-0")


async def _noop(job: Any) -> None:
    return None


def other_value(f: SettingField) -> Any:
    """A valid value of ``f`` that is not its default (a new kind of field needs a line here)."""
    special = {"queues": ("c", "a"), "weights": {"a": 3}, "redis": "redis://h:1/2", "prefix": "pfx",
               "redact": (*DEFAULT_REDACT, "card"), "worker_id": "w-7", "group": "g"}
    if f.name in special:
        return special[f.name]
    s = f.setting
    if s.none is not None and f.default is not None:
        return None
    if s.choices:
        return next(c for c in s.choices if c != f.default)
    if f.kind == "bool":
        return not f.default
    if f.kind in ("int", "auto"):
        return (f.default if isinstance(f.default, int) else 0) + 3
    if f.kind == "float":
        return (f.default or 1.0) * 2 + 0.25
    if f.kind == "str":
        return "other"
    raise AssertionError(f"no other value for {f.name} (kind {f.kind}): add one to other_value")


def variant(f: SettingField) -> WorkerSettings:
    """BASE with ``f`` changed."""
    return dataclasses.replace(BASE, **{f.name: other_value(f)})


def ids(fields: list[SettingField] | tuple[SettingField, ...]) -> list[str]:
    return [f.name for f in fields]


def test_the_fields_are_listed_from_the_dataclass() -> None:
    init = [f.name for f in dataclasses.fields(WorkerSettings) if f.init]
    assert [f.name for f in FIELDS] == init and len(init) >= 20
    assert {f.name for f in SHARED} == {f.name for f in dataclasses.fields(SharedSettings)}
    for f in FIELDS:
        assert getattr(variant(f), f.name) != getattr(BASE, f.name), f.name


# --------------------------------------------------------------------------- Worker(...)


@pytest.mark.parametrize("f", FIELDS, ids=ids(FIELDS))
def test_every_field_is_a_worker_keyword(f: SettingField) -> None:
    # Given a value of the field that is not its default, When a Worker is made with it as a keyword
    want = variant(f)
    options = {g.name: getattr(want, g.name) for g in FIELDS if g.name != "queues"}
    worker = Worker(want.queues, _noop, **options)
    # Then its settings are those; and Worker(settings, handler) takes them whole
    assert worker.settings == want
    assert Worker(want, _noop).settings is want


# --------------------------------------------------------------------------- qsim worker


def run_qsim_worker(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> WorkerSettings:
    """The settings of the Worker ``qsim worker h:handle ARGV`` makes (through cmd_worker; nothing runs)."""
    (tmp_path / "h.py").write_text("async def handle(job):\n    return None\n")
    monkeypatch.chdir(tmp_path)
    made: list[Worker] = []

    class Recording(Worker):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    def no_run(coro: Any, **_: Any) -> int:
        coro.close()
        return 0

    monkeypatch.setattr(worker_cli, "Worker", Recording)
    monkeypatch.setattr(worker_cli, "run_process", no_run)
    args = build_parser().parse_args(["worker", "h:handle", *argv])
    assert args.func(args) == 0
    assert len(made) == 1
    return made[0].settings


@pytest.mark.parametrize("f", FIELDS, ids=ids(FIELDS))
def test_every_field_is_a_qsim_worker_flag(f: SettingField, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Given the flags of a value that is not the field's default
    want = variant(f)
    argv = want.to_argv()
    assert any(a.startswith(f.flag) or a == f"--no-{f.flag[2:]}" for a in argv), argv
    # When qsim worker runs with them, Then its Worker has exactly those settings
    assert run_qsim_worker(argv, monkeypatch, tmp_path) == want


def test_the_flags_of_qsim_worker_are_the_fields() -> None:
    worker = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["worker"]
    assert reached_parser(worker) == []


def reached_parser(parser: argparse.ArgumentParser) -> list[str]:
    """The fields whose flag ``parser`` lacks."""
    flags = {s for a in parser._actions for s in a.option_strings}
    return [f.name for f in FIELDS if f.flag not in flags]


def test_a_field_a_parser_misses_is_found() -> None:
    # Given a parser made by hand that forgot one field, Then the check names it
    p = argparse.ArgumentParser()
    for f in FIELDS:
        if f.name != "batch_size":
            p.add_argument(f.flag, **f.argparse_options())
    assert reached_parser(p) == ["batch_size"]


# --------------------------------------------------------------------------- the pool worker (qsim run, Locust)


@pytest.mark.parametrize("f", FIELDS, ids=ids(FIELDS))
def test_every_field_reaches_the_pool_worker_process(f: SettingField) -> None:
    # Given a pool worker process with a value that is not the field's default
    spec = PoolProcessSpec(settings=variant(f), ready_key="k:ready")
    argv = spec.argv()
    assert argv[1:3] == ["-m", "qsim.harness.pool_worker"]
    # When the process reads its command line, Then its Worker has those settings
    worker, read = pool_worker.build(argv[3:])
    assert worker.settings == spec.settings and read == spec


# --------------------------------------------------------------------------- the Scenario


def scenario_dict(engine: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "surfaces", "duration": 10,
        "queues": [{"name": "a"}, {"name": "b"}],
        "jobs": [{"name": "j", "queue": "a", "arrival": {"kind": "poisson", "rate": 1.0},
                  "service": {"kind": "constant", "mean": 0.1}}],
        "pools": [{"name": "pool", "queues": ["b", "a"], "policy": "wrr", "weights": {"a": 3}, "workers": 1,
                   "concurrency": 5}],
        "events": [{"at": 5, "kind": "sigterm", "pool": "pool", "grace": 7}],
        "engine": engine,
    }


#: Per-worker fields: the value a run's pool worker gets from the scenario above (or from the run itself).
EXPECTED: dict[str, Any] = {
    "queues": ("b", "a"), "policy": "wrr", "weights": {"a": 3, "b": 1}, "concurrency": 5,  # [[pools]]
    "shutdown_grace": 7.0,  # events[].grace of the pool's sigterm
    "redis": "redis://127.0.0.1:1/0", "prefix": "run-prefix", "worker_id": "pool-0",  # the run's
    "keep_completed": None, "keep_completed_for": None,  # every completed job kept: the run reads them all
    "group": None, "redact": DEFAULT_REDACT, "handle_signals": True,  # the defaults
}


def pool_workers(scenario: Scenario) -> dict[str, WorkerSettings]:
    """The settings of the first process of the pool as ``qsim run`` and Locust's ``--start-workers`` start it,
    read back from its command line."""
    out = {}
    managers = {"qsim run": WorkerProcesses(scenario, EXPECTED["redis"], prefix="run-prefix", ready_key="k"),
                "--start-workers": WorkerPool(scenario, EXPECTED["redis"], prefix="run-prefix", run_id="r",
                                              grace=7.0).processes}
    for name, manager in managers.items():
        argv = manager.spec("pool", "pool-0").argv()
        manager.close()
        out[name] = pool_worker.build(argv[3:])[0].settings
    return out


@pytest.mark.parametrize("f", SHARED, ids=ids(SHARED))
def test_every_shared_field_is_an_engine_key_that_reaches_every_pool_worker(f: SettingField) -> None:
    # Given a scenario whose [engine] table sets the field to a value that is not its default
    value = other_value(f)
    scenario = Scenario.from_dict(scenario_dict({f.name: value}))
    # Then the scenario holds it, writes it back, and both runners' workers get it
    assert getattr(scenario.engine, f.name) == value
    assert scenario.to_dict()["engine"][f.name] == value
    assert Scenario.from_dict(scenario.to_dict()) == scenario
    for runner, settings in pool_workers(scenario).items():
        assert getattr(settings, f.name) == value, runner


def test_a_bad_engine_key_is_refused_with_the_engines_bound() -> None:
    from qsim.errors import ScenarioError

    for f in SHARED:
        if f.setting.low is None:
            continue
        with pytest.raises(ScenarioError, match=f"engine.{f.name} must be"):
            Scenario.from_dict(scenario_dict({f.name: -1}))


def test_every_per_worker_field_comes_from_the_scenario_or_the_run() -> None:
    # Given every per-worker field (a new one must say here where a run takes it)
    assert set(EXPECTED) == {f.name for f in PER_WORKER}
    assert all(f.setting.scenario for f in PER_WORKER)
    # When the pool's worker is started by either runner, Then it has the scenario's (or the run's) value
    scenario = Scenario.from_dict(scenario_dict({}))
    for runner, settings in pool_workers(scenario).items():
        for name, value in EXPECTED.items():
            assert getattr(settings, name) == value, (runner, name)


def test_engine_settings_are_the_shared_settings_and_the_models_own() -> None:
    shared = [f.name for f in dataclasses.fields(SharedSettings)]
    assert [f.name for f in dataclasses.fields(EngineSettings)][:len(shared)] == shared
    assert issubclass(EngineSettings, SharedSettings) and not issubclass(EngineSettings, WorkerSettings)


# --------------------------------------------------------------------------- the docs


def test_every_field_is_in_the_reference() -> None:
    table = reference_table()
    scenario_page = (DOCS / "reference" / "scenario.md").read_text(encoding="utf-8")
    api_page = (DOCS / "reference" / "api" / "engine.md").read_text(encoding="utf-8")
    assert "<!-- generate: worker-settings -->" in api_page
    for f in FIELDS:
        assert f"| `{f.name}` |" in table and f"`{f.flag}" in table
    for f in SHARED:
        assert f"| `engine.{f.name}` |" in scenario_page, f"docs/reference/scenario.md lacks engine.{f.name}"
