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
in_flight            ``sum(max by (queue, state) (qsim_queue_jobs{queue="Q",    AverageValue
                     state=~"waiting|active"}))``
oldest_age           ``max(qsim_queue_oldest_waiting_age_seconds{queue="Q"})`` Value
p95_wait             ``histogram_quantile(0.95, ... qsim_job_wait_seconds_bucket ...)`` Value
recommended_workers, ``max(qsim_recommended_workers{queue="Q"})`` (the advice, AverageValue, 1
qsim                 or the observed workers: deploy/kubernetes/keda-scaledobject.yaml)
target-tracking      list_length with target ``acceptable_latency x concurrency / mean service``
==================== ======================================================= ============

The HPA's ``behavior`` carries the policy's scale-up and scale-down rules,
stabilisation windows and per-direction tolerances; with ``behavior = false``
no ``behavior`` is written (nor the ScaledObject's
``advanced.horizontalPodAutoscalerConfig``), which is how Kubernetes knows an
HPA without one. KEDA's ``pollingInterval`` is ``poll``, its
``cooldownPeriod``, ``initialCooldownPeriod`` and ``activationThreshold`` the
policy's (they act with ``min = 0``); ``ignore_null = false`` is the prometheus
trigger's ``ignoreNullValues: "false"``, ``fallback_replicas``,
``fallback_behavior`` and ``fallback_failures`` the ScaledObject's ``fallback`` (``replicas``, ``behavior``,
``failureThreshold``). ``tolerance`` and ``sync`` are
kube-controller-manager flags (``--horizontal-pod-autoscaler-tolerance``,
``--horizontal-pod-autoscaler-sync-period``): a value other than Kubernetes'
default is a comment. A value outside the Kubernetes/KEDA API's ranges is an
error (:func:`qsim.autoscale.k8s_ranges.check_api_ranges`). With ``min = 0``
an HPA is an error unless ``keda = false`` (a plain HPA scaling to zero:
``minReplicas: 0``, which needs the ``HPAScaleToZero`` feature gate; such a
policy has no ScaledObject): an HPA at ``minReplicas: 1`` is not the pool that
was simulated. So is a ScaledObject for a pool that starts with no worker under
``min >= 1`` (KEDA raises it to ``min`` at once; the simulated HPA leaves a
target at 0 replicas alone). The ``step`` policy has no HPA equivalent.

The ``schedule`` and ``predictive`` policies add one KEDA ``cron``
trigger per floor (``start``/``end`` as daily ``M H * * *``, ``desiredReplicas``,
``timezone``: the policy's, ``Etc/UTC`` for ``predictive``) after the reactive
trigger (none without a ``target``); the predictive floors are those the
simulation used (:func:`qsim.autoscale.predictive.daily_floors`: a day's period,
whole minutes). A plain HPA has no cron trigger: ``--emit hpa`` of them is an
error.

Where the trigger reads (``--target qsim|bullmq``) is
:mod:`qsim.autoscale.metric_source`'s choice: for a BullMQ queue the same
queries on the advisor's ``qsim_bullmq_*`` gauges (``list_length``:
``max(qsim_bullmq_jobs{queue="Q",state="waiting"})``; ``oldest_age``:
``max(qsim_bullmq_oldest_waiting_age_seconds{queue="Q"})``), or KEDA's ``redis``
trigger on ``bull:Q:wait`` (``listLength`` the target) where that list holds
every waiting job.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import yaml

from qsim.autoscale.k8s_deployment import exact
from qsim.autoscale.k8s_ranges import check_api_ranges
from qsim.autoscale.metric_source import BULLMQ_PREFIX, REDIS_TRIGGERS, bullmq_query, metric_source, redis_list
from qsim.autoscale.predictive import daily_floors, predictive_floors
from qsim.errors import ScenarioError
from qsim.spec.autoscaler import DEFAULT_SYNC, FLOOR_POLICIES, AutoscalerSpec, clock_minutes
from qsim.spec.scenario import Scenario

__all__ = ["manifest", "view_metric", "deployment_name", "advisor_name", "metric_query", "floor_triggers",
           "check_floors", "promql_string", "PROMETHEUS", "METRICS_PORT", "EMIT_KINDS"]

#: Where deploy/kubernetes' KEDA trigger reads Prometheus.
PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
#: The port deploy/kubernetes/worker.yaml serves the worker's metrics on.
METRICS_PORT = 9100
EMIT_KINDS = ("keda", "hpa")
_BULLMQ_EXTERNAL = {"list_length": "qsim_bullmq_jobs", "oldest_age": "qsim_bullmq_oldest_waiting_age_seconds",
                    "recommended_workers": "qsim_recommended_workers", "in_flight": "qsim_bullmq_in_flight"}
_EXTERNAL = {"list_length": "qsim_queue_jobs", "oldest_age": "qsim_queue_oldest_waiting_age_seconds",
             "p95_wait": "qsim_job_wait_seconds_p95", "recommended_workers": "qsim_recommended_workers",
             "in_flight": "qsim_queue_in_flight"}


def deployment_name(scenario: Scenario, pool: str) -> str:
    """The worker Deployment's name: ``<queue>-worker`` (``<pool>-worker`` for a pool of several queues)."""
    queues = scenario.pool(pool).queues
    base = queues[0] if len(queues) == 1 else pool
    return "".join(c if c.isalnum() or c == "-" else "-" for c in base.lower()).strip("-") + "-worker"


def advisor_name(scenario: Scenario, pool: str) -> str:
    """The advisor Deployment's name: the worker Deployment's with ``-advisor`` for ``-worker``."""
    return deployment_name(scenario, pool).removesuffix("-worker") + "-advisor"


def promql_string(value: str) -> str:
    """``value`` as a PromQL string literal (double-quoted, backslash escapes as in Go)."""
    return json.dumps(value, ensure_ascii=False)


_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def _selector(queues: tuple[str, ...]) -> str:
    if len(queues) == 1:
        return f"queue={promql_string(queues[0])}"
    pattern = "|".join(_RE2_SPECIAL.sub(r"\\\1", q) for q in queues)
    return f"queue=~{promql_string(pattern)}"


def metric_query(metric: str, queues: tuple[str, ...], window: float = 60.0) -> str:
    """The PromQL of ``metric`` for the pool's ``queues`` (see the module docstring)."""
    sel = _selector(queues)
    if metric == "list_length":
        if len(queues) == 1:
            return f'max(qsim_queue_jobs{{{sel},state="waiting"}})'
        return f'sum(max by (queue) (qsim_queue_jobs{{{sel},state="waiting"}}))'
    if metric == "in_flight":
        return f'sum(max by (queue, state) (qsim_queue_jobs{{{sel},state=~"waiting|active"}}))'
    if metric == "oldest_age":
        return f"max(qsim_queue_oldest_waiting_age_seconds{{{sel}}})"
    if metric == "p95_wait":
        return (f"histogram_quantile(0.95, sum by (le) (rate(qsim_job_wait_seconds_bucket{{{sel}}}"
                f"[{prom_range(window)}])))")
    label = promql_string(",".join(queues))
    return f"max(qsim_recommended_workers{{queue={label}}}) or max(qsim_advice_observed_workers{{queue={label}}})"


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
    elif policy in FLOOR_POLICIES and table.get("target") is None:
        metric, mtype, target = None, None, None  # the floors are the only triggers
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
            "initial_cooldown": int(round(table.get("initial_cooldown") or 0.0)),
            "window": float(table.get("window") or 60.0), "tolerance": table.get("tolerance"),
            "sync": table.get("sync"), "behavior": table.get("behavior", True) is not False,
            "keda": table.get("keda", True) is not False}


def view_metric(scenario: Scenario, pool: str, table: Mapping[str, Any]) -> str | None:
    """The metric the emitted trigger reads for the autoscaler ``table`` (the ``qsim`` policy's is
    ``recommended_workers``; ``target-tracking``'s ``list_length``; None: floors only, no metric)."""
    metric = _hpa_view(scenario, pool, table)["metric"]
    return None if metric is None else str(metric)


def _rules(table: Mapping[str, Any], way: str) -> dict[str, Any]:
    select = str(table[f"scale_{way}_select"])
    out: dict[str, Any] = {"stabilizationWindowSeconds": int(round(table[f"scale_{way}_stabilization"])),
                           "selectPolicy": {"max": "Max", "min": "Min", "disabled": "Disabled"}[select]}
    if table[f"scale_{way}"]:
        out["policies"] = [{"type": "Pods" if p["type"] == "pods" else "Percent", "value": int(p["value"]),
                            "periodSeconds": int(math.ceil(p["period"]))} for p in table[f"scale_{way}"]]
    if table.get(f"scale_{way}_tolerance") is not None:
        out["tolerance"] = json.loads(_number(table[f"scale_{way}_tolerance"]))
    return out


def floor_triggers(scenario: Scenario, pool: str, table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The KEDA ``cron`` triggers of a schedule or predictive policy's floors (none for other policies)."""
    if table["policy"] == "schedule":
        floors = [(f["start"], f["end"], int(f["replicas"])) for f in table["floors"]]
        zone = str(table["timezone"])
    elif table["policy"] == "predictive":
        spec = AutoscalerSpec(pool=pool, policy="predictive", min=int(table["min"]), max=int(table["max"]),
                              lead=float(table["lead"]), utilization=float(table["utilization"]))
        floors = [(f.start, f.end, f.replicas) for f in daily_floors(predictive_floors(scenario, spec),
                                                                     duration=scenario.duration)]
        zone = "Etc/UTC"
    else:
        return []

    def cron(hhmm: str) -> str:
        m = clock_minutes(hhmm)
        return f"{m % 60} {m // 60} * * *"

    return [{"type": "cron", "metadata": {"timezone": zone, "start": cron(start), "end": cron(end),
                                          "desiredReplicas": str(n)}} for start, end, n in floors]


def check_floors(kind: str, scenario: Scenario, pool: str, table: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cron triggers ``--emit kind`` would write for a schedule or predictive policy (``qsim autoscale``
    checks them before any run).

    Raises:
        ScenarioError: ``kind`` is ``hpa`` (no cron trigger there), or the floors are not times of day.
    """
    if table["policy"] in FLOOR_POLICIES and kind == "hpa":
        raise ScenarioError(f"--emit hpa: the {table['policy']} policy's floors are KEDA cron triggers, which a "
                            "plain HPA does not have: emit keda")
    return floor_triggers(scenario, pool, table)


def _number(x: float) -> str:
    """``x`` as a JSON string, exactly (the shortest text that reads back as the same float: 6 significant
    digits read back as another value than the one simulated)."""
    return json.dumps(exact(x))


def prom_range(seconds: float) -> str:
    """A PromQL range of ``seconds``: whole seconds (``90s``), else milliseconds (``90400ms``); at least 1 ms."""
    if float(seconds).is_integer() and seconds >= 1:
        return f"{int(seconds)}s"
    return f"{max(1, round(seconds * 1000))}ms"


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper writing a multi-line string as a literal block (``|``) where YAML allows one."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _string)


def _yaml_lines(value: Any) -> list[str]:
    """``value`` as YAML lines, written by PyYAML (any string quoted as YAML needs it)."""
    text: str = yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
    return text.rstrip("\n").splitlines()


def _placed(doc: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """``doc`` in ``namespace`` (an autoscaler targets a Deployment of its own namespace)."""
    if namespace:
        doc["metadata"]["namespace"] = namespace
    return doc


def _scaled_object(name: str, low: int, high: int, table: Mapping[str, Any], view: Mapping[str, Any],
                   triggers: list[dict[str, Any]]) -> dict[str, Any]:
    """The ScaledObject: bounds, KEDA's poll and cooldowns, the HPA behaviour (none with ``behavior = false``)."""
    spec: dict[str, Any] = {"scaleTargetRef": {"name": name}, "minReplicaCount": low, "maxReplicaCount": high,
                            "pollingInterval": int(round(table["poll"])), "cooldownPeriod": view["cooldown"]}
    if view["initial_cooldown"]:
        spec["initialCooldownPeriod"] = view["initial_cooldown"]
    if table.get("fallback_replicas") is not None:
        spec["fallback"] = {"failureThreshold": int(table.get("fallback_failures", 3)),
                            "replicas": int(table["fallback_replicas"])}
        if table.get("fallback_behavior", "static") != "static":
            spec["fallback"]["behavior"] = str(table["fallback_behavior"])
    if view["behavior"]:
        spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": view["up"],
                                                                           "scaleDown": view["down"]}}}
    spec["triggers"] = triggers
    return {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name}, "spec": spec}


def manifest(kind: str, scenario: Scenario, pool: str, table: Mapping[str, Any], *, note: str = "",
             target: str = "qsim", prefix: str = BULLMQ_PREFIX, namespace: str | None = None,
             connection: Mapping[str, Any] | None = None, name: str | None = None) -> str:
    """The ``kind`` (keda | hpa) manifest of the autoscaler ``table`` (its TOML keys) for ``pool``, reading
    its metric where :func:`qsim.autoscale.metric_source.metric_source` says for a ``target`` (qsim | bullmq)
    queue under the key ``prefix`` (BullMQ's); in ``namespace`` (its Deployment's: None, none written); a
    trigger of the type of ``connection`` (:attr:`qsim.autoscale.k8s_read.K8sRead.connection`) reaches its
    server as that one did; ``name``: the worker Deployment's, when one was read (None: :func:`deployment_name`)."""
    if kind not in EMIT_KINDS:
        raise ScenarioError(f"--emit must be keda or hpa, got {kind!r}")
    check_api_ranges(kind, {"pool": pool, **table})
    if kind == "keda" and scenario.pool(pool).workers == 0 and int(table["min"]) >= 1:
        raise ScenarioError(f"--emit keda: pool {pool} starts with 0 workers under min = {int(table['min'])}: KEDA "
                            "raises a Deployment at 0 replicas to minReplicaCount at its first loop, while the "
                            "simulation kept none (an HPA leaves a target at 0 replicas alone): start the pool at "
                            "min workers, or set min = 0")
    if kind == "hpa" and int(table["min"]) == 0 and table.get("keda", True) is not False:
        raise ScenarioError(f"--emit hpa: pool {pool} scales to zero (min = 0, through KEDA: keda = true), which an "
                            "HPA cannot (its minReplicas is at least 1 without the HPAScaleToZero gate): emit keda, "
                            "or set keda = false (a plain HPA at minReplicas 0) or min = 1")
    view = _hpa_view(scenario, pool, table)
    read = name is not None
    name = name or deployment_name(scenario, pool)
    queues = tuple(scenario.pool(pool).queues)
    low, high = int(table["min"]), int(table["max"])
    head = [f"# {line}" for line in note.splitlines()] if note else []
    crons: list[dict[str, Any]] = []
    if table["policy"] in FLOOR_POLICIES:
        crons = check_floors(kind, scenario, pool, table)
        head.append(f"# {len(crons)} replica floor{'s' if len(crons) != 1 else ''} as KEDA cron triggers "
                    f"({table['policy']} policy), combined by max with "
                    + ("no other trigger." if view["metric"] is None else "the trigger on the queue's metric."))
        if view["metric"] is None:
            doc = _placed(_scaled_object(name, low, high, table, view, crons), namespace)
            return "\n".join(head + _yaml_lines(doc)) + "\n"
    source = metric_source(kind, scenario, pool, table, view["metric"], target)
    if target == "bullmq" and view["metric"] != "recommended_workers":
        query = bullmq_query(view["metric"], queues, _selector(queues))
    else:
        query = metric_query(view["metric"], queues, view["window"])
    if table["policy"] == "target-tracking":
        head.append(f"# target-tracking has no KEDA/HPA twin: this is the HPA nearest to it (the backlog per worker "
                    f"against {_number(view['target']).strip(chr(34))}, scale-in after its cooldown); read back with "
                    "--k8s it is that hpa policy, simulate it before you deploy it.")
    head += _source_notes(scenario, pool, table, view, source, prefix, name if read else None, connection)
    head += _cluster_notes(view)
    if kind == "keda" and low == 0 and not view["keda"]:
        raise ScenarioError("--emit keda: keda = false with min = 0 is a plain HPA scaling to zero, which a "
                            "ScaledObject cannot express (KEDA scales 0 <-> 1 itself): emit hpa, or set keda = true")
    if kind == "keda":
        reactive = _connected(_reactive_trigger(table, view, query, source, queues, prefix, low), connection)
        doc = _placed(_scaled_object(name, low, high, table, view, [reactive, *crons]), namespace)
        return "\n".join(head + _yaml_lines(doc)) + "\n"
    return _hpa_manifest(head, name, queues, view, target, low, high, namespace)


def _source_notes(scenario: Scenario, pool: str, table: Mapping[str, Any], view: Mapping[str, Any], source: str,
                  prefix: str, read: str | None = None, connection: Mapping[str, Any] | None = None) -> list[str]:
    """The header's lines on what is scaled and where its metric is read (``source``: workers | advisor | redis;
    ``read``: the name of the Deployment read with ``--k8s``, None: deploy/kubernetes' worker; ``connection``: the
    read trigger's, whose address a ``redis`` trigger keeps)."""
    name, queues = read or deployment_name(scenario, pool), tuple(scenario.pool(pool).queues)
    scaled = f"{view['metric']} ({view['type']}, target {view['target']:g})"
    if source == "workers":
        origin = "" if read else " (deploy/kubernetes/worker.yaml)"
        out = [f"# The worker Deployment {name}{origin} scaled on {scaled}; its "
               f"metrics are scraped on port {METRICS_PORT}."]
        if table.get("metric_from", "queue") != "workers":
            out.append("# Only ready workers export it: with none ready it reads nothing, while the simulation "
                       "read it from the queue (metric_from = \"queue\"); metric_from = \"workers\" simulates "
                       "this trigger.")
        if view["metric"] == "p95_wait" and not table.get("p95_buckets"):
            out.append("# Prometheus computes the p95 wait from the histogram's buckets, while the simulation "
                       "took it from the waits themselves; p95_buckets = true simulates this trigger.")
        return out
    if source == "advisor":
        return [f"# The worker Deployment {name} scaled on {scaled}, read from the advisor Deployment "
                f"{advisor_name(scenario, pool)} (qsim advise --watch, in this file), which runs with no "
                "worker running."]
    where = ("the address and authentication of the trigger read with --k8s" if _keeps_address(connection)
             else "the address in the worker container's REDIS_ADDRESS, host:port")
    return [f"# The worker Deployment {name} scaled on {scaled}: the length of BullMQ's wait list "
            f"{redis_list(queues[0], prefix)}, read by KEDA from Redis ({where})."]


#: The metadata keys by which KEDA's Redis list scalers find their server.
_ADDRESS_KEYS = ("address", "addresses", "host", "hosts", "addressFromEnv", "addressesFromEnv", "hostsFromEnv")


def _keeps_address(connection: Mapping[str, Any] | None) -> bool:
    """The read trigger (``connection``) is a Redis list scaler naming its own server: the emitted one keeps it."""
    if not connection or connection.get("type") not in REDIS_TRIGGERS:
        return False
    return any(k in connection["metadata"] for k in _ADDRESS_KEYS)


def _cluster_notes(view: Mapping[str, Any]) -> list[str]:
    """The header's lines on what the manifest cannot carry: cluster flags, an HPA without behaviour."""
    out = []
    if view["tolerance"] not in (None, 0.1):
        out.append(f"# The policy's tolerance {view['tolerance']:g} is the cluster's "
                   "--horizontal-pod-autoscaler-tolerance (Kubernetes' default is 0.1).")
    if view["sync"] not in (None, DEFAULT_SYNC):
        out.append(f"# The policy's sync {view['sync']:g} s is the cluster's "
                   f"--horizontal-pod-autoscaler-sync-period (Kubernetes' default is {DEFAULT_SYNC:g} s).")
    if not view["behavior"]:
        out.append("# behavior = false: no behavior (Kubernetes' fixed rules: up to max(2 x current, 4) per sync, "
                   "300 s downscale stabilisation).")
    return out


def _connected(trigger: dict[str, Any], connection: Mapping[str, Any] | None) -> dict[str, Any]:
    """``trigger`` with the server address, other connection metadata and ``authenticationRef`` of a read
    trigger of its type (what is read stays the emitted trigger's)."""
    if not connection or not (connection.get("type") == trigger["type"]
                              or (trigger["type"] == "redis" and connection.get("type") in REDIS_TRIGGERS)):
        return trigger
    trigger = {**trigger, "type": connection["type"]}  # a cluster's or Sentinel's list is read there
    meta = dict(trigger["metadata"])
    if trigger["type"] in REDIS_TRIGGERS and _keeps_address(connection):
        meta.pop("addressFromEnv", None)  # the team's own address replaces the bundle's default
    meta.update({k: v for k, v in connection["metadata"].items() if k not in meta or k == "serverAddress"})
    out = {**trigger, "metadata": meta}
    if connection.get("authenticationRef"):
        out["authenticationRef"] = dict(connection["authenticationRef"])
    return out


def _reactive_trigger(table: Mapping[str, Any], view: Mapping[str, Any], query: str, source: str,
                      queues: tuple[str, ...], prefix: str, low: int) -> dict[str, Any]:
    """The ScaledObject's trigger on the queue's metric: Prometheus', or KEDA's ``redis`` on BullMQ's wait list."""
    trigger_meta = {"serverAddress": PROMETHEUS, "query": query, "threshold": json.loads(_number(view["target"]))}
    if view["activation"] > 0 or low == 0:
        trigger_meta["activationThreshold"] = json.loads(_number(view["activation"]))
    if table.get("ignore_null", True) is False:
        trigger_meta["ignoreNullValues"] = "false"
    if source != "redis":
        return {"type": "prometheus", "metricType": view["type"], "metadata": trigger_meta}
    redis_meta = {"addressFromEnv": "REDIS_ADDRESS", "listName": redis_list(queues[0], prefix),
                  "listLength": _number(view["target"]).strip('"')}
    if "activationThreshold" in trigger_meta:
        redis_meta["activationListLength"] = _number(view["activation"]).strip('"')
    return {"type": "redis", "metadata": redis_meta}


def _hpa_manifest(head: list[str], name: str, queues: tuple[str, ...], view: Mapping[str, Any], target: str,
                  low: int, high: int, namespace: str | None = None) -> str:
    """An autoscaling/v2 HPA on an external metric and prometheus-adapter's rule for it."""
    if low == 0:
        head = head + ["# minReplicas: 0 needs the HPAScaleToZero feature gate (alpha) on the cluster."]
    ext = (_BULLMQ_EXTERNAL if target == "bullmq" else _EXTERNAL).get(view["metric"])
    if ext is None:
        raise ScenarioError(f"--emit hpa --target {target}: {view['metric']} has no external metric qsim "
                            "exports for an HPA; emit keda")
    labels = {"queue": ",".join(queues) if view["metric"] == "recommended_workers" else queues[0]}
    if view["metric"] == "list_length":
        labels["state"] = "waiting"
    goal: dict[str, Any] = ({"type": "AverageValue", "averageValue": json.loads(_number(view["target"]))}
                            if view["type"] == "AverageValue" else
                            {"type": "Value", "value": json.loads(_number(view["target"]))})
    behavior = {"scaleUp": view["up"], "scaleDown": view["down"]}
    hpa: dict[str, Any] = {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": low if low == 0 and not view["keda"] else max(1, low), "maxReplicas": high,
                 **({"behavior": behavior} if view["behavior"] else {}),
                 "metrics": [{"type": "External", "external": {"metric": {"name": ext,
                                                                          "selector": {"matchLabels": labels}},
                                                               "target": goal}}]}}
    body = _yaml_lines(_adapter_config(ext, labels, view, target))
    return "\n".join(head + _yaml_lines(_placed(hpa, namespace)) + ["---", "# prometheus-adapter's rule for the external metric "
                                          "(rules.external in the prometheus-adapter chart's values)"] + body) + "\n"


def _adapter_config(ext: str, labels: Mapping[str, str], view: Mapping[str, Any], target: str) -> dict[str, Any]:
    """prometheus-adapter's ConfigMap with the external rule that serves ``ext`` to the HPA (``target``: whose
    queue, qsim | bullmq)."""
    if view["metric"] == "p95_wait":
        series = 'qsim_job_wait_seconds_bucket{queue!=""}'
        promql = (f"histogram_quantile(0.95, sum by (le, queue) (rate(<<.Series>>{{<<.LabelMatchers>>}}"
                  f"[{prom_range(view['window'])}])))")
    elif view["metric"] == "in_flight":  # the adapter's own name for waiting + active of the jobs gauge
        series = ('qsim_bullmq_jobs' if target == "bullmq" else 'qsim_queue_jobs') + '{queue!=""}'
        promql = ('sum(max by (queue, state) (<<.Series>>{<<.LabelMatchers>>,state=~"waiting|active"})) '
                  "by (queue)")
    else:
        series = f'{ext}{{queue!=""}}'
        promql = "max(<<.Series>>{<<.LabelMatchers>>}) by (" + ", ".join(labels) + ")"
    rule = {"seriesQuery": series, "resources": {"overrides": {"namespace": {"resource": "namespace"}}},
            "name": {"as": ext}, "metricsQuery": promql}
    config = "\n".join(_yaml_lines({"externalRules": [rule]})) + "\n"
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prometheus-adapter",
                                                                 "namespace": "monitoring"},
            "data": {"config.yaml": config}}
