"""qsim autoscale --emit: the KEDA ScaledObject and HPA manifests parse and match deploy/kubernetes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from waiting import ROOT

from qsim import Scenario, ScenarioError
from qsim.advise.live import ADVICE_METRICS
from qsim.analysis.autoscaling.contest import policy_table
from qsim.autoscale.manifest import METRICS_PORT, PROMETHEUS, manifest

KUBE = ROOT / "deploy" / "kubernetes"
#: What qsim exports: the advice's gauges, the workers' and the queue collector's metrics (qsim/engine/metrics.py).
EXPORTED = set(ADVICE_METRICS) | set(re.findall(r"^\s+(qsim_[a-z_]+)\{", (ROOT / "qsim/engine/metrics.py")
                                                .read_text(), re.MULTILINE)) | {"qsim_job_wait_seconds_bucket"}


def deploy(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KUBE / name).read_text()) if d]


def scenario(**autoscaler: Any) -> Scenario:
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "queues": [{"name": "orders"}],
        "jobs": [{"name": "order", "queue": "orders", "arrival": {"kind": "poisson", "rate": 4.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 10}],
        "autoscalers": [{"pool": "workers", "min": 1, "max": 40, **autoscaler}]})


def emit(kind: str, s: Scenario) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(manifest(kind, s, "workers", policy_table(s, "workers"))) if d]


def metrics_in(text: str) -> set[str]:
    return {m for m in re.findall(r"qsim_[a-z_]+", text) if not m.endswith("_")}


def test_constants_are_deploy_kubernetes_own() -> None:
    (worker,) = deploy("worker.yaml")
    (so,) = deploy("keda-scaledobject.yaml")
    assert so["spec"]["triggers"][0]["metadata"]["serverAddress"] == PROMETHEUS
    assert worker["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == METRICS_PORT
    assert worker["metadata"]["name"] == "orders-worker"


def test_the_qsim_policy_emits_deploy_kubernetes_scaled_object() -> None:
    (worker,) = deploy("worker.yaml")
    (shipped,) = deploy("keda-scaledobject.yaml")
    (so,) = emit("keda", scenario(policy="qsim", slo="p95_wait<=2"))
    assert (so["apiVersion"], so["kind"]) == (shipped["apiVersion"], shipped["kind"])
    assert so["metadata"]["name"] == so["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    (trigger,) = so["spec"]["triggers"]
    (ours,) = shipped["spec"]["triggers"]
    assert trigger["type"] == ours["type"] and trigger["metricType"] == ours["metricType"]
    assert trigger["metadata"]["query"] == ours["metadata"]["query"] and trigger["metadata"]["threshold"] == "1"
    behavior = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert behavior["stabilizationWindowSeconds"] == 600 and behavior["policies"] == \
        shipped["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["policies"]


@pytest.mark.parametrize("autoscaler, metric, kind", [
    ({"target": 8}, "qsim_queue_jobs", "AverageValue"),
    ({"target": 2, "metric": "oldest_age"}, "qsim_queue_oldest_waiting_age_seconds", "Value"),
    ({"target": 2, "metric": "p95_wait"}, "qsim_job_wait_seconds_bucket", "Value"),
    ({"policy": "target-tracking", "acceptable_latency": 10}, "qsim_queue_jobs", "AverageValue"),
])
def test_hpa_policies_emit_keda_on_metrics_qsim_exports(autoscaler: dict[str, Any], metric: str, kind: str) -> None:
    s = scenario(**autoscaler)
    (so,) = emit("keda", s)
    (trigger,) = so["spec"]["triggers"]
    assert trigger["metricType"] == kind and metric in trigger["metadata"]["query"]
    assert metrics_in(trigger["metadata"]["query"]) <= EXPORTED
    assert so["spec"]["pollingInterval"] == 30 and so["spec"]["maxReplicaCount"] == 40
    if autoscaler.get("policy") == "target-tracking":  # 10 s x 10 slots / 0.5 s: 200 waiting jobs per worker
        assert trigger["metadata"]["threshold"] == "200"


def test_hpa_manifest_and_its_adapter_rule() -> None:
    (worker,) = deploy("worker.yaml")
    # an HPA cannot scale to zero (minReplicas >= 1 without the HPAScaleToZero gate): not the simulated pool
    with pytest.raises(ScenarioError, match="--emit hpa: pool workers scales to zero .* emit keda"):
        emit("hpa", scenario(min=0, target=8))
    hpa, adapter = emit("hpa", scenario(min=1, target=8, scale_down_stabilization=120))
    assert (hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert hpa["spec"]["minReplicas"] == 1
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 120
    (m,) = hpa["spec"]["metrics"]
    assert m["external"]["target"] == {"type": "AverageValue", "averageValue": "8"}
    rules = yaml.safe_load(adapter["data"]["config.yaml"])["externalRules"]
    assert rules[0]["name"]["as"] == m["external"]["metric"]["name"] == "qsim_queue_jobs"
    assert metrics_in(rules[0]["seriesQuery"]) <= EXPORTED


def test_the_step_policy_has_no_manifest() -> None:
    with pytest.raises(ScenarioError, match="step policy has no KEDA/HPA equivalent"):
        emit("keda", scenario(policy="step", up_when=2, down_when=0.5))


def test_the_cli_emits_a_file_that_parses(tmp_path: Path) -> None:
    from qsim.cli import main
    from qsim.spec.toml_writer import write_toml

    path = write_toml(scenario(target=8), tmp_path / "orders.toml")
    out = tmp_path / "so.yaml"
    assert main([ "autoscale", str(path), "--slo", "p95_wait<=2", "--replications", "1", "--processes", "1",
                  "--no-static", "--emit", "keda", str(out), "--json"]) == 0
    (so, deployment) = [d for d in yaml.safe_load_all(out.read_text()) if d]
    assert so["metadata"]["name"] == deployment["metadata"]["name"] == "orders-worker"


def test_a_target_tracking_bundle_says_it_is_the_nearest_hpa_not_the_policy() -> None:
    s = scenario(policy="target-tracking", acceptable_latency=10.0, min=1)
    for kind in ("keda", "hpa"):
        text = manifest(kind, s, "workers", policy_table(s, "workers"))
        assert "target-tracking has no KEDA/HPA twin" in text and "read back with --k8s it is that hpa policy" in text
    plain = manifest("keda", scenario(min=1, target=8), "workers", policy_table(scenario(min=1, target=8), "workers"))
    assert "no KEDA/HPA twin" not in plain
