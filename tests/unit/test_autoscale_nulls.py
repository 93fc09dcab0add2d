"""A trigger's series that vanishes with the workers: KEDA's ignoreNullValues and fallback (qsim/autoscale/nulls.py).

A ScaledObject of a team, read with --k8s, on ``qsim_queue_jobs`` (exported only by ready workers) with
``minReplicaCount: 0``: with KEDA's default ``ignoreNullValues`` the pool never wakes; with
``ignoreNullValues: "false"`` and a ``fallback`` it wakes after more than ``failureThreshold`` failed reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from qsim import Scenario, ScenarioError
from qsim.autoscale.hpa import HPA
from qsim.autoscale.k8s_read import apply_k8s, read_objects
from qsim.autoscale.manifest import manifest
from qsim.autoscale.nulls import MetricReads
from qsim.autoscale.observe import Observation
from qsim.autoscale.schedule import Floors, Scheduled
from qsim.analysis.autoscaling.contest import policy_table
from qsim.model import simulate

POLL, THRESHOLD, FALLBACK, COLD = 30, 3, 2, 40.0

SCALED_OBJECT = f"""\
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: orders-worker
spec:
  scaleTargetRef:
    name: orders-worker
  minReplicaCount: 0
  maxReplicaCount: 10
  pollingInterval: {POLL}
  triggers:
    - type: prometheus
      metadata:
        serverAddress: http://prometheus-operated.monitoring.svc:9090
        query: max(qsim_queue_jobs{{queue="orders",state="waiting"}})
        threshold: "5"
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: orders-worker
spec:
  replicas: 0
  template:
    spec:
      containers:
        - name: worker
          image: registry.example.com/orders-worker:1.0
          command: ["qsim"]
          args: [worker, app.jobs:handle, --queue, orders, --concurrency, "1"]
"""


def day() -> Scenario:
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "seed": 1, "queues": [{"name": "orders"}],
        "jobs": [{"name": "order", "queue": "orders", "arrival": {"kind": "poisson", "rate": 2.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 1}],
        "autoscalers": [{"pool": "workers", "min": 1, "max": 10, "policy": "hpa", "target": 5,
                         "start_delay": {"kind": "constant", "mean": COLD}}]})


def read(tmp: Path, scaled_object: str) -> Scenario:
    (tmp / "so.yaml").write_text(scaled_object, encoding="utf-8")
    (tmp / "dep.yaml").write_text(DEPLOYMENT, encoding="utf-8")
    return apply_k8s(day(), "workers", read_objects([tmp / "so.yaml", tmp / "dep.yaml"], ("orders",)))


def edited(text: str, change: Any) -> str:
    doc = yaml.safe_load(text)
    change(doc["spec"])
    return yaml.safe_dump(doc)


def no_nulls(spec: dict[str, Any]) -> None:
    spec["triggers"][0]["metadata"]["ignoreNullValues"] = "false"


def with_fallback(spec: dict[str, Any]) -> None:
    no_nulls(spec)
    spec["fallback"] = {"failureThreshold": THRESHOLD, "replicas": FALLBACK}


def trajectory(s: Scenario) -> tuple[list[list[float]], dict[str, Any]]:
    summary = simulate(s, records=False).summary
    return summary["autoscaling"]["workers"]["trajectory"], summary["jobs"]


def test_a_workers_series_is_read_as_such_with_the_objects_null_settings(tmp_path: Path) -> None:
    a = read(tmp_path, SCALED_OBJECT).autoscaler("workers")
    assert a is not None and (a.min, a.metric_from, a.params()["ignore_null"], a.fallback_replicas) == (0, "workers", True, None)
    b = read(tmp_path, edited(SCALED_OBJECT, with_fallback)).autoscaler("workers")
    assert b is not None and tuple(b.params()[k] for k in ("metric_from", "ignore_null", "fallback_failures",
                                                           "fallback_replicas")) == ("workers", False, THRESHOLD, FALLBACK)


@pytest.mark.parametrize("change", [None, no_nulls], ids=["ignoreNullValues-true", "ignoreNullValues-false"])
def test_a_pool_at_zero_on_the_workers_series_never_wakes(tmp_path: Path, change: Any) -> None:
    # Given the team's ScaledObject, min 0 on qsim_queue_jobs, and a queue with arrivals
    s = read(tmp_path, edited(SCALED_OBJECT, change) if change else SCALED_OBJECT)
    # When it is simulated
    traj, jobs = trajectory(s)
    # Then no worker ever runs (the series is 0, or an error, with none ready) and every job waits
    assert max(asked for _, asked, _ in traj) == 0
    assert jobs["arrived"] > 1000 and jobs["completed"] == 0 and jobs["unfinished"] == jobs["arrived"]
    # while the same object reading the queue itself (a redis trigger's view) wakes it
    queue = Scenario.from_dict({**s.to_dict(), "autoscalers": [
        {**s.to_dict()["autoscalers"][0], "metric_from": "queue", "ignore_null": True}]})
    assert max(asked for _, asked, _ in trajectory(queue)[0]) > 0


def test_with_a_fallback_the_pool_goes_to_the_fallback_replicas_after_the_threshold(tmp_path: Path) -> None:
    # Given the same object with ignoreNullValues "false" and fallback {failureThreshold: 3, replicas: 2}
    traj, jobs = trajectory(read(tmp_path, edited(SCALED_OBJECT, with_fallback)))
    # Then KEDA's polls fail at 0, 30, ... (the HPA is disabled at zero and reads nothing); the poll after
    # more than THRESHOLD failures activates the target (0 -> 1) and the HPA's next sync takes it to the
    # fallback replicas while no worker is ready yet
    woke = next(t for t, asked, _ in traj if asked > 0)
    assert woke == THRESHOLD * POLL
    first_ready = next(t for t, _, ready in traj if ready > 0)
    assert first_ready == woke + COLD
    assert max(asked for t, asked, _ in traj if t < first_ready) == FALLBACK
    # and once workers are ready the metric is read again: jobs are served
    assert jobs["completed"] > 0.9 * jobs["arrived"]


def obs(now: float, workers: int, ready: int, length: int = 50) -> Observation:
    return Observation(now=now, workers=workers, ready=ready, list_length=length)


def hpa(**reads: Any) -> HPA:
    return HPA(min=0, max=10, target=5.0, poll=30.0, sync=15.0, initial_cooldown=0.0,
               reads=MetricReads(metric_from="workers", **reads))


def test_a_good_read_starts_the_count_again() -> None:
    # Given a fallback after more than 2 failed reads, the target at 1 replica and none ready
    h = hpa(ignore_null=False, fallback_replicas=4, fallback_failures=2)
    # When two polls fail, a worker is ready at one poll, then none again
    assert h.decide(obs(0.0, 1, 0)) == 1  # KEDA's poll and the HPA's sync both fail: 2
    assert h.decide(obs(30.0, 1, 1)) == 5  # read: 50 waiting asks 10, 4 pods per 15 s from 1 (the count restarts)
    assert h.decide(obs(60.0, 1, 0)) == 1  # poll 1, sync 2: still an error, no change
    assert h.reads.failures == 2
    # Then only the next failed read falls back: the HPA proposes the fallback replicas
    assert h.decide(obs(75.0, 1, 0)) == 4


@pytest.mark.parametrize(("behavior", "current", "asked"), [
    ("static", 6, 4), ("static", 2, 4),
    ("currentReplicas", 6, 6), ("currentReplicas", 2, 2),
    ("currentReplicasIfHigher", 6, 6), ("currentReplicasIfHigher", 2, 4),
    ("currentReplicasIfLower", 6, 4), ("currentReplicasIfLower", 2, 2),
])
def test_the_fallback_behaviour_picks_the_replicas_as_keda(behavior: str, current: int, asked: int) -> None:
    # Given a fallback of 4 replicas after more than 1 failed read, with KEDA's behaviour, at `current` replicas
    reads = MetricReads(metric_from="workers", ignore_null=False, fallback_replicas=4, fallback_failures=1,
                        fallback_behavior=behavior)
    # When the reads fail: the first is an error, the next falls back to what the behaviour asks for
    assert reads.failed(current) is None
    assert reads.failed(current) == asked
    # and an HPA whose series is gone (no worker ready: a rollout, a crash loop) proposes it: a scale-up at once
    # (KEDA's poll and the HPA's sync at 0 are two failures), a scale-down held by its 300 s stabilisation
    h = HPA(min=1, max=10, target=5.0, poll=30.0, sync=15.0, initial_cooldown=0.0,
            reads=MetricReads(metric_from="workers", ignore_null=False, fallback_replicas=4, fallback_failures=1,
                              fallback_behavior=behavior))
    decided = [h.decide(obs(15.0 * k, current, 0)) for k in range(4)]
    assert decided == [max(asked, current)] * 4


def test_a_fallback_behaviour_reads_back_and_a_wrong_one_is_named(tmp_path: Path) -> None:
    def higher(spec: dict[str, Any]) -> None:
        with_fallback(spec)
        spec["fallback"]["behavior"] = "currentReplicasIfHigher"
        spec["minReplicaCount"] = 1

    behaving = edited(SCALED_OBJECT, higher)
    s = read(tmp_path, behaving)
    spec = s.autoscaler("workers")
    assert spec is not None and spec.params()["fallback_behavior"] == "currentReplicasIfHigher"
    back = yaml.safe_load(manifest("keda", s, "workers", policy_table(s, "workers")).split("\n---\n")[0])
    assert back["spec"]["fallback"]["behavior"] == "currentReplicasIfHigher"
    with pytest.raises(ScenarioError, match="fallback.behavior.*must be one of static"):
        read(tmp_path, behaving.replace("currentReplicasIfHigher", "sometimes"))


def test_a_value_target_cannot_fall_back_with_no_ready_replica() -> None:
    h = HPA(min=0, max=10, target=5.0, metric="oldest_age", poll=30.0, sync=15.0,
            reads=MetricReads(metric_from="workers", ignore_null=False, fallback_replicas=3, fallback_failures=0,
                              average=False))
    assert [h.decide(obs(30.0 * k, 0, 0)) for k in range(6)] == [0] * 6


def test_ignoring_nulls_reads_zero_and_the_queue_never_reads_null() -> None:
    # four replicas starting, none ready yet: the workers' series reads 0, the queue's 50
    down = HPA(min=1, max=10, target=5.0, behavior=False, reads=MetricReads(metric_from="workers"))
    assert down.decide(obs(0.0, 4, 0)) == 4  # the first proposal is held 300 s (no behavior)
    assert down.decide(obs(301.0, 4, 0)) == 1
    up = HPA(min=1, max=10, target=5.0, behavior=False, reads=MetricReads(metric_from="queue"))
    assert up.decide(obs(0.0, 4, 0)) == 8


@pytest.mark.parametrize(("table", "message"), [
    ({"fallback_failures": 5}, "fallback_failures needs fallback_replicas"),
    ({"fallback_replicas": -1}, "fallback_replicas must be >= 0"),
    ({"min": 0, "keda": False, "metric_from": "workers"}, "ignore_null must be false with keda = false"),
    ({"min": 0, "keda": False, "fallback_replicas": 2}, "fallback_replicas needs keda = true"),
    ({"metric_from": "sidecar"}, "metric_from must be one of"),
    # keys that only one trigger reads, given to another (they were accepted and did nothing)
    ({"slo": "p95_wait<=2"}, "slo is the advisor's SLO, read only by a trigger on metric recommended_workers "
                             r"\(this one scales on list_length\)"),
    ({"policy": "schedule", "target": None, "floors": [{"start": "08:00", "end": "18:00", "replicas": 2}],
      "slo": "p95_wait<=2"}, "slo is the advisor's SLO.*has no trigger"),
    ({"metric_type": "Value", "fallback_replicas": 4}, "fallback_replicas needs metric_type = \"AverageValue\""),
    ({"p95_buckets": True}, "p95_buckets reads the p95 wait from the histogram's buckets, so it needs metric "
                            "p95_wait"),
])
def test_the_series_keys_are_checked(table: dict[str, Any], message: str) -> None:
    raw = day().to_dict()
    raw["autoscalers"][0].update(table)
    for key in [k for k, v in table.items() if v is None]:
        del raw["autoscalers"][0][key]
    with pytest.raises(ScenarioError, match=message):
        Scenario.from_dict(raw)


@pytest.mark.parametrize(("kind", "table", "message"), [
    ("hpa", {"metric_from": "workers", "ignore_null": False, "fallback_replicas": 2}, "an HPA does not have"),
    ("hpa", {"metric_from": "workers"}, "an HPA has no ignoreNullValues"),
    ("keda", {"policy": "qsim", "slo": "p95_wait<=2", "min": 0, "metric_from": "workers"}, "set metric_from"),
])
def test_emitting_what_the_object_would_not_do_is_refused(kind: str, table: dict[str, Any], message: str) -> None:
    raw = day().to_dict()
    raw["autoscalers"][0].update(table)
    if table.get("policy") == "qsim":
        for key in ("target", "metric", "metric_type"):
            raw["autoscalers"][0].pop(key, None)
    s = Scenario.from_dict(raw)
    with pytest.raises(ScenarioError, match=message):
        manifest(kind, s, "workers", policy_table(s, "workers"))


def test_the_emitted_object_carries_them_and_warns_when_the_simulation_read_the_queue() -> None:
    raw = day().to_dict()
    raw["autoscalers"][0].update(metric_from="workers", ignore_null=False, fallback_replicas=FALLBACK)
    s = Scenario.from_dict(raw)
    (doc,) = [d for d in yaml.safe_load_all(manifest("keda", s, "workers", policy_table(s, "workers"))) if d]
    assert doc["spec"]["fallback"] == {"failureThreshold": 3, "replicas": FALLBACK}
    assert doc["spec"]["triggers"][0]["metadata"]["ignoreNullValues"] == "false"
    plain = day()
    assert 'metric_from = "workers" simulates' in manifest("keda", plain, "workers", policy_table(plain, "workers"))


def test_cron_floors_still_decide_when_the_reactive_read_fails() -> None:
    # Given a schedule policy's floor of 3 replicas now, and its reactive trigger on the workers' series erring
    floor = 3
    s = Scheduled(floors=Floors([(0.0, 1000.0, floor)]), min=0, max=10, target=5.0, poll=30.0, sync=15.0,
                  reads=MetricReads(metric_from="workers", ignore_null=False))
    # Then the active floor wakes the pool (KEDA) and the HPA raises it to the floor (the failed metric
    # only keeps it from scaling down)
    assert s.decide(obs(0.0, 0, 0)) == 1
    assert s.decide(obs(15.0, 1, 0)) == floor
