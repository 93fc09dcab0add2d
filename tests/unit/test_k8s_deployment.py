"""--emit's bundle: the autoscaler object, then the worker Deployment carrying what was simulated; read back."""

from __future__ import annotations

import json
import sys
import subprocess
from pathlib import Path

import yaml
from waiting import ROOT

import qsim
from qsim import Scenario
from qsim.autoscale.manifest import manifest
from qsim.analysis.autoscaling.contest import policy_table
from qsim.autoscale.k8s_deployment import bundle, worker_deployment
from qsim.autoscale.k8s_read import apply_k8s, read_objects

KUBE = ROOT / "deploy" / "kubernetes"


def day(**autoscaler: object) -> Scenario:
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "seed": 1, "queues": [{"name": "orders"}],
        "jobs": [{"name": "order", "queue": "orders", "arrival": {"kind": "poisson", "rate": 3.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 3}],
        "autoscalers": [{"pool": "workers", "min": 1, "max": 12, "grace": 45.0, **autoscaler}]})


def test_the_shipped_worker_carries_the_simulated_settings_and_reads_back(tmp_path: Path) -> None:
    # (the advice comes from the workers' series, which vanishes with them; an empty read is an error)
    s = day(policy="qsim", slo="p95_wait<=1.5", window=600.0, metric_from="workers",
            ignore_null=False)
    table = policy_table(s, "workers")
    (base,) = [d for d in yaml.safe_load_all((KUBE / "worker.yaml").read_text()) if d]
    dep = worker_deployment(base, name="orders-worker", queues=("orders",), concurrency=3, grace=45.0,
                            pre_stop=0.0, advise=("p95_wait<=1.5", 600.0))
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args.count("--advise-slo") == 1 and args.count("--concurrency") == 1
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 50
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == base["spec"]["template"]["spec"][
        "containers"][0]["image"]
    text = bundle(manifest("keda", s, "workers", table), dep)
    kinds = [d["kind"] for d in yaml.safe_load_all(text) if d]
    assert kinds == ["ScaledObject", "Deployment"]
    (tmp_path / "b.yaml").write_text(text)
    read = read_objects([tmp_path / "b.yaml"], ("orders",))
    back = apply_k8s(s, "workers", read)
    assert policy_table(back, "workers") == table
    assert back.pool("workers").concurrency == 3
    hpa = bundle(manifest("hpa", s, "workers", table), dep)
    assert [d["kind"] for d in yaml.safe_load_all(hpa) if d] == ["HorizontalPodAutoscaler", "Deployment",
                                                                 "ConfigMap"]


def test_flags_given_as_flag_equals_value_are_replaced_and_a_pre_stop_counts() -> None:
    base = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"template": {"spec": {"containers": [{"name": "w", "command": ["qsim"], "args": [
                "worker", "m:f", "--concurrency=8", "--shutdown-grace", "10", "--advise-slo", "a<=1",
                "--advise-slo", "b<=2"]}]}}}}
    dep = worker_deployment(base, name="x", queues=("q",), concurrency=2, grace=7.5, pre_stop=5.0,
                            advise=("p95_wait<=2", 900.0))
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "worker", "m:f", "--concurrency", "2", "--shutdown-grace", "7.5", "--advise-slo", "p95_wait<=2",
        "--advise-window", "900s"]
    assert dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 18  # ceil(5 + 7.5 + 5)
    assert dep["metadata"]["name"] == "w" and base["spec"]["template"]["spec"]["containers"][0]["args"][2] == \
        "--concurrency=8"  # the base is not changed
    plain = worker_deployment({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
                               "spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}},
                              name="q-worker", queues=("q",), concurrency=4, grace=30.0)
    assert plain["metadata"]["name"] == "q-worker" and "--concurrency" in plain["spec"]["template"]["spec"][
        "containers"][0]["args"]


def test_cli_replays_then_emits_a_bundle_for_the_deployment_read(tmp_path: Path) -> None:
    toml = tmp_path / "day.toml"
    qsim.save(day(policy="hpa", target=4), toml)
    so = (ROOT / "docs" / "examples" / "orders-keda.yaml").read_text().replace("orders-worker", "shop-orders")
    (tmp_path / "so.yaml").write_text(so)
    out = tmp_path / "bundle.yaml"
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(toml), "--k8s", str(tmp_path / "so.yaml"),
                          "--slo", "p95_wait<=2", "--replications", "1", "--processes", "1", "--no-static",
                          "--emit", "keda", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    obj, dep = [d for d in yaml.safe_load_all(out.read_text()) if d]
    assert obj["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"] == "shop-orders"
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/shop-orders:1.0"
    first = read_objects([tmp_path / "so.yaml"], ("orders",))
    again = read_objects([out], ("orders",))
    assert (again.autoscaler, again.pool) == (first.autoscaler, first.pool)


def test_an_hpa_bundle_leaves_the_adapter_rule_to_a_snippet_of_its_own(tmp_path: Path) -> None:
    toml = tmp_path / "day.toml"
    qsim.save(day(policy="hpa", target=4), toml)
    out = tmp_path / "hpa.yaml"
    run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(toml), "--slo", "p95_wait<=2",
                          "--replications", "1", "--processes", "1", "--no-static", "--emit", "hpa", str(out)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert [d["kind"] for d in yaml.safe_load_all(out.read_text()) if d] == ["HorizontalPodAutoscaler", "Deployment"]
    rule = yaml.safe_load((tmp_path / "hpa.prometheus-adapter-rule.yaml").read_text())
    assert rule["externalRules"][0]["name"]["as"] == "qsim_queue_jobs"
    assert "hpa.prometheus-adapter-rule.yaml" in run.stdout
    again = read_objects([out], ("orders",))
    assert again.autoscaler["metric"] == "list_length" and again.pool["concurrency"] == 3


def test_the_emitted_bundle_replays_the_day_it_was_tuned_on(tmp_path: Path) -> None:
    # Given the docs' day (3 workers at the start) whose HPA reads the workers' series as an HPA does (no series, no scaling)
    toml = tmp_path / "day.toml"
    toml.write_text((ROOT / "docs" / "examples" / "day.toml").read_text() + 'metric_from = "workers"\nignore_null = false\n')
    common = ["--slo", "p95_wait<=2 in 90% of windows", "--replications", "1", "--processes", "1", "--no-static",
              "--json"]

    def autoscale(*argv: str) -> dict[str, object]:
        run = subprocess.run([sys.executable, "-m", "qsim", "autoscale", str(toml), *argv, *common],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout)["policies"]  # type: ignore[no-any-return]

    out = tmp_path / "hpa.yaml"
    # When the simulated HPA is emitted, and the bundle is replayed with --k8s
    simulated = autoscale("--policy", "hpa", "--emit", "hpa", str(out))["hpa"]
    replayed = autoscale("--k8s", str(out))["k8s"]
    # Then the Deployment starts from the simulated workers and the day's figures are the same
    dep = [d for d in yaml.safe_load_all(out.read_text()) if d][1]
    assert dep["spec"]["replicas"] == 3
    keys = ("worker_hours", "attainment", "flaps", "scale_events", "p95_wait", "max_workers")
    assert {k: replayed[k] for k in keys} == {k: simulated[k] for k in keys}  # type: ignore[index]
