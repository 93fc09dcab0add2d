"""The Redis engine: producers, the asyncio worker, retries and the dead-letter queue.

Every job state change is one atomic Lua script (``lua/*.lua``); all keys of
a queue share one hash tag (:mod:`qsim.engine.keys`); timestamps come from
Redis's clock. See :mod:`qsim.engine.job` for the stored job layout.
"""

from qsim.engine.backoff import Backoff
from qsim.engine.connection import DEFAULT_REDIS_URL
from qsim.engine.context import JobContext
from qsim.engine.events import EVENTS
from qsim.engine.flow import FlowJobs, FlowProducer, SyncFlowProducer
from qsim.engine.hooks import AttemptHook
from qsim.engine.job import Attempt, EnqueuedJob, Job, JobInfo
from qsim.engine.keys import QueueKeys
from qsim.engine.queue import AsyncQueue, Queue
from qsim.engine.settings import WorkerSettings
from qsim.engine.worker import EXIT_CUT_OFF, EXIT_DRAINED, Worker

__all__ = [
    "Queue",
    "AsyncQueue",
    "Worker",
    "WorkerSettings",
    "AttemptHook",
    "JobContext",
    "FlowProducer",
    "SyncFlowProducer",
    "FlowJobs",
    "Backoff",
    "Job",
    "JobInfo",
    "Attempt",
    "EnqueuedJob",
    "QueueKeys",
    "EVENTS",
    "EXIT_DRAINED",
    "EXIT_CUT_OFF",
    "DEFAULT_REDIS_URL",
]
