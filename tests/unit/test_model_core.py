"""The model's core: SimPy internals behind one module, recorder strategies, mechanisms behind small contexts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import simpy

import qsim.model
from qsim.model import Model, simulate
from qsim.model.core import ModelCore
from qsim.model.schedule import Alarm
from qsim.spec.scenario import Scenario
from qsim.spec.workload import draw_jobs, draw_workload

MODEL = Path(qsim.model.__file__).parent


def test_an_alarm_fires_in_the_order_a_timeout_of_that_time_would() -> None:
    env = simpy.Environment()
    fired: list[tuple[str, float]] = []
    first = simpy.Timeout(env, 1.0)
    first.callbacks.append(lambda e: fired.append(("timeout before", env.now)))
    alarm = Alarm(env, lambda a: fired.append((f"alarm {a.data}", a.at)), data=7)
    alarm.set(1.0)
    after = simpy.Timeout(env, 1.0)
    after.callbacks.append(lambda e: fired.append(("timeout after", env.now)))
    env.run()
    assert fired == [("timeout before", 1.0), ("alarm 7", 1.0), ("timeout after", 1.0)]
    alarm.set(2.5)  # set again once it fired: the same event, no new object
    env.run()
    assert fired[-1] == ("alarm 7", 2.5) and env.now == 2.5 and alarm.ok


def test_simpy_internals_are_used_in_schedule_py_only() -> None:
    internals = re.compile(r"\._(queue|eid|now|ok|value)\b")  # env._queue, env._eid, env._now, ev._ok, ev._value
    users = sorted(p.name for p in MODEL.glob("*.py") if internals.search(p.read_text(encoding="utf-8")))
    assert users == ["schedule.py"]


def test_the_mechanisms_see_the_core_only_through_their_context() -> None:
    for name in ("retries.py", "flows.py", "events.py"):
        tree = ast.parse((MODEL / name).read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "qsim.model.context" in imported, name
        assert not imported & {"qsim.model.core", "qsim.model.run"}, name


class Counting:
    """A recorder strategy of its own: counts starts and completions, keeps the waits."""

    def __init__(self, core: ModelCore) -> None:
        self.queued = None
        self.every = float("inf")
        self.enqueued = core.jobs.enqueued
        self.starts = self.completions = 0
        self.waits: list[float] = []

    def start(self) -> None:
        pass

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        self.starts += 1
        self.waits.append(now - self.enqueued[job])

    def completed(self, job: int, slot: int, now: float) -> None:
        self.completions += 1

    def settled(self, job: int, outcome: int, now: float) -> None:
        raise AssertionError("a core run settles jobs as they complete")

    def tick(self) -> None:
        pass


def test_the_core_runs_any_recorder_strategy_once_per_attempt() -> None:
    s = Scenario.from_dict({
        "name": "c", "seed": 2, "duration": 60.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 3.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2}]})
    draws = draw_jobs(s)
    core = ModelCore(s, draws, recorder=Counting)
    rec = core.recorder
    assert isinstance(rec, Counting)
    core.run(until=1e9)
    assert rec.starts == rec.completions == core.settled == len(draws) > 100
    waits = simulate(s).jobs.eval("started - enqueued").to_numpy()  # the same waits as the records-on run
    assert np.array_equal(np.sort(rec.waits), np.sort(waits))


def test_the_core_is_built_whole() -> None:
    # Given every module of the model
    for path in sorted(MODEL.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # Then nothing is set on the core (or a model) from outside it, after its constructor ...
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                    where = f"{path.name}:{t.lineno}: {t.value.id}.{t.attr} ="
                    assert t.value.id not in ("core", "ctx", "model"), where
        # ... and no object is made with __new__ and completed by a second initialiser
        calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
        assert not calls & {"__new__", "_build", "bind"}, path.name
    # And a core built from its constructor alone has its mechanisms in place
    s = Scenario.from_dict({
        "name": "w", "seed": 1, "duration": 30.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                  "service": {"kind": "exponential", "mean": 0.5}, "fail_prob": 0.3, "attempts": 2}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2}],
        "events": [{"at": 10.0, "kind": "sigterm", "pool": "p", "count": 1, "grace": 1.0}]})
    m = Model.from_workload(draw_workload(s))
    assert m.core.events is not None and m.core.flows is None and m.core.recorder.every
    assert m.run().summary["jobs"]["failed_attempts"] > 0


def test_a_model_takes_a_workload_or_hand_made_draws_not_both() -> None:
    s = Scenario.from_dict({
        "name": "w", "seed": 1, "duration": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2}]})
    w = draw_workload(s, seed=4)
    assert Model(w).run().summary == Model(s, w.arrivals, seed=4).run().summary
    with pytest.raises(TypeError, match="seed"):
        Model(s, w.arrivals)
    with pytest.raises(TypeError, match="workload"):
        Model(w, seed=4)
