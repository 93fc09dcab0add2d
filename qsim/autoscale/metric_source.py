"""Where an emitted autoscaler reads its metric, so that it reads exactly what was simulated.

``qsim autoscale --emit ... --target qsim|bullmq`` picks one source:

============ ========================================================================================
``workers``  qsim's workers export the series (``qsim_queue_jobs``, ...): the default for a qsim queue
``advisor``  a ``qsim advise --watch`` Deployment of its own exports them: the ``qsim`` policy with
             ``min = 0`` (no worker runs to export the advice), and a BullMQ queue, whose workers
             export nothing (``--from bullmq`` adds ``qsim_bullmq_jobs`` and the oldest age,
             :mod:`qsim.bullmq.gauges`)
``redis``    KEDA's ``redis`` list trigger on ``<prefix>:<queue>:wait``: a BullMQ queue scaled on its
             list length (KEDA only, one queue) whose jobs all wait in that list, i.e. no job type of
             the queue gets a BullMQ priority (prioritized jobs wait in a sorted set the trigger
             cannot read). It reads Redis itself, so it also wakes a pool from zero
============ ========================================================================================

A pool that may scale to zero (``min = 0``) needs a metric that exists when no
worker runs: a metric only the workers export reads as nothing then (KEDA's
``ignoreNullValues`` turns that into 0) and nothing would ever wake the pool,
so that is an error naming the way out (a simulation of an object read with
``--k8s`` runs it as it is: :mod:`qsim.autoscale.nulls`). BullMQ has no
wait-time histogram: ``p95_wait`` cannot be emitted for it.

What the simulation assumed of the series (``metric_from``, ``ignore_null``,
``fallback_*``) must be what the object does: ``metric_from = "workers"`` with
a trigger on Redis or the advisor (always there), ``ignore_null = false`` on a
``redis`` trigger (it has no ``ignoreNullValues``), and for ``--emit hpa`` a
fallback (KEDA's) or ``ignore_null = true`` with ``metric_from = "workers"``
(an HPA errs on a missing series) are errors (:func:`check_nulls`).
"""

from __future__ import annotations

from collections.abc import Mapping

from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario

__all__ = ["BULLMQ_PREFIX", "REDIS_TRIGGERS", "TARGETS", "metric_source", "source", "check_nulls", "redis_list_trigger",
           "every_job_in_the_list", "bullmq_query", "redis_list"]

TARGETS = ("qsim", "bullmq")
#: BullMQ's default key prefix (qsim.bullmq's DEFAULT_PREFIX, a layer above; a test keeps them equal).
BULLMQ_PREFIX = "bull"
#: KEDA's Redis list scalers: the same listName/listLength, on one server, a cluster or a Sentinel set.
REDIS_TRIGGERS = ("redis", "redis-cluster", "redis-sentinel")
#: The qsim_bullmq_jobs states each metric adds up.
_BULLMQ_STATES = {"list_length": "waiting", "in_flight": "waiting|active"}


def every_job_in_the_list(scenario: Scenario, pool: str) -> bool:
    """The pool serves one queue whose waiting jobs are all in BullMQ's wait list: its job types share one
    priority (the lowest is BullMQ's no-priority, each higher one a prioritized job; qsim.bullmq.options)."""
    queues = scenario.pool(pool).queues
    return len(queues) == 1 and len({j.priority for j in scenario.jobs if j.queue == queues[0]}) <= 1


def redis_list_trigger(kind: str, scenario: Scenario, pool: str, table: Mapping[str, object], metric: str,
                       target: str) -> bool:
    """Whether the emitted trigger is KEDA's redis trigger on a BullMQ wait list (it reads ``listLength`` and
    ``activationListLength`` as whole numbers): a keda object, a bullmq queue, ``list_length`` per replica, and
    every waiting job in that list (:func:`every_job_in_the_list`)."""
    return kind == "keda" and target == "bullmq" and metric == "list_length" \
        and table.get("metric_type", "AverageValue") == "AverageValue" and every_job_in_the_list(scenario, pool)


def metric_source(kind: str, scenario: Scenario, pool: str, table: Mapping[str, object], metric: str,
                  target: str = "qsim") -> str:
    """``workers``, ``advisor`` or ``redis`` (see :func:`source`), checked by :func:`check_nulls`."""
    where = source(kind, scenario, pool, table, metric, target)
    check_nulls(kind, where, table)
    return where


def check_nulls(kind: str, where: str, table: Mapping[str, object]) -> None:
    """Raise when the series' keys of ``table`` (``metric_from``, ``ignore_null``, ``fallback_*``) are not what
    a ``kind`` object reading from ``where`` (workers | advisor | redis) does (the module docstring)."""
    metric_from, ignore_null = table.get("metric_from", "queue"), table.get("ignore_null", True) is not False
    if metric_from == "workers" and where != "workers":
        raise ScenarioError(f"metric_from = \"workers\": the emitted trigger reads {where} ({_WHERE[where]}), "
                            "which is there with no worker ready; set metric_from = \"queue\"")
    if where == "redis" and not ignore_null:
        raise ScenarioError("ignore_null = false: the emitted trigger is KEDA's redis trigger, which has no "
                            "ignoreNullValues (an empty list is 0); leave ignore_null out")
    if kind == "hpa":
        if table.get("fallback_replicas") is not None:
            raise ScenarioError("--emit hpa: fallback_replicas is KEDA's fallback, which an HPA does not have; "
                                "emit keda, or leave fallback_replicas out")
        if metric_from == "workers" and ignore_null:
            raise ScenarioError("--emit hpa: ignore_null = true with metric_from = \"workers\", but an HPA has no "
                                "ignoreNullValues: a series that is not there is an error it does not scale on; "
                                "set ignore_null = false, or emit keda")


_WHERE = {"workers": "the workers' series", "advisor": "the advisor Deployment's series",
          "redis": "a Redis list"}


def source(kind: str, scenario: Scenario, pool: str, table: Mapping[str, object], metric: str,
           target: str = "qsim") -> str:
    """``workers``, ``advisor`` or ``redis`` (the module docstring) for the autoscaler ``table`` scaling ``pool``
    on ``metric``, emitted as ``kind`` (keda | hpa) for a ``target`` (qsim | bullmq) queue.

    Raises:
        ScenarioError: an unknown target; a metric the target cannot give; ``min = 0`` on a metric only
            running workers export.
    """
    if target not in TARGETS:
        raise ScenarioError(f"--target must be qsim or bullmq, got {target!r}")
    low = int(str(table["min"]))
    if target == "bullmq":
        if metric == "p95_wait":
            raise ScenarioError("--target bullmq: BullMQ keeps no wait-time histogram, so p95_wait cannot be read "
                                "from a BullMQ queue; scale on list_length, in_flight, oldest_age or the qsim policy")
        if redis_list_trigger(kind, scenario, pool, table, metric, target):
            for key, field in (("target", "listLength"), ("activation", "activationListLength")):
                value = float(str(table.get(key) or 0))
                if not value.is_integer():
                    raise ScenarioError(f"--target bullmq: {key} = {value:g} is KEDA's redis trigger's {field}, "
                                        "which it reads as a whole number: set a whole number")
            return "redis"
        return "advisor"
    if metric == "recommended_workers":
        return "advisor" if low == 0 else "workers"
    if low == 0 and (kind == "keda" or table.get("keda") is False):  # KEDA, or a plain HPA scaling to zero
        raise ScenarioError(f"min = 0: the trigger's metric ({metric}) is exported by the workers, so with none "
                            "running it reads nothing (KEDA's ignoreNullValues makes that 0) and the pool never "
                            "wakes; use the qsim policy (its advisor Deployment runs at zero), or min >= 1")
    return "workers"


def bullmq_query(metric: str, queues: tuple[str, ...], selector: str) -> str:
    """The PromQL of ``metric`` on the advisor's BullMQ gauges for ``queues`` (``selector``: their label match)."""
    if metric == "oldest_age":
        return f"max(qsim_bullmq_oldest_waiting_age_seconds{{{selector}}})"
    states = _BULLMQ_STATES[metric]
    match = f'state="{states}"' if "|" not in states else f'state=~"{states}"'
    if len(queues) == 1 and "|" not in states:
        return f"max(qsim_bullmq_jobs{{{selector},{match}}})"
    return f"sum(max by (queue, state) (qsim_bullmq_jobs{{{selector},{match}}}))"


def redis_list(queue: str, prefix: str) -> str:
    """The BullMQ wait list KEDA's redis trigger reads for ``queue``."""
    return f"{prefix}:{queue}:wait"
