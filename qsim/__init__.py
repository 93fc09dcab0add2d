"""qsim: plan and load-test Redis-backed job queues.

The model (:mod:`qsim.model`) predicts, the engine (:mod:`qsim.engine`) runs, and
both describe the same :class:`Scenario` with the same Summary.
"""

from qsim.errors import (
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
from qsim.records import Records
from qsim.scenario import Scenario
from qsim.summary import summarize

__version__ = "0.1.0"

__all__ = [
    "Scenario",
    "Records",
    "summarize",
    "QsimError",
    "ScenarioError",
    "NotSupportedError",
    "TheoryNotApplicable",
    "PayloadError",
    "EngineError",
    "JobNotFound",
    "LockLost",
    "RedisUnavailable",
    "HarnessError",
    "UnrecoverableError",
    "__version__",
]
