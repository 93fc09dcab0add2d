"""qsim autoscale --emit ... --target qsim|bullmq: the trigger reads a metric that exists where it runs.

A BullMQ queue gets KEDA's redis trigger on its wait list where that list holds
every waiting job, else the advisor's ``qsim_bullmq_*`` gauges (the advisor
Deployment in the bundle); a pool at zero never reads a metric only running
workers export. The gauges themselves are read from a real BullMQ 6 queue.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from bullmq_node import BullMQ, node_missing  # type: ignore[import-not-found]
from prometheus_client import CollectorRegistry, generate_latest
from waiting import ROOT

import qsim
from qsim import Scenario, ScenarioError
from qsim.analysis.autoscaling.contest import policy_table
from qsim.autoscale.emit import emit
from qsim.autoscale.k8s_read import apply_k8s, read_objects
from qsim.autoscale.k8s_deployment import ADVISOR_PORT
from qsim.autoscale.metric_source import BULLMQ_PREFIX
from qsim.bullmq import DEFAULT_PREFIX
from qsim.bullmq.gauges import BullMQCollector, read_state
from qsim.cli import main


def scenario(priorities: tuple[int, ...] = (0,), **autoscaler: Any) -> Scenario:
    jobs = [{"name": f"t{i}", "queue": "orders", "priority": p, "arrival": {"kind": "poisson", "rate": 2.0},
             "service": {"kind": "exponential", "mean": 0.5}} for i, p in enumerate(priorities)]
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "queues": [{"name": "orders"}], "jobs": jobs,
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 4}],
        "autoscalers": [{"pool": "workers", "min": 1, "max": 20, **autoscaler}]})


def documents(s: Scenario, kind: str = "keda", target: str = "bullmq") -> list[dict[str, Any]]:
    text, _ = emit(kind, s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", target=target)
    return [d for d in yaml.safe_load_all(text) if d]


def test_the_prefix_is_bullmqs_default_and_the_advisor_port_deploy_kubernetes() -> None:
    assert BULLMQ_PREFIX == DEFAULT_PREFIX
    (shipped,) = [d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/advisor.yaml").read_text()) if d]
    assert shipped["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == ADVISOR_PORT


def test_in_flight_on_bullmq_reads_both_states_from_the_advisor() -> None:
    so, _, _ = documents(scenario(policy="hpa", metric="in_flight", target=6.0))
    query = so["spec"]["triggers"][0]["metadata"]["query"]
    assert 'qsim_bullmq_jobs{queue="orders",state=~"waiting|active"}' in query and query.startswith("sum(")


def test_an_hpa_on_in_flight_of_a_bullmq_queue_reads_the_adapters_sum_of_the_advisors_gauge() -> None:
    # Given a BullMQ queue scaled by a plain HPA on jobs in flight, 6 per worker
    s = scenario(policy="hpa", metric="in_flight", target=6.0)
    # When it is emitted as an HPA
    text, rule = emit("hpa", s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", target="bullmq")
    hpa, advisor, service = [d for d in yaml.safe_load_all(text) if d]
    # Then the HPA reads the adapter's qsim_bullmq_in_flight, which sums waiting and active of the advisor's gauge
    metric = hpa["spec"]["metrics"][0]["external"]["metric"]
    assert metric == {"name": "qsim_bullmq_in_flight", "selector": {"matchLabels": {"queue": "orders"}}}
    assert advisor["kind"] == "Deployment" and "bullmq" in advisor["spec"]["template"]["spec"]["containers"][0]["args"]
    assert (service["kind"], service["spec"]["selector"]) == ("Service", {"app": advisor["metadata"]["name"]})
    assert rule is not None
    (adapter,) = yaml.safe_load(rule)["externalRules"]
    assert adapter["seriesQuery"] == 'qsim_bullmq_jobs{queue!=""}' and adapter["name"]["as"] == metric["name"]
    assert 'state=~"waiting|active"' in adapter["metricsQuery"] and adapter["metricsQuery"].startswith("sum(")


def test_a_queue_whose_jobs_all_wait_in_the_list_gets_keda_redis_trigger() -> None:
    # Given a BullMQ queue of one priority scaled on its length, 5 per worker, active above 1
    docs = documents(scenario(policy="hpa", metric="list_length", target=5.0, activation=1.0))
    # Then KEDA reads the wait list itself: no advisor, and nothing qsim's workers export
    (so,) = docs
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "redis"
    assert trigger["metadata"]["listName"] == "bull:orders:wait"
    assert (trigger["metadata"]["listLength"], trigger["metadata"]["activationListLength"]) == ("5", "1")
    assert "qsim_" not in json.dumps(docs)


def test_prioritized_jobs_are_read_from_the_advisor_gauges() -> None:
    # Given job types of two priorities (BullMQ keeps the second in its prioritized sorted set)
    docs = documents(scenario((0, 3), policy="hpa", metric="list_length", target=5.0))
    so, advisor, service = docs
    (trigger,) = so["spec"]["triggers"]
    # Then the trigger reads the advisor's count of every waiting job, and the advisor reads the BullMQ queue
    assert trigger["type"] == "prometheus"
    assert 'qsim_bullmq_jobs{queue="orders",state="waiting"}' in trigger["metadata"]["query"]
    assert "qsim_queue_jobs" not in json.dumps(docs)
    args = advisor["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["advise", "--queue", "orders"]
    assert ["--from", "bullmq", "--prefix", "bull"] == args[args.index("--from"):args.index("--from") + 4]
    # and a Service in front of the advisor's metrics port, for a ServiceMonitor
    assert service["kind"] == "Service" and service["spec"]["selector"] == {"app": advisor["metadata"]["name"]}
    assert service["spec"]["ports"] == [{"name": "metrics", "port": ADVISOR_PORT, "targetPort": "metrics"}]


def test_the_qsim_policy_on_bullmq_carries_its_slo_and_window_in_the_advisor() -> None:
    docs = documents(scenario(policy="qsim", slo="p99_wait<=1", window=600.0))
    so, advisor, _ = docs
    args = advisor["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--slo") + 1] == "p99_wait<=1" and args[args.index("--window") + 1] == "600s"
    assert "qsim_recommended_workers" in so["spec"]["triggers"][0]["metadata"]["query"]


@pytest.mark.parametrize(("target", "autoscaler", "message"), [
    ("bullmq", {"policy": "hpa", "metric": "p95_wait", "metric_type": "Value", "target": 2.0},
     "BullMQ keeps no wait-time histogram"),
    ("qsim", {"policy": "hpa", "metric": "list_length", "target": 5.0, "min": 0},
     "min = 0: the trigger's metric (list_length) is exported by the workers"),
    ("qsim", {"policy": "hpa", "metric": "oldest_age", "metric_type": "Value", "target": 5.0, "min": 0},
     "the pool never wakes"),
])
def test_a_metric_that_cannot_be_read_there_is_refused(target: str, autoscaler: dict[str, Any],
                                                        message: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(message)):
        documents(scenario(**autoscaler), target=target)


def test_the_qsim_policy_at_zero_reads_an_advisor_that_runs_with_no_worker() -> None:
    # Given the qsim policy with min = 0 on a qsim queue
    docs = documents(scenario(policy="qsim", slo="p95_wait<=2", min=0), target="qsim")
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    # Then the bundle holds the worker and a qsim advise Deployment (--from qsim) that exports the advice at zero
    assert kinds == [("ScaledObject", "orders-worker"), ("Deployment", "orders-worker"),
                     ("Deployment", "orders-advisor"), ("Service", "orders-advisor")]
    args = docs[2]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--from") + 1] == "qsim" and "--prefix" not in args


def test_a_redis_trigger_that_misses_prioritized_jobs_is_refused_on_reading(tmp_path: Path) -> None:
    # Given a team's ScaledObject on bull:orders:wait, for a queue with prioritized job types
    so = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "orders-worker"},
          "spec": {"scaleTargetRef": {"name": "orders-worker"}, "minReplicaCount": 1, "maxReplicaCount": 10,
                   "triggers": [{"type": "redis", "metadata": {"address": "redis:6379", "listName": "bull:orders:wait",
                                                               "listLength": "5"}}]}}
    path = tmp_path / "so.yaml"
    path.write_text(yaml.safe_dump(so))
    s = scenario((0, 2), policy="hpa", metric="list_length", target=5.0)
    read = read_objects([path], ("orders",))
    # Then simulating it is refused, naming where the missed jobs wait
    with pytest.raises(ScenarioError, match="prioritized sorted set"):
        apply_k8s(s, "workers", read)
    # And with every job in the list it is simulated
    assert apply_k8s(scenario(policy="hpa", metric="list_length", target=1.0), "workers", read) is not None


@pytest.mark.parametrize(("argv", "message"), [
    (["--prefix", "x"], "--prefix goes with --target bullmq"),
    (["--target", "bullmq"], "--target goes with --emit"),
])
def test_target_flags_out_of_place_exit_2(argv: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('name = "s"\nduration = 60\n[[queues]]\nname = "orders"\n[[jobs]]\nname = "j"\nqueue = "orders"\n'
                    '[jobs.arrival]\nkind = "poisson"\nrate = 1.0\n[jobs.service]\nkind = "constant"\nmean = 0.1\n'
                    '[[pools]]\nname = "p"\nqueues = ["orders"]\n[[autoscalers]]\npool = "p"\nmax = 3\ntarget = 4.0\n')
    assert main(["autoscale", str(toml), "--slo", "p95_wait<=2", *argv]) == 2
    assert message in capsys.readouterr().err


def _derived_target_run(tmp_path: Path, target: str, *extra: str) -> dict[str, Any]:
    """``qsim autoscale ... --emit keda --json`` of a scenario without an autoscaler (the target derived from the
    SLO: 2 s x 4 slots / 0.15 s = 53.333 jobs a worker): the emitted ScaledObject (the JSON is on stdout)."""
    toml = tmp_path / "s.toml"
    toml.write_text('name = "s"\nduration = 120\n[[queues]]\nname = "orders"\n[[jobs]]\nname = "j"\n'
                    'queue = "orders"\n[jobs.arrival]\nkind = "poisson"\nrate = 20.0\n[jobs.service]\n'
                    'kind = "constant"\nmean = 0.15\n[[pools]]\nname = "p"\nqueues = ["orders"]\nconcurrency = 4\n')
    out = tmp_path / f"{target}.yaml"
    code = main(["autoscale", str(toml), "--slo", "p95_wait<=2", "--replications", "1", "--processes", "1",
                 "--no-static", "--emit", "keda", str(out), "--target", target, "--json", *extra])
    assert code == 0
    (so,) = [d for d in yaml.safe_load_all(out.read_text()) if d and d["kind"] == "ScaledObject"]
    return so


@pytest.mark.parametrize("tune", [False, True])
def test_a_derived_target_on_kedas_redis_trigger_is_a_whole_number_and_is_what_ran(
        tune: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a BullMQ queue whose every waiting job is in its list, and a target qsim derives (53.333 jobs a worker)
    extra = ["--tune", "hpa", "--budget", "4", "--held-out", "1"] if tune else ["--policy", "hpa"]
    so = _derived_target_run(tmp_path, "bullmq", *extra)
    doc = json.loads(capsys.readouterr().out)
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "redis"
    if tune:
        # Then --tune searches whole targets only (a quarter, half, once and twice 53, rounded down)
        assert doc["tuned"]["grid"]["autoscalers.p.target"] == [13.0, 26.0, 53.0, 106.0]
        ran = float((doc["tuned"]["point"] or {}).get("autoscalers.p.target", 53.0))
    else:
        # Then the policy ran with the derived target rounded down: a worker per 53 waiting jobs
        ran = doc["policies"]["hpa"]["params"]["target"]
        assert ran == 53.0
    # And KEDA's redis trigger carries exactly the target that ran, a whole number
    assert trigger["metadata"]["listLength"] == f"{ran:g}"
    # And a qsim queue's trigger (a Prometheus threshold) keeps the derived figure
    so = _derived_target_run(tmp_path, "qsim", "--policy", "hpa")
    capsys.readouterr()
    assert so["spec"]["triggers"][0]["metadata"]["threshold"] == "53.333"


def test_a_fractional_target_the_scenario_sets_is_still_refused_for_kedas_redis_trigger(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "s.toml"
    qsim.save(scenario(policy="hpa", metric="list_length", target=2.5), toml)
    assert main(["autoscale", str(toml), "--slo", "p95_wait<=2", "--emit", "keda", str(tmp_path / "b.yaml"),
                 "--target", "bullmq"]) == 2
    assert "target = 2.5 is KEDA's redis trigger's listLength" in capsys.readouterr().err


@pytest.mark.parametrize(("target", "monitored"), [("bullmq", True), ("qsim", False)])
def test_the_cli_writes_the_advisors_service_monitor_apart(target: str, monitored: bool, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Given an HPA on the list length: a BullMQ queue of two priorities reads it from an advisor, a qsim queue
    # from its workers
    toml = tmp_path / "s.toml"
    qsim.save(scenario((0, 3) if target == "bullmq" else (0,), policy="hpa", metric="list_length", target=5.0), toml)
    out = tmp_path / "bundle.yaml"
    # When the CLI emits its bundle
    assert main(["autoscale", str(toml), "--slo", "p95_wait<=2", "--replications", "1", "--processes", "1",
                 "--no-static", "--emit", "keda", str(out), "--target", target]) == 0
    stdout = capsys.readouterr().out
    monitor = tmp_path / "bundle.servicemonitor.yaml"
    # Then an advisor's ServiceMonitor is written beside the bundle (not in it: it needs the operator's CRD)
    assert monitor.exists() is monitored and ("servicemonitor" in stdout) is monitored
    assert "ServiceMonitor" not in out.read_text()
    if monitored:
        (sm,) = [d for d in yaml.safe_load_all(monitor.read_text()) if d]
        (service,) = [d for d in yaml.safe_load_all(out.read_text()) if d and d["kind"] == "Service"]
        assert sm["spec"]["selector"]["matchLabels"] == service["metadata"]["labels"]
        assert sm["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


@pytest.mark.redis
@pytest.mark.skipif(node_missing() is not None, reason=node_missing() or "")
def test_the_gauges_count_every_waiting_bullmq_job(redis_url: str) -> None:
    # Given a real BullMQ 6 queue with no worker: 3 plain jobs, 2 with a priority, 1 delayed
    plan = [[0, "a", {}, {}]] * 3 + [[0, "b", {}, {"priority": 2}]] * 2 + [[0, "c", {}, {"delay": 60000}]]
    BullMQ("6").produce(redis_url, "orders", plan=plan)
    time.sleep(0.3)
    # When the advisor's collector reads it
    state = read_state(redis.Redis.from_url(redis_url), "orders")
    registry = CollectorRegistry()
    registry.register(BullMQCollector(redis_url, ["orders"]))
    text = generate_latest(registry).decode()
    # Then the waiting count holds the prioritized jobs that KEDA's list trigger (LLEN wait) misses
    assert redis.Redis.from_url(redis_url).llen("bull:orders:wait") == 3
    assert (state.waiting, state.active, state.delayed) == (5, 0, 1)
    assert 'qsim_bullmq_jobs{queue="orders",state="waiting"} 5.0' in text
    assert 0.2 <= state.oldest_age < 60
