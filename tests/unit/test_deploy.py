"""deploy/ and the Grafana dashboard: the files parse, their qsim commands parse with qsim's own
parser, their metric names are the ones qsim exports, and the grace period follows its formula."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from waiting import ROOT

from qsim.advise.capacity import EXIT_MARGIN
from qsim.advise.live import ADVICE_METRICS
from qsim.analysis.slo.language import parse_slo
from qsim.cli import build_parser

KUBE = ROOT / "deploy" / "kubernetes"
DASHBOARD = ROOT / "benchmarks" / "grafana-dashboard.json"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KUBE / name).read_text()) if d]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c  # type: ignore[no-any-return]


def qsim_args(c: dict[str, Any]) -> Any:
    assert c["command"] == ["qsim"]
    return build_parser().parse_args([str(a) for a in c["args"]])


def test_worker_deployment_runs_a_valid_worker_with_the_advised_grace() -> None:
    (d,) = docs("worker.yaml")
    assert (d["apiVersion"], d["kind"]) == ("apps/v1", "Deployment")
    assert d["spec"]["selector"]["matchLabels"] == d["spec"]["template"]["metadata"]["labels"]
    c = container(d)
    args = qsim_args(c)
    assert args.command == "worker" and args.queues == ["orders"]
    parse_slo(args.advise_slo[0])
    port = args.metrics_port
    assert c["ports"][0]["containerPort"] == port
    assert d["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    # terminationGracePeriodSeconds = preStop + --shutdown-grace + EXIT_MARGIN
    pre_stop = 0.0
    hook = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    if hook[:1] == ["sleep"]:
        pre_stop = float(hook[1])
    grace = d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == pre_stop + args.shutdown_grace + EXIT_MARGIN
    assert "terminationGracePeriodSeconds" in (KUBE / "worker.yaml").read_text().split("apiVersion")[0]


def test_advisor_deployment_runs_a_valid_watch() -> None:
    (d,) = docs("advisor.yaml")
    c = container(d)
    args = qsim_args(c)
    assert args.command == "advise" and args.watch > 0 and args.metrics_port == c["ports"][0]["containerPort"]
    parse_slo(args.slo[0])


def _metrics(text: str) -> set[str]:
    """The qsim metric names in ``text`` (``qsim_advice_*`` wildcards in prose left out)."""
    return {m for m in re.findall(r"qsim_[a-z_]+", text) if not m.endswith("_")}


def test_keda_scales_the_worker_on_the_recommendation() -> None:
    (worker,) = docs("worker.yaml")
    (so,) = docs("keda-scaledobject.yaml")
    assert (so["apiVersion"], so["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    assert so["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    assert meta["threshold"] == "1" and meta["ignoreNullValues"] == "false"  # desired = ceil(value / 1)
    assert meta["query"].startswith('max(qsim_recommended_workers{queue="orders"})')
    assert _metrics(meta["query"]) <= set(ADVICE_METRICS)
    assert so["spec"]["minReplicaCount"] >= 1 and so["spec"]["maxReplicaCount"] > so["spec"]["minReplicaCount"]


def test_hpa_uses_the_external_metric_the_adapter_serves() -> None:
    (worker,) = docs("worker.yaml")
    hpa, adapter = docs("hpa-external.yaml")
    assert (hpa["apiVersion"], hpa["kind"]) == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    (metric,) = hpa["spec"]["metrics"]
    ext = metric["external"]
    assert metric["type"] == "External" and ext["metric"]["name"] == "qsim_recommended_workers"
    assert ext["target"] == {"type": "AverageValue", "averageValue": "1"}
    rules = yaml.safe_load(adapter["data"]["config.yaml"])["externalRules"]
    assert rules[0]["name"]["as"] == ext["metric"]["name"]
    assert _metrics(rules[0]["seriesQuery"]) == {"qsim_recommended_workers"}


def test_dashboard_has_recommended_vs_running_workers() -> None:
    dash = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in dash["panels"]}
    assert len(panels) == len(dash["panels"]) == len({p["id"] for p in dash["panels"]})
    p = panels["Recommended vs running workers"]
    exprs = " ".join(t["expr"] for t in p["targets"])
    assert "qsim_recommended_workers" in exprs and "qsim_worker_concurrency" in exprs
    assert _metrics(exprs) - {"qsim_worker_concurrency"} <= set(ADVICE_METRICS)
    cells = set()  # no two panels overlap on the grid
    for q in dash["panels"]:
        g = q["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, q["title"]
                cells.add((x, y))


@pytest.mark.parametrize("path", sorted(KUBE.glob("*.yaml")), ids=lambda p: p.name)
def test_every_manifest_names_only_metrics_qsim_exports(path: Path) -> None:
    names = _metrics(path.read_text())
    assert names <= set(ADVICE_METRICS) | {"qsim_worker_concurrency", "qsim_job_wait_seconds_bucket"}, names
