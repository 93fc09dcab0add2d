"""``qsim autoscale --emit keda|hpa FILE``: the bundle that carries what was simulated to the cluster.

One multi-document YAML text, in the order ``kubectl apply -f`` should see it:
the autoscaler object (:func:`qsim.autoscale.manifest.manifest`), the worker
Deployment with the simulated settings (:mod:`qsim.autoscale.k8s_deployment`),
and the advisor Deployment with its Service when the trigger reads one
(:mod:`qsim.autoscale.metric_source`); for an HPA, prometheus-adapter's rule
comes back apart, to be added to the adapter's own rules (and the advisor's
ServiceMonitor, for the Prometheus Operator, is written apart by the CLI:
:func:`~qsim.autoscale.k8s_deployment.service_monitors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qsim.autoscale.k8s_deployment import adapter_rule, advisor_deployment, advisor_service, \
    bullmq_worker_deployment, bundle, worker_deployment
from qsim.autoscale.manifest import advisor_name, deployment_name, manifest, view_metric
from qsim.autoscale.metric_source import BULLMQ_PREFIX, metric_source
from qsim.spec.scenario import Scenario

__all__ = ["emit"]

#: The advisor's window when the policy names none (qsim advise's default, 15 minutes).
ADVISOR_WINDOW = 900.0


def emit(kind: str, scenario: Scenario, pool: str, table: Mapping[str, Any], *, slo: str,
         deployment: Mapping[str, Any] | None = None, pre_stop: float = 0.0, note: str = "", target: str = "qsim",
         prefix: str = BULLMQ_PREFIX, connection: Mapping[str, Any] | None = None) -> tuple[str, str | None]:
    """The bundle (module docstring) of the autoscaler ``table`` for ``pool``, and the adapter rule (None: none).

    ``deployment``: the worker Deployment read with ``--k8s`` (None: a plain qsim worker; for a BullMQ
    ``target`` none, since a BullMQ worker is the team's own code); ``pre_stop``: its preStop sleep (s);
    ``slo``: the advisor's SLO when the policy has none of its own; ``connection``: the read trigger's
    (:attr:`~qsim.autoscale.k8s_read.K8sRead.connection`: its server address and authentication are kept).

    Raises:
        ScenarioError: what :func:`~qsim.autoscale.manifest.manifest` and
            :func:`~qsim.autoscale.metric_source.metric_source` refuse.
    """
    own = scenario.pool(pool)
    grace = float(table["grace"])
    # the qsim policy, or an hpa on the advice: the advisor's SLO and window
    advise = (str(table["slo"]), float(table["window"])) if table.get("slo") else None
    worker: dict[str, Any] | None
    if target == "bullmq":  # only the grace period is set, on the Deployment read
        worker = bullmq_worker_deployment(deployment, grace=grace, pre_stop=pre_stop,
                                          replicas=own.workers) if deployment else None
    else:
        worker = worker_deployment(deployment, name=deployment_name(scenario, pool), queues=own.queues,
                                   concurrency=own.concurrency, grace=grace, pre_stop=pre_stop, advise=advise,
                                   replicas=own.workers)
    extra = []
    metric = view_metric(scenario, pool, table)
    if metric is not None and metric_source(kind, scenario, pool, table, metric, target) == "advisor":
        slo_text, window = advise or (slo, ADVISOR_WINDOW)
        extra.append(advisor_deployment(advisor_name(scenario, pool), queues=own.queues, slo=slo_text,
                                        window=window, concurrency=own.concurrency, source=target,
                                        prefix=prefix if target == "bullmq" else None))
        extra.append(advisor_service(advisor_name(scenario, pool)))
    # the autoscaler (and the advisor it reads) in the namespace of the Deployment it targets, when read with one
    namespace = ((deployment or {}).get("metadata") or {}).get("namespace")
    for doc in extra:
        if namespace:
            doc["metadata"]["namespace"] = str(namespace)
    text, rule = adapter_rule(manifest(kind, scenario, pool, table, note=note, target=target, prefix=prefix,
                                       namespace=str(namespace) if namespace else None, connection=connection,
                                       name=str(deployment["metadata"]["name"]) if deployment else None))
    if worker is None:
        text = (f"# No worker Deployment: give yours with --k8s to have its terminationGracePeriodSeconds set for "
                f"the simulated grace ({grace:g} s).\n") + text
    return bundle(text, worker, *extra), rule
