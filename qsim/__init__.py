"""qsim: plan and load-test Redis-backed job queues.

The model (:mod:`qsim.model`) predicts, the engine (:mod:`qsim.engine`) runs, and
both describe the same :class:`Scenario` with the same Summary. A notebook needs
only this namespace (:mod:`qsim.api`)::

    import qsim
    r = qsim.simulate("workshop")          # a Scenario, a TOML path or a built-in name
    e = await qsim.run_async("workshop")   # the real engine, on a throwaway redis-server
    qsim.compare(r, e)                     # side by side; qsim.plan, qsim.sweep, qsim.theory, qsim.plots ...

The verbs, the result types and :mod:`qsim.analysis.plots` are imported on first
use: ``import qsim`` stays light (no SimPy, Redis client or matplotlib until needed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from qsim.errors import (
    CalibrationError,
    EngineError,
    HarnessError,
    JobNotFound,
    LockLost,
    NotSupportedError,
    PayloadError,
    QsimError,
    RedisUnavailable,
    ScenarioError,
    TheoryNotApplicable,
    UnrecoverableError,
)
from qsim.results.records import Records
from qsim.results.summary import Summary, summarize
from qsim.spec.scenario import Scenario

if TYPE_CHECKING:  # what the lazy names below are, for type checkers and editors
    from qsim.advise import Advice
    from qsim.analysis import plots
    from qsim.analysis.fidelity.compare import Comparison
    from qsim.analysis.plan.report import PlanResult
    from qsim.analysis.slo.language import SLO
    from qsim.analysis.theory import TheoryResult
    from qsim.api import (
        advise,
        advise_async,
        autoscaling,
        autoscaling_async,
        calibrate,
        calibrate_async,
        compare,
        compare_async,
        load,
        load_k8s,
        manifest,
        save,
        plan,
        plan_async,
        probe,
        probe_async,
        run,
        run_async,
        simulate,
        simulate_async,
        sweep,
        sweep_async,
        theory,
        with_params,
    )
    from qsim.calibrate import Calibration
    from qsim.calibrate.overhead import Overhead
    from qsim.harness.run import EngineResult
    from qsim.harness.server import RedisServer
    from qsim.model import ModelResult

__version__ = "0.1.0"

#: Names imported on first use: name -> the module that defines it (or is it: ``plots``, ``calibrate``, ``advise``).
_LAZY = {
    **dict.fromkeys(["load", "save", "with_params", "simulate", "simulate_async", "run", "run_async", "compare",
                     "compare_async", "plan", "plan_async", "sweep", "sweep_async", "calibrate_async", "probe",
                     "probe_async", "advise_async", "theory", "autoscaling", "autoscaling_async", "manifest",
                     "load_k8s"], "qsim.api"),
    "plots": "qsim.analysis.plots",
    # packages that are also verbs (qsim.callable_module): qsim.calibrate(...) and qsim.calibrate.from_redis(...)
    "calibrate": "qsim.calibrate",
    "advise": "qsim.advise",
    "ModelResult": "qsim.model",
    "EngineResult": "qsim.harness.run",
    "RedisServer": "qsim.harness.server",
    "Comparison": "qsim.analysis.fidelity.compare",
    "PlanResult": "qsim.analysis.plan.report",
    "SLO": "qsim.analysis.slo.language",
    "TheoryResult": "qsim.analysis.theory",
    "Calibration": "qsim.calibrate",
    "Overhead": "qsim.calibrate.overhead",
    "Advice": "qsim.advise",
}

__all__ = [
    # the verbs (qsim.api): each takes a Scenario, a TOML path or a built-in name
    "load", "save", "with_params",
    "simulate", "simulate_async",
    "run", "run_async",
    "compare", "compare_async",
    "plan", "plan_async",
    "sweep", "sweep_async",
    "calibrate", "calibrate_async",
    "probe", "probe_async",
    "advise", "advise_async",
    "theory",
    "autoscaling", "autoscaling_async", "manifest", "load_k8s",
    "plots",
    # what they take and give
    "Scenario", "Records", "Summary", "summarize", "ModelResult", "EngineResult", "Comparison", "PlanResult", "SLO",
    "TheoryResult", "Calibration", "Overhead", "Advice", "RedisServer",
    # errors
    "QsimError", "ScenarioError", "NotSupportedError", "TheoryNotApplicable", "CalibrationError", "PayloadError",
    "EngineError", "JobNotFound", "LockLost", "RedisUnavailable", "HarnessError", "UnrecoverableError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'qsim' has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module.rsplit(".", 1)[-1] == name else getattr(imported, name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
