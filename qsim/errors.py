"""The qsim error tree.

Every error qsim raises on purpose derives from :class:`QsimError`::

    QsimError
    ├── ScenarioError (also ValueError)    a scenario file or object is invalid
    │   └── NotSupportedError              valid, but this part cannot simulate it yet
    ├── TheoryNotApplicable (also ValueError)  no closed form fits the scenario
    ├── PayloadError (also ValueError)     a job payload is not JSON or is too large
    ├── CalibrationError (also ValueError)  measured jobs cannot be calibrated (qsim.calibrate)
    ├── ToleranceError (also ValueError)   a `qsim compare --check` tolerance file is invalid
    ├── UsageError (also ValueError)       an argument cannot be used: a Redis URL that is not one,
    │   │                                  an output path whose folder is missing or not writable
    │   └── UnencodableText                a job id, name or key UTF-8 cannot encode (a lone surrogate)
    ├── EngineError                        the engine could not do what was asked
    │   ├── JobNotFound (also KeyError)    no job with that id
    │   ├── LockLost                       the worker no longer holds a job's lock
    │   ├── FlowError (also ValueError)    a flow cannot be added as asked
    │   ├── ChildFailed                    a child job of a flow went to the DLQ
    │   └── RedisUnavailable               Redis cannot be reached or went away
    └── HarnessError                       running a scenario on the engine failed

Handlers raise :class:`UnrecoverableError` to fail a job without retries.
``Job.move_to_waiting_children()`` raises :class:`WaitingForChildren` (not an
error: it ends the handler's run while the job's children finish).
"""

from __future__ import annotations

__all__ = [
    "QsimError",
    "ScenarioError",
    "NotSupportedError",
    "TheoryNotApplicable",
    "PayloadError",
    "CalibrationError",
    "ToleranceError",
    "UsageError",
    "UnencodableText",
    "EngineError",
    "JobNotFound",
    "LockLost",
    "FlowError",
    "ChildFailed",
    "WaitingForChildren",
    "RedisUnavailable",
    "HarnessError",
    "UnrecoverableError",
]


class QsimError(Exception):
    """Base of every error qsim raises on purpose."""


class ScenarioError(QsimError, ValueError):
    """Raised when a scenario (TOML file or dict) is invalid.

    The message names the file (when there is one), the key and the bad value,
    e.g. ``shop.toml: jobs[1].service.cv must be >= 0, got -1``.
    """


class NotSupportedError(ScenarioError):
    """Raised when a valid scenario uses a feature this part cannot run yet."""


class TheoryNotApplicable(QsimError, ValueError):
    """Raised when no closed form applies to a scenario; the message says why."""


class PayloadError(QsimError, ValueError):
    """Raised when a job payload is not plain JSON or exceeds the size limit."""


class CalibrationError(QsimError, ValueError):
    """Raised when measured jobs cannot be calibrated: an empty window, a queue
    that does not exist, a Redis not in the expected layout, too few jobs of a
    type, a bad CSV. The message names what is missing."""


class ToleranceError(QsimError, ValueError):
    """Raised when a ``qsim compare --check --tolerance`` file is invalid; the message names the file
    and the key, e.g. ``tol.toml: ["wait.p95"].rel must be a number >= 0, got -1``."""


class UsageError(QsimError, ValueError):
    """Raised when an argument cannot be used as given: a Redis URL that is malformed
    (``redis://host:port/db``, ``rediss://``, ``unix://``, ``redis+cluster://``), or an
    output path whose folder does not exist or cannot be written. The message names
    the option or the value, e.g. ``--out a/b/x.toml: the folder a/b does not exist``."""


class UnencodableText(UsageError):
    """Raised when a job id, job name, queue name or rate-limit key holds text that UTF-8 cannot encode
    (a lone surrogate such as ``"\\udcff"``, which Python makes of a shell argument's bytes that are not
    UTF-8): it cannot name anything in Redis. The message names the argument and the value."""


class EngineError(QsimError):
    """Raised when the Redis engine cannot perform an operation."""


class JobNotFound(EngineError, KeyError):
    """Raised when no job with the given id exists in the queue."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "job not found"


class LockLost(EngineError):
    """Raised when a worker acts on a job whose lock it no longer holds."""


class FlowError(EngineError, ValueError):
    """Raised when a flow cannot be added as asked: a child id is taken, or on
    Redis Cluster the flow's queues are in different slots."""


class ChildFailed(EngineError):
    """Raised by ``Job.wait_children()`` when a child with the ``fail`` policy went to the DLQ."""


class WaitingForChildren(QsimError):
    """Raised by ``Job.move_to_waiting_children()`` when the job left its slot for
    waiting-children; the worker handles it (let it propagate). The handler runs
    again from the start, in the same attempt, when the children are done."""


class RedisUnavailable(EngineError):
    """Raised when Redis cannot be reached, refuses the login, or went away."""


class HarnessError(QsimError):
    """Raised when running a scenario against the engine fails."""


class UnrecoverableError(Exception):
    """Raised by a job handler to fail the job at once, skipping its retries."""
