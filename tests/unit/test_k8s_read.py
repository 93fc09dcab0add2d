"""qsim autoscale --k8s: a ScaledObject or HPA and its Deployment read as the scenario's autoscaler, then run."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from waiting import ROOT

import qsim
from qsim import Scenario, ScenarioError
from qsim.autoscale.manifest import _EXTERNAL, manifest
from qsim.analysis.autoscaling.contest import policy_table
from qsim.autoscale.emit import emit
from qsim.autoscale.k8s_deployment import bundle, worker_deployment
from qsim.autoscale.k8s_read import EXPORTED, WORKER_CONCURRENCY, WORKER_SHUTDOWN_GRACE, K8sRead, apply_k8s, \
    in_object_terms, read_objects

KUBE = ROOT / "deploy" / "kubernetes"
QUEUES = ("orders",)

SCALED_OBJECT = """\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: orders-worker
spec:
  scaleTargetRef:
    name: orders-worker
  minReplicaCount: 1
  maxReplicaCount: 12
  pollingInterval: 15
  cooldownPeriod: 120
  triggers:
    - type: redis
      metadata:
        address: redis.default.svc:6379
        listName: bull:orders:wait
        listLength: "4"
        activationListLength: "1"
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: orders-worker
spec:
  replicas: 2
  selector: {matchLabels: {app: orders-worker}}
  template:
    metadata: {labels: {app: orders-worker}}
    spec:
      terminationGracePeriodSeconds: 50
      containers:
        - name: worker
          image: registry.example.com/orders-worker:1.0
          command: ["qsim"]
          args: [worker, app.jobs:handle, --queue, orders, --concurrency, "2", --shutdown-grace, "40"]
          lifecycle:
            preStop:
              exec:
                command: ["sleep", "5"]
"""
BULLMQ_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: orders-worker
spec:
  replicas: 3
  selector: {matchLabels: {app: orders-worker}}
  template:
    metadata: {labels: {app: orders-worker}}
    spec:
      containers:
        - name: worker
          image: registry.example.com/orders-bullmq-worker:1.0
          command: ["node", "worker.js"]
"""
HPA = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: orders-worker
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: orders-worker}
  minReplicas: 2
  maxReplicas: 20
  metrics:
    - type: External
      external:
        metric:
          name: qsim_queue_jobs
          selector: {matchLabels: {queue: orders, state: waiting}}
        target: {type: AverageValue, averageValue: "8"}
"""


def day() -> Scenario:
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "seed": 1, "queues": [{"name": "orders"}],
        "jobs": [{"name": "order", "queue": "orders", "arrival": {"kind": "poisson", "rate": 3.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 1}]})


def write(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text, encoding="utf-8")
    return str(tmp / name)


def edited(text: str, path: str, value: Any) -> str:
    """``text`` (one YAML document) with the dotted ``path`` set to ``value`` (None: removed)."""
    doc = yaml.safe_load(text)
    *head, last = path.split(".")
    node = doc
    for key in head:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    key: Any = int(last) if isinstance(node, list) else last
    if value is None:
        del node[key]
    else:
        node[key] = value
    return yaml.safe_dump(doc)


# ------------------------------------------------------------------ reading


def test_a_keda_redis_scaled_object_and_its_deployment_are_read(tmp_path: Path) -> None:
    read = read_objects([write(tmp_path, "so.yaml", SCALED_OBJECT), write(tmp_path, "d.yaml", DEPLOYMENT)], QUEUES)
    a = read.autoscaler
    assert (a["policy"], a["metric"], a["metric_type"], a["target"], a["activation"]) == \
        ("hpa", "list_length", "AverageValue", 4.0, 1.0)
    assert (a["min"], a["max"], a["poll"], a["cooldown"]) == (1, 12, 15.0, 120.0)
    # no behavior: KEDA creates an HPA without one, which follows Kubernetes' fixed rules
    assert a["behavior"] is False and "scale_up" not in a and "scale_down_stabilization" not in a
    # grace: 50 s less the 5 s preStop sleep, and at most the worker's own 40 s
    assert read.pool == {"workers": 2, "concurrency": 2, "grace": 40.0, "termination_grace_period": 50.0,
                         "pre_stop": 5.0}
    s = apply_k8s(day(), "workers", read)
    assert (s.pool("workers").workers, s.pool("workers").concurrency) == (2, 2)
    assert s.autoscaler("workers") is not None and s.autoscaler("workers").grace == 40.0  # type: ignore[union-attr]


def test_one_file_of_several_documents_reads_the_same(tmp_path: Path) -> None:
    both = read_objects([write(tmp_path, "all.yaml", SCALED_OBJECT + "---\n" + DEPLOYMENT)], QUEUES)
    apart = read_objects([write(tmp_path, "so.yaml", SCALED_OBJECT), write(tmp_path, "d.yaml", DEPLOYMENT)], QUEUES)
    assert (both.autoscaler, both.pool) == (apart.autoscaler, apart.pool)


def test_the_shipped_scaled_object_and_worker_are_the_qsim_policy() -> None:
    read = qsim.load_k8s([KUBE / "keda-scaledobject.yaml", KUBE / "worker.yaml"], day())
    a = read.autoscaler
    assert (a["policy"], a["slo"], a["window"], a["min"], a["max"], a["poll"]) == \
        ("qsim", "p95_wait<=2", 900.0, 1, 40, 30.0)
    assert (a["scale_down_stabilization"], a["scale_down"]) == (600.0, [{"type": "pods", "value": 1, "period": 120.0}])
    assert read.pool["concurrency"] == 10 and read.pool["grace"] == 60.0 and read.pool["workers"] == 2
    assert read.ignored == ()
    # its advice is the workers' (no advisor Deployment), an empty read an error, then KEDA's fallback
    assert (a["metric_from"], a["ignore_null"], a["fallback_failures"], a["fallback_replicas"]) == \
        ("workers", False, 3, 6)
    hpa = qsim.load_k8s([KUBE / "hpa-external.yaml", KUBE / "worker.yaml"], day())
    keda_only = ("poll", "cooldown", "fallback_failures", "fallback_replicas")
    assert {k: v for k, v in hpa.autoscaler.items() if k not in keda_only} == \
        {k: v for k, v in a.items() if k not in keda_only}
    assert "poll" not in hpa.autoscaler  # KEDA's pollingInterval; the HPA decides every sync (15 s by default)


def test_an_hpa_without_behavior_is_behavior_false_and_with_it_its_own(tmp_path: Path) -> None:
    plain = read_objects([write(tmp_path, "h.yaml", HPA)], QUEUES).autoscaler
    assert (plain["policy"], plain["metric"], plain["target"], plain["min"], plain["max"], plain["behavior"]) == \
        ("hpa", "list_length", 8.0, 2, 20, False)
    assert not {"poll", "sync", "scale_up", "scale_down_stabilization", "keda"} & set(plain)
    s = apply_k8s(day(), "workers", read_objects([write(tmp_path, "h.yaml", HPA)], QUEUES)).autoscaler("workers")
    assert s is not None and s.params()["sync"] == 15.0 and s.params()["behavior"] is False
    behaviour = {"scaleUp": {"stabilizationWindowSeconds": 30, "selectPolicy": "Min",
                             "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60},
                                          {"type": "Percent", "value": 50, "periodSeconds": 30}]},
                 "scaleDown": {"selectPolicy": "Disabled", "tolerance": 0.05}, }
    with_b = read_objects([write(tmp_path, "h2.yaml", edited(HPA, "spec.behavior", behaviour))], QUEUES).autoscaler
    assert (with_b["scale_up_stabilization"], with_b["scale_up_select"]) == (30.0, "min")
    assert with_b["scale_up"] == [{"type": "pods", "value": 2, "period": 60.0},
                                  {"type": "percent", "value": 50, "period": 30.0}]
    assert (with_b["scale_down_select"], with_b["scale_down"], with_b["scale_down_tolerance"]) == \
        ("disabled", [], 0.05)
    assert "scale_up_tolerance" not in with_b and "behavior" not in with_b
    apply_k8s(day(), "workers", read_objects([write(tmp_path, "h2.yaml", edited(HPA, "spec.behavior", behaviour))],
                                             QUEUES))


def test_zero_minimums_tolerances_and_the_initial_cooldown_are_read(tmp_path: Path) -> None:
    # an HPA with minReplicas 0 (HPAScaleToZero) scales to zero itself: keda = false
    zero = read_objects([write(tmp_path, "h.yaml", edited(HPA, "spec.minReplicas", 0))], QUEUES).autoscaler
    assert (zero["min"], zero["keda"]) == (0, False)
    both = {"scaleUp": {"tolerance": 0.02}, "scaleDown": {"tolerance": "150m"}}
    tol = read_objects([write(tmp_path, "t.yaml", edited(HPA, "spec.behavior", both))], QUEUES).autoscaler
    assert (tol["scale_up_tolerance"], tol["scale_down_tolerance"]) == (0.02, 0.15)
    so = read_objects([write(tmp_path, "so.yaml", edited(SCALED_OBJECT, "spec.initialCooldownPeriod", 90))],
                      QUEUES).autoscaler
    assert so["initial_cooldown"] == 90.0
    for table in (zero, tol, so):
        apply_k8s(day(), "workers", K8sRead(autoscaler=table, pool={}))


def test_the_reader_knows_every_metric_the_emitter_writes() -> None:
    assert EXPORTED == _EXTERNAL


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(("path", "value", "message"), [
    ("spec.triggers.0.type", "cpu", "spec.triggers[0].type is 'cpu'"),
    ("spec.triggers.0.metadata.listName", "payments", "names queue 'payments'"),
    ("spec.triggers.0.metadata.listName", "qsim:{orders}:wait", "KEDA's redis list trigger cannot read (LLEN)"),
    ("spec.triggers.0.metricType", "Utilization", "spec.triggers[0].metricType is 'Utilization'"),
    ("spec.advanced", {"scalingModifiers": {"formula": "a + b"}}, "spec.advanced.scalingModifiers"),
    ("spec.initialCooldownPeriod", -1, "spec.initialCooldownPeriod must be in >= 0"),
    ("spec.idleReplicaCount", 1, "spec.idleReplicaCount is 1"),
    ("spec.advanced", {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {
        "stabilizationWindowSeconds": 7200}}}}, "stabilizationWindowSeconds must be in 0..3600"),
    ("spec.advanced", {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 2000}]}}}}, "periodSeconds must be in 1..1800"),
    ("spec.advanced", {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {
        "policies": [{"type": "Pods", "value": 1, "periodSeconds": 0}]}}}}, "periodSeconds must be in 1..1800"),
    ("spec.advanced", {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {
        "policies": [{"type": "Ratio", "value": 1, "periodSeconds": 15}]}}}}, "must be Pods or Percent"),
    ("spec.advanced", {"horizontalPodAutoscalerConfig": {"behavior": {"scaleUp": {"selectPolicy": "Most"}}}},
     "must be Max, Min or Disabled"),
    ("spec.minReplicaCount", 20, "must be <= maxReplicaCount (12), got 20"),
    ("spec.pollingInterval", 0, "spec.pollingInterval must be in >= 1"),
    ("spec.triggers.0.metadata.listLength", "-3", "listLength must be in >= 1"),
    ("spec.triggers.0.metadata.listLength", "lots", "listLength must be a whole number"),
    ("spec.triggers", [], "has no metric qsim can scale on"),
])
def test_a_scaled_object_field_qsim_cannot_honour_is_named(tmp_path: Path, path: str, value: Any,
                                                           message: str) -> None:
    f = write(tmp_path, "so.yaml", edited(SCALED_OBJECT, path, value))
    with pytest.raises(ScenarioError) as e:
        read_objects([f], QUEUES)
    assert message in str(e.value) and f"{f}: ScaledObject orders-worker: " in str(e.value)


@pytest.mark.parametrize(("path", "value", "message"), [
    ("spec.metrics.0", {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                                   "averageUtilization": 70}}},
     "spec.metrics[0].type is 'Resource'"),
    ("spec.metrics.0.external.metric.name", "sqs_messages", "is 'sqs_messages', not a metric qsim exports"),
    ("spec.minReplicas", 30, "must be <= maxReplicas (20), got 30"),
    ("spec.maxReplicas", None, "spec.maxReplicas is required"),
    ("spec.behavior", {"scaleUp": {"tolerance": -0.1}}, "spec.behavior.scaleUp.tolerance must be >= 0"),
    ("spec.behavior", {"scaleDown": {"stabilizationWindowSeconds": -1}}, "must be in 0..3600"),
    ("spec.metrics.0.external.target", {"type": "Utilization"}, "must be AverageValue or Value"),
])
def test_an_hpa_field_qsim_cannot_honour_is_named(tmp_path: Path, path: str, value: Any, message: str) -> None:
    f = write(tmp_path, "h.yaml", edited(HPA, path, value))
    with pytest.raises(ScenarioError) as e:
        read_objects([f], QUEUES)
    assert message in str(e.value) and f"{f}: HorizontalPodAutoscaler orders-worker: " in str(e.value)


def test_the_files_and_the_deployment_are_checked(tmp_path: Path) -> None:
    so = write(tmp_path, "so.yaml", SCALED_OBJECT)
    cases = [([str(tmp_path / "missing.yaml")], "cannot read"),
             ([write(tmp_path, "bad.yaml", "a: [")], "not valid YAML"),
             ([write(tmp_path, "d.yaml", DEPLOYMENT)], "found none"),
             ([so, so], "found ScaledObject orders-worker, ScaledObject orders-worker"),
             ([so, write(tmp_path, "o.yaml", edited(DEPLOYMENT, "metadata.name", "other"))],
              "is 'orders-worker', and no Deployment given is named so"),
             ([so, write(tmp_path, "g.yaml", edited(DEPLOYMENT, "spec.template.spec.terminationGracePeriodSeconds",
                                                    -1))], "terminationGracePeriodSeconds must be in >= 0"),
             ([so, write(tmp_path, "c.yaml", DEPLOYMENT.replace('"2"', '"0"'))], "--concurrency must be in >= 1"),
             ([write(tmp_path, "q.yaml", edited(SCALED_OBJECT, "spec.triggers.0",
                                                {"type": "prometheus", "metadata": {
                                                    "query": "sum(rate(http_requests_total[1m]))",
                                                    "threshold": "5"}}))], "reads none of the metrics qsim exports")]
    for files, message in cases:
        with pytest.raises(ScenarioError, match=None) as e:
            read_objects(files, QUEUES)
        assert message in str(e.value), (files, str(e.value))


def test_ignore_unknown_lists_what_is_not_honoured(tmp_path: Path) -> None:
    two = edited(SCALED_OBJECT, "spec.triggers", yaml.safe_load(SCALED_OBJECT)["spec"]["triggers"] + [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "70"}}])
    f = write(tmp_path, "so.yaml", two)
    with pytest.raises(ScenarioError, match=r"spec\.triggers\[1\]\.metricType"):
        read_objects([f], QUEUES)
    read = read_objects([f], QUEUES, ignore_unknown=True)
    assert read.autoscaler["metric"] == "list_length"
    assert len(read.ignored) == 1 and "spec.triggers[1].metricType" in read.ignored[0]
    second = edited(SCALED_OBJECT, "spec.triggers", yaml.safe_load(SCALED_OBJECT)["spec"]["triggers"] * 2)
    read = read_objects([write(tmp_path, "so2.yaml", second)], QUEUES, ignore_unknown=True)
    assert len(read.ignored) == 1 and "spec.triggers[1] is a second metric" in read.ignored[0]


def test_an_hpa_selector_names_its_queue_by_expressions_too(tmp_path: Path) -> None:
    sel = "spec.metrics.0.external.metric.selector"
    by_labels = read_objects([write(tmp_path, "a.yaml", HPA)], QUEUES)
    # Given the same selector written with matchExpressions (operator In)
    same = edited(HPA, sel, {"matchLabels": {"state": "waiting"},
                             "matchExpressions": [{"key": "queue", "operator": "In", "values": ["orders"]}]})
    assert read_objects([write(tmp_path, "b.yaml", same)], QUEUES).autoscaler == by_labels.autoscaler
    # When it names a queue the pool does not serve, Then that is an error naming the value (it was not read)
    other = edited(HPA, sel, {"matchExpressions": [{"key": "queue", "operator": "In", "values": ["invoices"]}]})
    with pytest.raises(ScenarioError, match=r"matchExpressions\[0\]\.values\[0\] names queue 'invoices'"):
        read_objects([write(tmp_path, "c.yaml", other)], QUEUES)
    # and an operator that selects series qsim cannot tell apart is named, or ignored with --ignore-unknown
    notin = edited(HPA, sel, {"matchLabels": {"state": "waiting"},
                              "matchExpressions": [{"key": "queue", "operator": "NotIn", "values": ["invoices"]}]})
    with pytest.raises(ScenarioError, match=r"matchExpressions\[0\]\.operator is 'NotIn' on the queue label"):
        read_objects([write(tmp_path, "d.yaml", notin)], QUEUES)
    read = read_objects([write(tmp_path, "d.yaml", notin)], QUEUES, ignore_unknown=True)
    assert any("NotIn" in line for line in read.ignored)


@pytest.mark.parametrize(("labels", "said"), [
    ({"queue": "orders", "state": "active"}, "matchLabels.state is 'active': qsim_queue_jobs has a series per state"),
    ({"queue": "orders"}, "matchLabels.state is None"),
    ({"state": "waiting"}, "selector names no queue: the metric has a series per queue"),
])
def test_an_hpa_selector_that_reads_other_series_than_the_metric_is_named(labels: dict[str, str], said: str,
                                                                         tmp_path: Path) -> None:
    # (each was read as the waiting jobs of the pool's queue)
    hpa = edited(HPA, "spec.metrics.0.external.metric.selector", {"matchLabels": labels})
    with pytest.raises(ScenarioError, match=re.escape(said)):
        read_objects([write(tmp_path, "a.yaml", hpa)], QUEUES)


def _two_workers(first: list[str], second: list[str]) -> str:
    """DEPLOYMENT with two qsim worker containers (their args)."""
    doc = yaml.safe_load(DEPLOYMENT)
    c = doc["spec"]["template"]["spec"]["containers"][0]
    c2 = {**c, "name": "second", "args": second}
    c.pop("lifecycle")
    c["args"] = first
    doc["spec"]["template"]["spec"]["containers"] = [c, c2]
    return yaml.safe_dump(doc)


def test_the_worker_container_read_is_the_one_serving_the_pools_queues(tmp_path: Path) -> None:
    # Given a pod whose first container works another queue, the second the pool's
    dep = _two_workers(["worker", "m:mail", "--queue", "emails", "--concurrency", "50", "--shutdown-grace", "5"],
                       ["worker", "m:h", "--queue", "orders", "--concurrency", "4", "--shutdown-grace", "40"])
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + dep)], QUEUES)
    # Then the pool is the second's (it was the first's: concurrency 50, grace 5)
    assert read.pool["concurrency"] == 4 and read.pool["grace"] == 40.0
    # and a bundle emitted from it sets the second's flags, leaving the first as it is
    s = apply_k8s(day(), "workers", read)
    text, _ = emit("keda", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", deployment=read.deployment)
    (out,) = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Deployment"]
    first, second = out["spec"]["template"]["spec"]["containers"]
    assert first["args"][-2:] == ["--shutdown-grace", "5"] and "--concurrency" in second["args"]
    # When no container serves the pool's queues, or two do, Then that is an error naming the containers
    other = _two_workers(["worker", "m:a", "--queue", "emails"], ["worker", "m:b", "--queue", "sms"])
    with pytest.raises(ScenarioError, match=r"containers\[0\], spec.template.spec.containers\[1\] run qsim worker "
                                            r"on other queues \(emails; sms\)"):
        read_objects([write(tmp_path, "b.yaml", SCALED_OBJECT + "---\n" + other)], QUEUES)
    both = _two_workers(["worker", "m:a", "--queue", "orders"], ["worker", "m:b", "--queue", "orders"])
    with pytest.raises(ScenarioError, match="in several containers of one pod"):
        read_objects([write(tmp_path, "c.yaml", SCALED_OBJECT + "---\n" + both)], QUEUES)


def test_qsims_own_options_before_the_verb_and_the_default_shutdown_grace_are_read(tmp_path: Path) -> None:
    # Given `qsim -v worker ...` without --shutdown-grace, under a 120 s termination grace period
    dep = edited(edited(DEPLOYMENT, "spec.template.spec.containers.0.args",
                        ["-v", "worker", "app.jobs:handle", "--queue", "orders", "--concurrency", "6"]),
                 "spec.template.spec.terminationGracePeriodSeconds", 120)
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + dep)], QUEUES)
    # Then the worker is found (its concurrency was the scenario's) and drains for its default 30 s, not 120 - 5
    assert read.pool["concurrency"] == 6 and read.pool["grace"] == WORKER_SHUTDOWN_GRACE == 30.0


def test_the_worker_defaults_read_are_qsim_workers() -> None:
    from qsim.engine.settings import WorkerSettings

    defaults = {f.name: f.default for f in dataclasses.fields(WorkerSettings)}
    assert (defaults["concurrency"], defaults["shutdown_grace"]) == (WORKER_CONCURRENCY, WORKER_SHUTDOWN_GRACE)


def test_a_bullmq_workers_pre_stop_is_taken_from_its_grace(tmp_path: Path) -> None:
    dep = edited(BULLMQ_DEPLOYMENT, "spec.template.spec.containers.0.lifecycle", {"preStop": {"sleep": {"seconds": 5}}})
    dep = edited(dep, "spec.template.spec.terminationGracePeriodSeconds", 45)
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + dep)], QUEUES)
    assert (read.pool["pre_stop"], read.pool["grace"]) == (5.0, 40.0)


@pytest.mark.parametrize(("path", "value"), [
    ("spec.advanced", {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"selectPolicy": ["Min"]}}}}),
    ("metadata", "orders-worker"),
])
def test_a_field_of_the_wrong_shape_is_an_error_not_a_traceback(tmp_path: Path, path: str, value: Any) -> None:
    bad = edited(SCALED_OBJECT, path, value)
    with pytest.raises(ScenarioError):
        read_objects([write(tmp_path, "a.yaml", bad + "---\n" + DEPLOYMENT)], QUEUES)


def test_another_deployment_of_any_shape_does_not_stop_the_read(tmp_path: Path) -> None:
    odd = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\nspec: oops\n"
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + DEPLOYMENT + "---\n" + odd)], QUEUES)
    assert read.pool["concurrency"] == 2
    hpa = edited(HPA, "spec.metrics.0.external.metric.name", ["qsim_queue_jobs"])
    with pytest.raises(ScenarioError, match=r"spec.metrics\[0\].external.metric.name"):
        read_objects([write(tmp_path, "b.yaml", hpa)], QUEUES)


@pytest.mark.parametrize(("path", "value", "said"), [
    ("spec.triggers.0.metadata.listLength", "2.5", r"spec.triggers\[0\].metadata.listLength must be a whole number"),
    ("spec.maxReplicaCount", 3_000_000_000, r"spec.maxReplicaCount must be in 1..2147483647"),
])
def test_values_kubernetes_and_keda_refuse_are_refused_when_read(path: str, value: Any, said: str,
                                                                 tmp_path: Path) -> None:
    # (KEDA parses a redis trigger's lengths as whole numbers; replica counts are int32): they were read
    with pytest.raises(ScenarioError, match=said):
        read_objects([write(tmp_path, "a.yaml", edited(SCALED_OBJECT, path, value))], QUEUES)


def test_a_fractional_list_length_is_not_emitted_for_keda_to_refuse() -> None:
    raw = day().to_dict()
    raw["autoscalers"] = [{"pool": "workers", "policy": "hpa", "metric": "list_length", "target": 2.5, "min": 1,
                           "max": 8}]
    s = Scenario.from_dict(raw)
    with pytest.raises(ScenarioError, match="target = 2.5 is KEDA's redis trigger's listLength, which it reads as a "
                                            "whole number"):
        emit("keda", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", target="bullmq")


@pytest.mark.parametrize("table", [
    {"policy": "hpa", "metric": "p95_wait", "metric_type": "Value", "target": 1.23456789, "window": 90.4,
     "scale_up_tolerance": 0.123456789, "metric_from": "workers", "p95_buckets": True, "grace": 30.123456789},
    {"policy": "qsim", "slo": "p95_wait<=2", "window": 1234.5678, "grace": 30.123456789},
])
def test_values_are_emitted_exactly_and_read_back_as_simulated(table: dict[str, Any], tmp_path: Path) -> None:
    # Given values with more than 6 significant digits (they were written with 6: 1.23457, a 90 s range)
    raw = day().to_dict()
    raw["autoscalers"] = [{"pool": "workers", "min": 1, "max": 8, **table}]
    s = Scenario.from_dict(raw)
    text, rule = emit("keda", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2")
    # When the bundle is read back, Then it is the autoscaler simulated, to the last digit
    back = apply_k8s(day(), "workers", read_objects([write(tmp_path, "b.yaml", text)], QUEUES))
    got, want = policy_table(back, "workers"), policy_table(s, "workers")
    assert {k: got[k] for k in table if k in got} == {k: want[k] for k in table if k in want}


@pytest.mark.parametrize(("query", "said"), [
    ('qsim_queue_jobs{queue="orders",state="waiting"}', "qsim_queue_jobs is not aggregated"),
    ('max(qsim_queue_jobs{queue="orders",state="waiting"}) by (pod)', "by (pod) keeps a series per pod"),
    ('max(qsim_queue_jobs{queue="orders",state="waiting"} > 20)', "a comparison filters the series"),
    ('max(qsim_queue_jobs{state="waiting"})', "it names no queue"),
    ('histogram_quantile(0.95, rate(qsim_job_wait_seconds_bucket{queue="orders"}[2m]))', "without sum by (le)"),
])
def test_a_query_that_does_not_read_the_queues_one_value_is_named(query: str, said: str, tmp_path: Path) -> None:
    # (each was read as the metric, while KEDA errs on several series or reads a filtered or summed one)
    so = edited(SCALED_OBJECT, "spec.triggers.0", {"type": "prometheus", "metricType": "Value", "metadata": {
        "serverAddress": "http://prometheus:9090", "query": query, "threshold": "4"}})
    with pytest.raises(ScenarioError, match=re.escape(said)):
        read_objects([write(tmp_path, "a.yaml", so)], QUEUES)


def test_the_queries_emit_writes_read_back_without_a_word(tmp_path: Path) -> None:
    from qsim.autoscale.manifest import metric_query

    for metric in ("list_length", "in_flight", "oldest_age", "p95_wait", "recommended_workers"):
        for queues in (("orders",), ("orders", "mail")):
            so = edited(SCALED_OBJECT, "spec.triggers.0", {"type": "prometheus", "metadata": {
                "serverAddress": "http://prometheus:9090", "query": metric_query(metric, queues, 60.0),
                "threshold": "4"}})
            read = read_objects([write(tmp_path, "a.yaml", so)], queues, slo="p95_wait<=2", ignore_unknown=True)
            assert read.ignored == () and read.autoscaler.get("metric", "recommended_workers") == metric, metric


def test_a_flag_set_from_the_containers_env_is_read_as_kubernetes_expands_it(tmp_path: Path) -> None:
    at = "spec.template.spec.containers.0"
    dep = edited(edited(DEPLOYMENT, f"{at}.args", ["worker", "app.jobs:handle", "--queue", "orders", "--concurrency",
                                                   "$(CONC)", "--shutdown-grace=$(GRACE)"]),
                 f"{at}.env", [{"name": "CONC", "value": "6"},
                               {"name": "GRACE", "valueFrom": {"configMapKeyRef": {"name": "w", "key": "grace"}}}])
    # (it was "--concurrency must be a whole number, got '$(CONC)'", --ignore-unknown or not)
    with pytest.raises(ScenarioError, match=r"has '--shutdown-grace=\$\(GRACE\)', whose \$\(GRACE\) is not a value"):
        read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + dep)], QUEUES)
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + dep)], QUEUES, ignore_unknown=True)
    assert read.pool["concurrency"] == 6 and read.pool["grace"] == WORKER_SHUTDOWN_GRACE and len(read.ignored) == 1


# ------------------------------------------------------------------ the command


def test_cli_simulates_a_hand_written_scaled_object(tmp_path: Path) -> None:
    toml = tmp_path / "day.toml"
    qsim.save(day(), toml)
    so, dep = write(tmp_path, "so.yaml", SCALED_OBJECT), write(tmp_path, "deploy.yaml", DEPLOYMENT)
    cmd = [sys.executable, "-m", "qsim", "autoscale", str(toml), "--k8s", so, dep, "--slo", "p95_wait<=2",
           "--replications", "1", "--processes", "1", "--no-static", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert set(doc["policies"]) == {"k8s"}
    k8s = doc["k8s"]
    assert k8s["autoscaler"]["policy"] == "hpa" and k8s["autoscaler"]["target"] == 4.0
    assert k8s["autoscaler"]["grace"] == 40.0 and k8s["pool"]["concurrency"] == 2 and k8s["ignored"] == []
    assert doc["policies"]["k8s"]["params"] == k8s["autoscaler"]
    assert 1 <= doc["policies"]["k8s"]["max_workers"] <= 12
    bad = write(tmp_path, "bad.yaml", edited(SCALED_OBJECT, "spec.triggers.0.type", "cpu"))
    run = subprocess.run(cmd[:6] + [bad, dep] + cmd[8:], capture_output=True, text=True)
    assert run.returncode == 2 and "spec.triggers[0].type is 'cpu'" in run.stderr and run.stdout == ""


def test_an_emit_refused_after_a_read_names_the_object_fields_behind_the_keys(tmp_path: Path) -> None:
    # Given a team's ScaledObject at minReplicaCount 0 on a series only its workers export
    toml = tmp_path / "day.toml"
    qsim.save(day(), toml)
    workers_series = {"type": "prometheus", "metadata": {
        "serverAddress": "http://prometheus:9090", "query": 'max(qsim_queue_jobs{queue="orders",state="waiting"})',
        "threshold": "4"}}
    so = write(tmp_path, "so.yaml", edited(edited(SCALED_OBJECT, "spec.minReplicaCount", 0), "spec.triggers.0",
                                           workers_series))
    dep = write(tmp_path, "deploy.yaml", DEPLOYMENT)
    # When it is emitted as it is (nothing would wake the pool from zero)
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(toml), "--k8s", so, dep, "--slo",
                          "p95_wait<=2", "--emit", "keda", str(tmp_path / "out.yaml")], capture_output=True, text=True)
    # Then the refusal, in one line, also says which field of the objects its scenario key is (the user wrote
    # no scenario key: "min >= 1" alone named a key of a table they never saw)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "min >= 1" in run.stderr and "read from ScaledObject orders-worker (" in run.stderr
    assert "min is minReplicaCount (ScaledObject) or minReplicas (HPA)" in run.stderr
    assert not (tmp_path / "out.yaml").exists()
    # and a message naming no key is left as it was
    read = read_objects([so, dep], QUEUES)
    assert in_object_terms("nothing to translate in minutes", read) == "nothing to translate in minutes"


# ------------------------------------------------------------------ the round trip


_WHOLE = st.integers(min_value=0, max_value=3600).map(float)
_RULE = st.fixed_dictionaries({"type": st.sampled_from(["pods", "percent"]), "value": st.integers(1, 200),
                               "period": st.integers(1, 1800).map(float)})


_CLOCK = st.tuples(st.integers(0, 23), st.integers(0, 59)).map(lambda hm: f"{hm[0]:02d}:{hm[1]:02d}")
_FLOOR = st.fixed_dictionaries({"start": _CLOCK, "end": _CLOCK, "replicas": st.integers(1, 60)}).filter(
    lambda f: f["start"] != f["end"])


@st.composite
def _autoscaler(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(["keda", "hpa"]))
    policy = draw(st.sampled_from(["hpa", "qsim", "schedule"] if kind == "keda" else ["hpa", "qsim"]))
    low = draw(st.integers(0, 5))
    t: dict[str, Any] = {"pool": "workers", "policy": policy, "min": low, "max": draw(st.integers(max(low, 1), 50)),
                         "grace": draw(st.integers(0, 600).map(float))}
    if kind == "keda":  # KEDA's keys; an HPA carries none (an HPA with min 0 is a plain HPA scaling to zero)
        t.update(poll=draw(st.integers(1, 600).map(float)), cooldown=draw(st.integers(0, 3600).map(float)),
                 initial_cooldown=draw(st.integers(0, 3600).map(float)),
                 activation=draw(st.integers(0, 100).map(lambda x: x / 2)))
    elif low == 0:
        t["keda"] = False
    t["behavior"] = draw(st.booleans())
    for way in ("up", "down") if t["behavior"] else ():
        t[f"scale_{way}_stabilization"] = draw(_WHOLE)
        t[f"scale_{way}_select"] = select = draw(st.sampled_from(["max", "min", "disabled"]))
        t[f"scale_{way}"] = draw(st.lists(_RULE, min_size=0 if select == "disabled" else 1, max_size=3))
        tolerance = draw(st.none() | st.integers(0, 100).map(lambda x: x / 100))
        if tolerance is not None:
            t[f"scale_{way}_tolerance"] = tolerance
    if policy == "qsim":
        t["slo"] = draw(st.sampled_from(["p95_wait<=2", "p99_wait<=0.5", "mean_wait<10"]))
        t["window"] = draw(st.integers(60, 3600).map(float))
        return kind, t
    if policy == "schedule":  # KEDA cron floors, with or without a reactive trigger beside them
        t["floors"] = draw(st.lists(_FLOOR, min_size=1, max_size=4))
        t["timezone"] = draw(st.sampled_from(["Etc/UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"]))
        if not draw(st.booleans()):
            del t["activation"]  # a reactive trigger's: none to carry it
            return kind, t
    t["metric"] = metric = draw(st.sampled_from(["list_length", "in_flight", "oldest_age", "p95_wait",
                                                 "recommended_workers"]))
    t["metric_type"] = draw(st.sampled_from(["AverageValue", "Value"]))
    t["target"] = draw(st.integers(1, 2000).map(lambda x: x / 4))
    if metric == "recommended_workers":
        t["slo"] = "p95_wait<=2"
        t["window"] = draw(st.integers(60, 3600).map(float))
        if t["metric_type"] == "AverageValue" and t["target"] == 1 and policy == "hpa":
            t["target"] = 2.0  # AverageValue 1 of the advice is the qsim policy
    elif metric == "p95_wait":  # read through Prometheus, from the histogram's buckets
        t["p95_buckets"] = True
        if kind == "keda":
            t["window"] = draw(st.integers(1, 3600).map(float))
    return kind, t


def _whole_lengths(t: dict[str, Any]) -> None:
    """``t``'s target and activation rounded up to whole numbers, as KEDA's redis trigger reads them."""
    for key in ("target", "activation"):
        if t.get(key) is not None:
            t[key] = float(max(1 if key == "target" else 0, math.ceil(t[key])))


@st.composite
def _emitted(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    """An autoscaler qsim can emit for a ``target`` (qsim | bullmq) queue: a pool at zero reads a metric that
    exists with no worker running, a BullMQ queue has no wait histogram, and the series keys say what the
    trigger reads (the workers' series vanishes with them)."""
    kind, t = draw(_autoscaler())
    target = draw(st.sampled_from(["qsim", "bullmq"]))
    if target == "bullmq" and t.get("metric") == "p95_wait":
        t["metric"] = "list_length"
        t.pop("window", None)
        t.pop("p95_buckets", None)
    if target == "bullmq":  # KEDA's redis trigger (a BullMQ list) reads whole lengths
        _whole_lengths(t)
    if target == "qsim" and t["min"] == 0 and t.get("metric") not in (None, "recommended_workers") \
            and (kind == "keda" or t.get("keda") is False):
        t["min"] = 1
        t.pop("keda", None)
    # the series: a qsim queue's trigger on the workers' series (not the advisor's at zero) vanishes with them;
    # KEDA reads it as 0 or as an error (an HPA: an error), and may fall back
    reads = t.get("metric", "recommended_workers" if t["policy"] == "qsim" else None)
    if target == "qsim" and reads is not None and not (reads == "recommended_workers" and t["min"] == 0):
        t["metric_from"] = "workers"
        if kind == "hpa" or draw(st.booleans()):
            t["ignore_null"] = False
    if kind == "keda" and t.get("metric_type", "AverageValue") == "AverageValue" and draw(st.booleans()):
        # (KEDA applies a fallback only to AverageValue triggers)
        t.update(fallback_replicas=draw(st.integers(0, 50)), fallback_failures=draw(st.integers(0, 10)))
        behavior = draw(st.sampled_from(["static", "currentReplicas", "currentReplicasIfHigher",
                                         "currentReplicasIfLower"]))
        if behavior != "static":  # static: KEDA's default, left out as the reader leaves it
            t["fallback_behavior"] = behavior
    return kind, target, t


@settings(max_examples=examples(100), deadline=None)
@given(_emitted(), st.integers(1, 16), st.integers(0, 40))
@example(
    drawn=('hpa',
     'bullmq',
     {'pool': 'workers',
      'policy': 'hpa',
      'min': 0,
      'max': 1,
      'grace': 0.0,
      'keda': False,
      'behavior': True,
      'scale_up_stabilization': 0.0,
      'scale_up_select': 'max',
      'scale_up': [{'type': 'pods', 'value': 1, 'period': 1.0}],
      'scale_down_stabilization': 0.0,
      'scale_down_select': 'max',
      'scale_down': [{'type': 'pods', 'value': 1, 'period': 1.0}],
      'metric': 'recommended_workers',
      'metric_type': 'AverageValue',
      'target': 1.0,
      'slo': 'p95_wait<=2',
      'window': 60.0}),
    concurrency=1,
    workers=0,
).via('discovered failure')
@example(
    drawn=('keda',
     'qsim',
     {'pool': 'workers',
      'policy': 'qsim',
      'min': 0,
      'max': 29,
      'grace': 70.0,
      'poll': 600.0,
      'cooldown': 600.0,
      'initial_cooldown': 1.0,
      'activation': 5.0,
      'behavior': False,
      'slo': 'p95_wait<=2',
      'window': 142.0}),
    concurrency=11,
    workers=25,
).via('discovered failure')
def test_an_emitted_bundle_read_back_is_the_same_autoscaler_and_pool(drawn: tuple[str, str, dict[str, Any]],
                                                                    concurrency: int, workers: int) -> None:
    # Given any autoscaler qsim can emit, for a qsim queue or a BullMQ one (whose own worker Deployment is read)
    kind, target, table = drawn
    raw = day().to_dict()
    raw["pools"][0].update(concurrency=concurrency, workers=workers)
    raw["autoscalers"] = [table]
    s = Scenario.from_dict(raw)
    full = policy_table(s, "workers")
    node = yaml.safe_load(BULLMQ_DEPLOYMENT) if target == "bullmq" else None
    # When it is emitted as a bundle and the bundle is read back (what the cluster would not run as simulated is
    # refused: a pool at 0 workers under min >= 1, which KEDA lifts at once; an HPA for a pool scaling to zero)
    if (kind == "keda" and workers == 0 and full["min"] >= 1) or (kind == "hpa" and full["min"] == 0
                                                                   and full.get("keda", True) is not False):
        with pytest.raises(ScenarioError, match="--emit"):
            emit(kind, s, "workers", full, slo="p95_wait<=2", deployment=node, target=target)
        return
    text, _ = emit(kind, s, "workers", full, slo="p95_wait<=2", deployment=node, target=target)
    with tempfile.TemporaryDirectory() as name:
        read = read_objects([write(Path(name), "bundle.yaml", text)], QUEUES)
    back = apply_k8s(s, "workers", read)
    # Then it is the same autoscaler and pool, starting from the same workers (an hpa following the advice at
    # an AverageValue of 1 is the qsim policy, and reads back as it: the objects are the same)
    same = s
    if (table["policy"], table.get("metric"), table.get("metric_type"), table.get("target")) == (
            "hpa", "recommended_workers", "AverageValue", 1.0):
        qsim_table = {k: v for k, v in table.items() if k not in ("metric", "metric_type", "target")}
        same = Scenario.from_dict(raw | {"autoscalers": [qsim_table | {"policy": "qsim"}]})
    assert policy_table(back, "workers") == policy_table(same, "workers")
    assert (back.pool("workers").concurrency, back.pool("workers").workers) == (concurrency, workers)
    # and the same simulated trajectory, bit for bit (five minutes of the day), whatever the policy is called
    short = {"duration": 300.0}
    runs = [qsim.simulate(Scenario.from_dict(x.to_dict() | short), records=False).summary["autoscaling"]["workers"]
            for x in (s, back)]
    assert {**runs[0], "policy": None} == {**runs[1], "policy": None}


def _worker_args(*args: str) -> str:
    return DEPLOYMENT.replace('args: [worker, app.jobs:handle, --queue, orders, --concurrency, "2", --shutdown-grace, '
                              '"40"]', "args: [" + ", ".join(["worker", "app.jobs:handle", *args]) + "]")


@pytest.mark.parametrize(("deployment", "message"), [
    (_worker_args("--advise-slo", "fast"), "--advise-slo must be an SLO like p95_wait<=2, got 'fast'"),
    (_worker_args("--advise-slo", "p95_wait<=2", "--advise-window", "soon"),
     "--advise-window must be a duration like 90s, 15m or 1h30m, got 'soon'"),
    (_worker_args("--prefetch", "-1"), "--prefetch must be in >= 0"),
    (_worker_args("--shutdown-grace", "-5"), "--shutdown-grace must be >= 0"),
    (DEPLOYMENT.replace('command: ["sleep", "5"]', 'command: ["/bin/drain"]'),
     "lifecycle.preStop is a hook qsim cannot time"),
    (DEPLOYMENT.replace("apiVersion: apps/v1", "apiVersion: extensions/v1beta1"), "apiVersion must be apps/v1"),
    (DEPLOYMENT.replace("replicas: 2", "replicas: -2"), "spec.replicas must be in >= 0"),
    (_worker_args("--advise-slo", "p95_wait<=2", "--advise-slo", "p99_wait<=5"), "is given 2 times"),
])
def test_a_deployment_field_qsim_cannot_read_is_named(tmp_path: Path, deployment: str, message: str) -> None:
    so = edited(SCALED_OBJECT, "spec.triggers.0", {"type": "prometheus", "metadata": {
        "query": 'max(qsim_recommended_workers{queue="orders"})', "threshold": "1"}})
    files = [write(tmp_path, "so.yaml", so), write(tmp_path, "d.yaml", deployment)]
    with pytest.raises(ScenarioError) as e:
        read_objects(files, QUEUES)
    assert message in str(e.value) and f"{files[1]}: Deployment orders-worker: " in str(e.value)


def test_the_worker_flags_and_a_sleep_action_are_read(tmp_path: Path) -> None:
    so = write(tmp_path, "so.yaml", SCALED_OBJECT)
    dep = edited(_worker_args("--prefetch", "3", "--shutdown-grace=90"),
                 "spec.template.spec.containers.0.lifecycle", {"preStop": {"sleep": {"seconds": 10}}})
    read = read_objects([so, write(tmp_path, "d.yaml", dep)], QUEUES)
    assert read.pool == {"workers": 2, "concurrency": 10, "prefetch": 3, "grace": 40.0,
                         "termination_grace_period": 50.0, "pre_stop": 10.0}
    assert apply_k8s(day(), "workers", read).engine.prefetch == 3


@pytest.mark.parametrize(("trigger", "message"), [
    ({"type": "prometheus", "metadata": {"query": "max(qsim_queue_jobs{queue=\"orders\"})", "threshold": "4"}},
     "without state=\"waiting\""),
    ({"type": "prometheus", "metadata": {"query": "max(qsim_job_wait_seconds_bucket{queue=\"orders\"})",
                                         "threshold": "2"}}, "not as histogram_quantile(0.95"),
    ({"type": "prometheus", "metadata": {"query": "max(qsim_queue_jobs{queue=\"orders\",state=\"waiting\"})"}},
     "needs query and threshold"),
    ({"type": "redis", "metadata": {"listLength": "4"}}, "listName is required"),
    ({"type": "prometheus", "metadata": {"query": "max(qsim_recommended_workers{queue=\"orders\"})",
                                         "threshold": "1"}}, "carries no --advise-slo"),
    # what the series' name alone would misread (these read as list_length, figures as max(...)'s)
    ({"type": "prometheus", "metadata": {"query": "sum(qsim_queue_jobs{queue=\"orders\",state=\"waiting\"})",
                                         "threshold": "4"}}, "sum over qsim_queue_jobs, a gauge every worker exports"),
    ({"type": "prometheus", "metadata": {"query": "max(qsim_queue_jobs{queue=\"orders\",state=\"waiting\"}) / 10",
                                         "threshold": "4"}}, "arithmetic, an *_over_time or an offset"),
    ({"type": "prometheus", "metadata": {
        "query": "avg_over_time(max(qsim_queue_jobs{queue=\"orders\",state=\"waiting\"})[5m:30s])",
        "threshold": "4"}}, "arithmetic, an *_over_time or an offset"),
])
def test_a_trigger_qsim_cannot_read_is_named(tmp_path: Path, trigger: dict[str, Any], message: str) -> None:
    f = write(tmp_path, "so.yaml", edited(SCALED_OBJECT, "spec.triggers.0", trigger))
    with pytest.raises(ScenarioError) as e:
        read_objects([f], QUEUES)
    assert message in str(e.value)


def test_prometheus_triggers_read_every_metric_and_the_p95_window(tmp_path: Path) -> None:
    def read(query: str, **meta: Any) -> dict[str, Any]:
        f = write(tmp_path, "so.yaml", edited(SCALED_OBJECT, "spec.triggers.0", {
            "type": "prometheus", "metricType": "Value", "metadata": {"query": query, "threshold": "2", **meta}}))
        return read_objects([f], QUEUES, slo="p95_wait<=2").autoscaler

    p95 = read('histogram_quantile(0.95, sum by (le) (rate(qsim_job_wait_seconds_bucket{queue="orders"}[2m])))')
    assert (p95["metric"], p95["metric_type"], p95["window"], p95["target"]) == ("p95_wait", "Value", 120.0, 2.0)
    age = read('max(qsim_queue_oldest_waiting_age_seconds{queue="orders"})', activationThreshold="500m")
    assert (age["metric"], age["activation"]) == ("oldest_age", 0.5)
    advice = read('max(qsim_recommended_workers{queue="orders"})')
    assert (advice["policy"], advice["metric"], advice["slo"]) == ("hpa", "recommended_workers", "p95_wait<=2")


def test_the_target_and_documents_are_checked(tmp_path: Path) -> None:
    cases = [(edited(SCALED_OBJECT, "spec.scaleTargetRef", {"kind": "StatefulSet", "name": "orders-worker"}),
              "spec.scaleTargetRef.kind is 'StatefulSet'"),
             (edited(SCALED_OBJECT, "spec.scaleTargetRef", {"kind": "Deployment"}), "scaleTargetRef.name is required"),
             (SCALED_OBJECT + "---\n- a list\n", "document 2 is not a Kubernetes object")]
    for text, message in cases:
        with pytest.raises(ScenarioError) as e:
            read_objects([write(tmp_path, "so.yaml", text)], QUEUES)
        assert message in str(e.value), str(e.value)


def test_cli_checks_its_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.cli import main

    toml = tmp_path / "day.toml"
    qsim.save(day(), toml)
    so = write(tmp_path, "so.yaml", SCALED_OBJECT)
    for extra, message in ((["--k8s", so, "--policy", "hpa"], "give --policy or --k8s, not both"),
                           (["--ignore-unknown"], "--ignore-unknown goes with --k8s"),
                           (["--k8s", so, "--pool", "nobody"], "--pool names no pool")):
        try:
            code = main(["autoscale", str(toml), "--slo", "p95_wait<=2", *extra])
        except SystemExit as stop:  # argparse's own errors
            code = stop.code
        err = capsys.readouterr().err
        assert code == 2 and message in err, err


@pytest.mark.parametrize("queue", ["- x", "a\u2028b", 'o"rd', "it's: #1 {x}", "ünï|.*"])
@pytest.mark.parametrize("kind", ["keda", "hpa"])
def test_any_queue_name_is_emitted_as_valid_yaml_and_promql_and_read_back(queue: str, kind: str,
                                                                           tmp_path: Path) -> None:
    raw = day().to_dict()
    raw["queues"] = [{"name": queue}] + ([{"name": "other"}] if kind == "keda" else [])
    raw["jobs"][0]["queue"] = queue
    raw["pools"][0]["queues"] = [queue] if kind == "hpa" else [queue, "other"]
    for policy in ({"policy": "hpa", "metric": "p95_wait", "target": 2}, {"policy": "qsim", "slo": "p95_wait<=2"}):
        raw["autoscalers"] = [{"pool": "workers", **policy}]
        s = Scenario.from_dict(raw)
        full = policy_table(s, "workers")
        text = manifest(kind, s, "workers", full)
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert docs[0]["kind"] in ("ScaledObject", "HorizontalPodAutoscaler")
        dep = worker_deployment(None, name="w", queues=s.pool("workers").queues, concurrency=1, grace=30.0,
                                advise=(full["slo"], full["window"]) if full.get("slo") else None)
        read = read_objects([write(tmp_path, "b.yaml", bundle(text, dep))], s.pool("workers").queues)
        assert read.autoscaler["policy"] == policy["policy"]
        with pytest.raises(ScenarioError, match="which the pool does not serve"):
            read_objects([write(tmp_path, "b.yaml", bundle(text, dep))], ("else",))


def test_tuning_an_hpa_without_behavior_searches_no_stabilisation_window(tmp_path: Path) -> None:
    from qsim.analysis.autoscaling.contest import default_grid
    from qsim.analysis.slo.language import parse_slo

    s = apply_k8s(day(), "workers", read_objects([write(tmp_path, "h.yaml", HPA)], QUEUES))
    slo = parse_slo("p95_wait<=2")
    knobs = [k.rsplit(".", 1)[1] for k in default_grid("hpa", s, "workers", slo)]
    assert "target" in knobs and not {"scale_down_stabilization", "scale_down_rate"} & set(knobs)
    with_b = apply_k8s(day(), "workers", read_objects([write(tmp_path, "h2.yaml", edited(
        HPA, "spec.behavior", {"scaleDown": {"stabilizationWindowSeconds": 60}}))], QUEUES))
    assert "autoscalers.workers.scale_down_stabilization" in default_grid("hpa", with_b, "workers", slo)


# ---------------------------------------------------------------- shapes teams write (found by probing from outside)


def test_a_kubectl_list_and_a_v2beta2_hpa_are_read_as_their_objects(tmp_path: Path) -> None:
    # Given the ScaledObject and the Deployment as `kubectl get -o yaml` prints them: one List of items
    items = [yaml.safe_load(SCALED_OBJECT), yaml.safe_load(DEPLOYMENT)]
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
    apart = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + DEPLOYMENT)], QUEUES)
    together = read_objects([write(tmp_path, "list.yaml", listed)], QUEUES)
    # Then they read as the same objects given apart
    assert (together.autoscaler, together.pool) == (apart.autoscaler, apart.pool)
    # and an HPA of autoscaling/v2beta2 (v2's schema) reads as its v2 twin; a v1 HPA is named, not "none"
    v2 = read_objects([write(tmp_path, "h2.yaml", HPA + "---\n" + DEPLOYMENT)], QUEUES)
    beta = read_objects([write(tmp_path, "hb.yaml", HPA.replace("autoscaling/v2", "autoscaling/v2beta2") + "---\n"
                               + DEPLOYMENT)], QUEUES)
    assert (beta.autoscaler, beta.pool) == (v2.autoscaler, v2.pool)
    with pytest.raises(ScenarioError, match=r"found none of those API versions \(HorizontalPodAutoscaler "
                                            r"orders-worker \(autoscaling/v1\)"):
        read_objects([write(tmp_path, "h1.yaml", HPA.replace("autoscaling/v2", "autoscaling/v1"))], QUEUES)


@pytest.mark.parametrize("container", [
    'args: [worker, app.jobs:handle, --queue, orders, --concurrency, "2", --shutdown-grace, "40"]',  # ENTRYPOINT qsim
    'command: [/bin/sh, -c]\n          args: ["exec qsim worker app.jobs:handle --queue orders --concurrency 2 '
    '--shutdown-grace 40"]',
])
def test_the_worker_container_is_found_in_the_entrypoint_and_shell_forms(container: str, tmp_path: Path) -> None:
    # Given the Deployment's worker written without `command: [qsim]`: the image's ENTRYPOINT, or a shell's -c
    shaped = DEPLOYMENT.replace('command: ["qsim"]\n          args: [worker, app.jobs:handle, --queue, orders, '
                                '--concurrency, "2", --shutdown-grace, "40"]', container)
    assert shaped != DEPLOYMENT
    plain = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + DEPLOYMENT)], QUEUES)
    read = read_objects([write(tmp_path, "b.yaml", SCALED_OBJECT + "---\n" + shaped)], QUEUES)
    # Then its flags are read as from `command: [qsim]` (they were dropped: concurrency 1, the pod's grace)
    assert read.pool == plain.pool and read.pool["concurrency"] == 2


def test_a_scaledobject_lifts_a_deployment_at_zero_replicas_to_its_minimum(tmp_path: Path) -> None:
    # Given a Deployment at 0 replicas under a ScaledObject with minReplicaCount 1 (KEDA raises it at once)
    zero = DEPLOYMENT.replace("replicas: 2", "replicas: 0")
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + zero)], QUEUES)
    # Then the pool starts at the minimum (it stayed at 0 all run: the HPA's rule, not KEDA's)
    assert read.pool["workers"] == 1
    # while an HPA leaves a Deployment at 0 replicas alone, as Kubernetes does
    hpa = read_objects([write(tmp_path, "b.yaml", HPA + "---\n" + zero)], QUEUES)
    assert hpa.pool["workers"] == 0


@pytest.mark.parametrize("annotation", ['autoscaling.keda.sh/paused-replicas: "4"',
                                        'autoscaling.keda.sh/paused: "true"'])
def test_a_paused_scaledobject_is_not_replayed_as_an_autoscaler(annotation: str, tmp_path: Path) -> None:
    paused = SCALED_OBJECT.replace("  name: orders-worker\nspec:", f"  name: orders-worker\n  annotations:\n"
                                                                   f"    {annotation}\nspec:", 1)
    assert paused != SCALED_OBJECT
    with pytest.raises(ScenarioError, match=r"metadata.annotations\[autoscaling.keda.sh/paused.*does not autoscale"):
        read_objects([write(tmp_path, "a.yaml", paused + "---\n" + DEPLOYMENT)], QUEUES)
    read = read_objects([write(tmp_path, "a.yaml", paused + "---\n" + DEPLOYMENT)], QUEUES, ignore_unknown=True)
    assert any("paused" in line for line in read.ignored)


def test_a_bullmq_bundle_with_its_advisor_reads_back_without_a_worker_deployment(tmp_path: Path) -> None:
    # Given the qsim policy at zero for a BullMQ queue: the bundle holds the advisor's Deployment, not the workers'
    raw = day().to_dict()
    raw["pools"][0]["workers"] = 0
    raw["autoscalers"] = [{"pool": "workers", "policy": "qsim", "min": 0, "max": 8, "slo": "p95_wait<=2"}]
    s = Scenario.from_dict(raw)
    text, _ = emit("keda", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", target="bullmq")
    assert "qsim advise" in text or "- advise" in text
    # When it is read back
    back = apply_k8s(s, "workers", read_objects([write(tmp_path, "bundle.yaml", text)], QUEUES))
    # Then it is the same autoscaler (it was refused: "no Deployment given is named so")
    assert policy_table(back, "workers") == policy_table(s, "workers")


def test_small_shapes_read_or_are_named_in_the_yaml(tmp_path: Path) -> None:
    # an empty list of scaling policies is named in the YAML that holds it (it was blamed on the scenario file)
    empty = SCALED_OBJECT.replace("  triggers:", "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n"
                                                 "        scaleDown:\n          policies: []\n  triggers:", 1)
    with pytest.raises(ScenarioError, match=r"so.yaml: ScaledObject orders-worker: spec.advanced."
                                            r"horizontalPodAutoscalerConfig.behavior.scaleDown.policies must list"):
        read_objects([write(tmp_path, "so.yaml", empty)], QUEUES)
    # a preStop `sleep 10s` (coreutils' unit) is timed as `sleep 10`
    tens = [read_objects([write(tmp_path, f"d{i}.yaml", SCALED_OBJECT + "---\n" + DEPLOYMENT.replace(
        'command: ["sleep", "5"]', f'command: ["sleep", "{arg}"]'))], QUEUES).pool["pre_stop"]
        for i, arg in enumerate(("10", "10s"))]
    assert tens == [10.0, 10.0]
    # a YAML syntax error is one line, with its place
    with pytest.raises(ScenarioError) as e:
        read_objects([write(tmp_path, "bad.yaml", "kind: ScaledObject\n  metadata: [\n")], QUEUES)
    assert len(str(e.value).splitlines()) == 1 and "bad.yaml: not valid YAML" in str(e.value) and "line" in str(e.value)


def test_same_named_deployments_are_told_apart_by_the_autoscalers_namespace(tmp_path: Path) -> None:
    def placed(text: str, ns: str) -> str:
        return text.replace("  name: orders-worker\n", f"  name: orders-worker\n  namespace: {ns}\n", 1)

    staging = placed(DEPLOYMENT.replace("replicas: 2", "replicas: 7"), "staging")
    # Given a ScaledObject in prod and Deployments of its target's name in staging (first) and prod
    files = [write(tmp_path, "so.yaml", placed(SCALED_OBJECT, "prod")), write(tmp_path, "staging.yaml", staging),
             write(tmp_path, "prod.yaml", placed(DEPLOYMENT, "prod"))]
    # Then prod's is read (the first file's was), and without a namespace to choose by, it is named
    assert read_objects(files, QUEUES).pool["workers"] == 2
    with pytest.raises(ScenarioError, match="in several namespaces"):
        read_objects([write(tmp_path, "plain.yaml", SCALED_OBJECT), *files[1:]], QUEUES)


@pytest.mark.parametrize("container", [
    'args: [worker, app.jobs:handle, --queue, orders, --concurrency, "2", --shutdown-grace, "40"]',
    'command: [/bin/sh, -c]\n          args: ["exec qsim worker app.jobs:handle --queue orders --concurrency 2 '
    '--shutdown-grace 40"]',
])
def test_a_bundle_emitted_from_a_read_keeps_the_teams_deployment_and_namespace(container: str, tmp_path: Path) -> None:
    # Given the team's Deployment in prod, its worker in the ENTRYPOINT or the shell form, and its ScaledObject
    shaped = DEPLOYMENT.replace('command: ["qsim"]\n          args: [worker, app.jobs:handle, --queue, orders, '
                                '--concurrency, "2", --shutdown-grace, "40"]', container)
    shaped = shaped.replace("  name: orders-worker\n", "  name: orders-worker\n  namespace: prod\n", 1)
    read = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + shaped)], QUEUES)
    s = apply_k8s(day(), "workers", read)
    raw = s.to_dict()
    raw["pools"][0]["concurrency"] = 6  # as if tuned
    tuned = Scenario.from_dict(raw)
    # When the tuned pool is emitted with the Deployment read
    text, _ = emit("keda", tuned, "workers", policy_table(tuned, "workers"), slo="p95_wait<=2",
                   deployment=read.deployment, pre_stop=float(read.pool["pre_stop"]))
    so, dep = [d for d in yaml.safe_load_all(text) if d]
    # Then it is the team's Deployment (its image, its shape), in its namespace, with the ScaledObject beside it
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/orders-worker:1.0"
    assert so["metadata"]["namespace"] == dep["metadata"]["namespace"] == "prod"
    # and read back it runs the tuned concurrency (a placeholder Deployment with --concurrency 1 was written)
    back = read_objects([write(tmp_path, "b.yaml", text)], QUEUES)
    assert back.pool["concurrency"] == 6 and back.pool["grace"] == read.pool["grace"]


def test_a_bundle_emitted_from_a_read_reaches_prometheus_as_the_read_trigger_did(tmp_path: Path) -> None:
    # Given the team's ScaledObject reading Thanos over https with a TriggerAuthentication
    so = edited(SCALED_OBJECT, "spec.triggers.0", {
        "type": "prometheus", "authenticationRef": {"name": "thanos-auth"},
        "metadata": {"serverAddress": "https://thanos.example.com", "authModes": "bearer", "namespace": "prod",
                     "query": 'max(qsim_queue_jobs{queue="orders",state="waiting"})', "threshold": "4"}})
    read = read_objects([write(tmp_path, "a.yaml", so + "---\n" + DEPLOYMENT)], QUEUES)
    s = apply_k8s(day(), "workers", read)
    # When it is emitted from the read
    text, _ = emit("keda", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", deployment=read.deployment,
                   pre_stop=float(read.pool["pre_stop"]), connection=read.connection)
    (trigger,) = [d for d in yaml.safe_load_all(text) if d][0]["spec"]["triggers"]
    # Then its trigger reaches the same server the same way (it was reset to the in-cluster default, no auth)
    assert trigger["authenticationRef"] == {"name": "thanos-auth"}
    assert {k: trigger["metadata"][k] for k in ("serverAddress", "authModes", "namespace")} == {
        "serverAddress": "https://thanos.example.com", "authModes": "bearer", "namespace": "prod"}
    # and what it reads is still the simulated policy's
    back = apply_k8s(day(), "workers", read_objects([write(tmp_path, "b.yaml", text)], QUEUES))
    assert policy_table(back, "workers") == policy_table(s, "workers")


def test_a_redis_cluster_trigger_reads_as_a_redis_one_and_is_emitted_back_as_itself(tmp_path: Path) -> None:
    # Given KEDA's redis-cluster scaler on the same list (a cluster's addresses instead of one address)
    cluster = SCALED_OBJECT.replace("    - type: redis\n", "    - type: redis-cluster\n").replace(
        "        address: redis.default.svc:6379\n", "        addresses: redis-0.redis:6379, redis-1.redis:6379\n")
    assert "redis-cluster" in cluster and "addresses" in cluster
    plain = read_objects([write(tmp_path, "a.yaml", SCALED_OBJECT + "---\n" + DEPLOYMENT)], QUEUES)
    # (the team's Deployment has a name of its own)
    renamed = (cluster + "---\n" + DEPLOYMENT).replace("orders-worker", "mailer")
    read = read_objects([write(tmp_path, "b.yaml", renamed)], QUEUES)
    # Then it is the same autoscaler (it was refused as a trigger qsim cannot read)
    assert (read.autoscaler, read.pool, read.source) == (plain.autoscaler, plain.pool, plain.source)
    assert read.deployment["metadata"]["name"] == "mailer"
    # and a bundle emitted from it reads the cluster, not the single-server default
    raw = day().to_dict()
    raw["jobs"][0].pop("priority", None)
    s = apply_k8s(Scenario.from_dict(raw), "workers", read)
    text, _ = emit("keda", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", deployment=read.deployment,
                   connection=read.connection, target="bullmq")
    (trigger,) = [d for d in yaml.safe_load_all(text) if d][0]["spec"]["triggers"]
    assert trigger["type"] == "redis-cluster" and trigger["metadata"]["addresses"].startswith("redis-0.redis")
    assert "addressFromEnv" not in trigger["metadata"]
    # and its header names the Deployment read and where the list is read (not the default's name and address)
    header = [line for line in text.splitlines() if line.startswith("# The worker Deployment")]
    assert header and f"Deployment {read.deployment['metadata']['name']} scaled" in header[0]
    assert "trigger read with --k8s" in header[0] and "REDIS_ADDRESS" not in header[0]


def test_an_hpa_on_the_p95_wait_reads_its_window_from_the_adapter_rule_beside_it(tmp_path: Path) -> None:
    # Given an hpa policy on the p95 wait over 300 s, emitted as an HPA and prometheus-adapter's rule
    raw = day().to_dict()
    raw["autoscalers"] = [{"pool": "workers", "policy": "hpa", "metric": "p95_wait", "target": 3.0, "window": 300.0,
                           "min": 1, "max": 8}]
    s = Scenario.from_dict(raw)
    text, rule = emit("hpa", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2")
    assert rule is not None and "[300s]" in rule
    # When the bundle is read back with the rule (the window lives in the rule's query, not in the HPA)
    both = read_objects([write(tmp_path, "b.yaml", text), write(tmp_path, "rule.yaml", rule)], QUEUES)
    alone = read_objects([write(tmp_path, "c.yaml", text)], QUEUES)
    # Then the window is the rule's (it read as 60 s); without the rule it stays the default
    assert both.autoscaler["window"] == 300.0 and alone.autoscaler.get("window", 60.0) == 60.0
    back = policy_table(apply_k8s(s, "workers", both), "workers")
    assert {k: back[k] for k in ("metric", "target", "window")} == {"metric": "p95_wait", "target": 3.0, "window": 300.0}
