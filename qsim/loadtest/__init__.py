"""Locust building blocks for load-testing a Redis job queue with a qsim Scenario.

Imported only by ``loadtests/`` (importing Locust patches the process for
gevent): the names below load Locust on first use, so the Locust-free parts
(:mod:`~qsim.loadtest.config`, :mod:`~qsim.loadtest.mix`,
:mod:`~qsim.loadtest.schedule`, :mod:`~qsim.loadtest.run`,
:mod:`~qsim.loadtest.workers`) can be imported without it.

A locustfile::

    from locust import events
    from qsim.loadtest import ProducerUser, QueueObserverUser, ScenarioShape, register

    register(events)  # --redis-url, --scenario, --i-know-this-is-not-local, ...

- :class:`~qsim.loadtest.users.ProducerUser`: adds the scenario's jobs at its
  rates (constant pacing), ``burst``, ``trace`` and ``profile`` types at their
  drawn times (:mod:`~qsim.loadtest.schedule`), flows with their children;
  request type ``enqueue``, name = job type. ``--time-scale`` compresses the
  scenario's clock with its rates kept (:mod:`~qsim.loadtest.timescale`).
- :class:`~qsim.loadtest.users.QueueObserverUser`: reads the queues' event
  streams and reports each ended job of the run as request type ``job``
  (latency, enqueue -> completion) and ``wait`` (enqueue -> start), from
  Redis timestamps.
- :class:`~qsim.loadtest.shape.ScenarioShape`: the scenario's duration, then a
  drain, then stop.
- :class:`~qsim.loadtest.workers.WorkerPool`: the scenario's pools as local
  processes, with the scenario's queue limits and ``[[events]]``
  (``--start-workers``; :mod:`qsim.harness.processes` underneath).
- :mod:`~qsim.loadtest.compare`: the model's prediction for the same run
  (``--compare-model``).

Arguments and environment variables: :mod:`qsim.loadtest.config`. Keys, job
ids and timestamps: :mod:`qsim.loadtest.run`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ProducerUser", "QueueObserverUser", "ScenarioShape", "WorkerPool", "LoadTestConfig", "LoadTestRun",
           "register"]

_WHERE = {
    "ProducerUser": "qsim.loadtest.users",
    "QueueObserverUser": "qsim.loadtest.users",
    "ScenarioShape": "qsim.loadtest.shape",
    "register": "qsim.loadtest.hooks",
    "WorkerPool": "qsim.loadtest.workers",
    "LoadTestConfig": "qsim.loadtest.config",
    "LoadTestRun": "qsim.loadtest.run",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'qsim.loadtest' has no attribute {name!r}")
