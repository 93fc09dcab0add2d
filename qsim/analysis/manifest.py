"""``qsim autoscale --emit keda|hpa FILE``: a policy as a KEDA ScaledObject or an autoscaling/v2 HPA.

The manifests follow ``deploy/kubernetes`` (``tests/unit/test_deploy.py``
keeps the constants here and those files in step): the worker Deployment is
``<queue>-worker`` (the pool's queue; the pool's name when it serves
several), Prometheus is :data:`PROMETHEUS`, the workers export their metrics
on :data:`METRICS_PORT`, and every metric is one qsim exports:

==================== ======================================================= ============
policy / metric      query (KEDA prometheus trigger; the HPA's external one) metric type
==================== ======================================================= ============
list_length          ``max(qsim_queue_jobs{queue="Q",state="waiting"})``      AverageValue
oldest_age           ``max(qsim_queue_oldest_waiting_age_seconds{queue="Q"})`` Value
p95_wait             ``histogram_quantile(0.95, ... qsim_job_wait_seconds_bucket ...)`` Value
recommended_workers, ``max(qsim_recommended_workers{queue="Q"})`` (the advice, AverageValue, 1
qsim                 or the observed workers: deploy/kubernetes/keda-scaledobject.yaml)
target-tracking      list_length with target ``acceptable_latency x concurrency / mean service``
==================== ======================================================= ============

The HPA's ``behavior`` carries the policy's scale-up and scale-down rules and
stabilisation windows; KEDA's ``pollingInterval`` is ``poll``, its
``cooldownPeriod`` and ``activationThreshold`` the policy's (they act with
``min = 0``). An HPA cannot scale to zero: with ``min = 0`` it gets
``minReplicas: 1`` and says why. The ``step`` policy has no HPA equivalent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from qsim.errors import ScenarioError
from qsim.scenario import Scenario

__all__ = ["manifest", "deployment_name", "metric_query", "PROMETHEUS", "METRICS_PORT", "EMIT_KINDS"]

#: Where deploy/kubernetes' KEDA trigger reads Prometheus.
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
#: The port deploy/kubernetes/worker.yaml serves the worker's metrics on.
METRICS_PORT = 9100
EMIT_KINDS = ("keda", "hpa")
_EXTERNAL = {"list_length": "qsim_queue_jobs", "oldest_age": "qsim_queue_oldest_waiting_age_seconds",
             "p95_wait": "qsim_job_wait_seconds_p95", "recommended_workers": "qsim_recommended_workers"}


def deployment_name(scenario: Scenario, pool: str) -> str:
    """The worker Deployment's name: ``<queue>-worker`` (``<pool>-worker`` for a pool of several queues)."""
    queues = scenario.pool(pool).queues
    base = queues[0] if len(queues) == 1 else pool
    return "".join(c if c.isalnum() or c == "-" else "-" for c in base.lower()).strip("-") + "-worker"


def _selector(queues: tuple[str, ...]) -> str:
    return f'queue="{queues[0]}"' if len(queues) == 1 else f'queue=~"{"|".join(queues)}"'


def metric_query(metric: str, queues: tuple[str, ...], window: float = 60.0) -> str:
    """The PromQL of ``metric`` for the pool's ``queues`` (see the module docstring)."""
    sel = _selector(queues)
    if metric == "list_length":
        if len(queues) == 1:
            return f'max(qsim_queue_jobs{{{sel},state="waiting"}})'
        return f'sum(max by (queue) (qsim_queue_jobs{{{sel},state="waiting"}}))'
    if metric == "oldest_age":
        return f"max(qsim_queue_oldest_waiting_age_seconds{{{sel}}})"
    if metric == "p95_wait":
        return (f"histogram_quantile(0.95, sum by (le) (rate(qsim_job_wait_seconds_bucket{{{sel}}}"
                f"[{max(1, round(window))}s])))")
    label = ",".join(queues)
    return f'max(qsim_recommended_workers{{queue="{label}"}}) or max(qsim_advice_observed_workers{{queue="{label}"}})'


def _hpa_view(scenario: Scenario, pool: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """The policy as HPA settings: metric, metric type, target, behaviour."""
    policy = table["policy"]
    if policy == "step":
        raise ScenarioError("--emit: the step policy has no KEDA/HPA equivalent (its delays are not HPA "
                            "behaviour); emit an hpa, target-tracking or qsim policy")
    if policy == "qsim":
        metric, mtype, target = "recommended_workers", "AverageValue", 1.0
    elif policy == "target-tracking":
        served = set(scenario.pool(pool).queues)
        types = [j for j in scenario.jobs if j.queue in served and j.arrival is not None]
        total = sum(j.arrival.rate for j in types if j.arrival is not None)
        service = sum(j.arrival.rate * j.service.mean for j in types if j.arrival is not None) / total
        metric, mtype = "list_length", "AverageValue"
        target = table["acceptable_latency"] * scenario.pool(pool).concurrency / service
    else:
        metric, mtype, target = table["metric"], table["metric_type"], float(table["target"])
    if policy == "target-tracking":
        up = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
              "policies": [{"type": "Percent", "value": 1000, "periodSeconds": 15}]}
        down = {"stabilizationWindowSeconds": int(round(table["scale_in_cooldown"])), "selectPolicy": "Max",
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}
    else:
        up, down = (_rules(table, "up"), _rules(table, "down"))
    return {"metric": metric, "type": mtype, "target": target, "up": up, "down": down,
            "activation": float(table.get("activation") or 0.0), "cooldown": int(round(table.get("cooldown", 300.0))),
            "window": float(table.get("window") or 60.0), "tolerance": table.get("tolerance")}


def _rules(table: Mapping[str, Any], way: str) -> dict[str, Any]:
    select = str(table[f"scale_{way}_select"])
    out: dict[str, Any] = {"stabilizationWindowSeconds": int(round(table[f"scale_{way}_stabilization"])),
                           "selectPolicy": {"max": "Max", "min": "Min", "disabled": "Disabled"}[select]}
    if table[f"scale_{way}"]:
        out["policies"] = [{"type": "Pods" if p["type"] == "pods" else "Percent", "value": int(p["value"]),
                            "periodSeconds": int(math.ceil(p["period"]))} for p in table[f"scale_{way}"]]
    return out


def _number(x: float) -> str:
    return json.dumps(str(int(x)) if float(x).is_integer() else f"{x:g}")


def _yaml(value: Any, indent: int = 0) -> list[str]:
    """A small YAML writer for dicts, lists, strings (JSON-quoted when needed) and numbers."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(v, (Mapping, list)) and v:
                lines.append(f"{pad}{k}:")
                lines.extend(_yaml(v, indent + 2))
            else:
                lines.append(f"{pad}{k}: {_scalar(v)}")
    else:
        for item in value:
            sub = _yaml(item, indent + 2)
            lines.append(f"{pad}- {sub[0].lstrip()}")
            lines.extend(sub[1:])
    return lines


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str) and (v == "" or any(c in v for c in ':{}[]#&*!|>\'"%@`,') or v.strip() != v
                               or v.lower() in ("true", "false", "null", "yes", "no") or v[0].isdigit()):
        return f"'{v}'" if "'" not in v and "\n" not in v else json.dumps(v)
    if isinstance(v, (Mapping, list)):
        return "{}" if isinstance(v, Mapping) else "[]"
    return str(v)


def manifest(kind: str, scenario: Scenario, pool: str, table: Mapping[str, Any], *, note: str = "") -> str:
    """The ``kind`` (keda | hpa) manifest of the autoscaler ``table`` (its TOML keys) for ``pool``."""
    if kind not in EMIT_KINDS:
        raise ScenarioError(f"--emit must be keda or hpa, got {kind!r}")
    view = _hpa_view(scenario, pool, table)
    name = deployment_name(scenario, pool)
    queues = tuple(scenario.pool(pool).queues)
    query = metric_query(view["metric"], queues, view["window"])
    low, high = int(table["min"]), int(table["max"])
    head = [f"# {line}" for line in note.splitlines()] if note else []
    head.append(f"# The worker Deployment {name} (deploy/kubernetes/worker.yaml) scaled on {view['metric']} "
                f"({view['type']}, target {view['target']:g}); its metrics are scraped on port {METRICS_PORT}.")
    if view["tolerance"] not in (None, 0.1):
        head.append(f"# The policy's tolerance {view['tolerance']:g} is the cluster's "
                    "--horizontal-pod-autoscaler-tolerance (Kubernetes' default is 0.1).")
    behavior = {"scaleUp": view["up"], "scaleDown": view["down"]}
    if kind == "keda":
        trigger_meta = {"serverAddress": PROMETHEUS, "query": query, "threshold": json.loads(_number(view["target"]))}
        if view["activation"] > 0 or low == 0:
            trigger_meta["activationThreshold"] = json.loads(_number(view["activation"]))
        doc: dict[str, Any] = {
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"name": name}, "minReplicaCount": low, "maxReplicaCount": high,
                     "pollingInterval": int(round(table["poll"])), "cooldownPeriod": view["cooldown"],
                     "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior}},
                     "triggers": [{"type": "prometheus", "metricType": view["type"], "metadata": trigger_meta}]}}
        return "\n".join(head + _yaml(doc)) + "\n"
    if low == 0:
        head.append("# min = 0: an HPA cannot scale to zero (KEDA can: --emit keda); minReplicas is 1.")
    ext = _EXTERNAL[view["metric"]]
    labels = {"queue": ",".join(queues) if view["metric"] == "recommended_workers" else queues[0]}
    if view["metric"] == "list_length":
        labels["state"] = "waiting"
    target: dict[str, Any] = ({"type": "AverageValue", "averageValue": json.loads(_number(view["target"]))}
                              if view["type"] == "AverageValue" else
                              {"type": "Value", "value": json.loads(_number(view["target"]))})
    hpa: dict[str, Any] = {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": max(1, low), "maxReplicas": high, "behavior": behavior,
                 "metrics": [{"type": "External", "external": {"metric": {"name": ext,
                                                                          "selector": {"matchLabels": labels}},
                                                               "target": target}}]}}
    if view["metric"] == "p95_wait":
        series = 'qsim_job_wait_seconds_bucket{queue!=""}'
        promql = (f"histogram_quantile(0.95, sum by (le, queue) (rate(<<.Series>>{{<<.LabelMatchers>>}}"
                  f"[{max(1, round(view['window']))}s])))")
    else:
        series = f'{ext}{{queue!=""}}'
        promql = "max(<<.Series>>{<<.LabelMatchers>>}) by (" + ", ".join(labels) + ")"
    rule = {"seriesQuery": series, "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            "name": {"as": ext}, "metricsQuery": promql}
    config = "\n".join(_yaml({"externalRules": [rule]})) + "\n"
    adapter = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prometheus-adapter",
                                                                     "namespace": "monitoring"},
               "data": {"config.yaml": "|"}}
    body = _yaml(adapter)
    body[-1] = "  config.yaml: |"
    body += ["    " + line for line in config.splitlines()]
    return "\n".join(head + _yaml(hpa) + ["---", "# prometheus-adapter's rule for the external metric "
                                          "(rules.external in the prometheus-adapter chart's values)"] + body) + "\n"
