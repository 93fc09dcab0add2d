"""How a trigger reads its metric through Prometheus: the p95 from the histogram's buckets, the metrics late.

``p95_buckets`` and ``metric_lag`` (qsim.autoscale.observe): Prometheus' ``histogram_quantile`` on hand-computed
histograms, the order in which the engine harness takes lagged metrics, and a model run whose scale-up comes
the lag later.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import qsim
from qsim import Scenario, simulate
from qsim.autoscale.build import controller, lagged_times
from qsim.autoscale.k8s_read import apply_k8s, read_objects
from qsim.autoscale.observe import WindowStats, histogram_quantile
from qsim.engine.metrics import WAIT_BUCKETS
from qsim.spec.autoscaler import HPA_LIKE, POLICY_PARAMS, QUIET_KEYS

BOUNDS = (0.5, 1.0, 2.0)


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([0.1] * 50 + [1.5] * 50, 0.95, 1.0 + (95 - 50) / 50),  # rank 95 in (1, 2]: 45 of its 50, linearly
    ([0.2] * 100, 0.95, 0.5 * 0.95),  # the first bucket starts at 0
    ([0.5, 0.5], 0.5, 0.25),  # a value on a bound is in that bucket (le)
    ([5.0] * 10, 0.95, 2.0),  # the rank in +Inf: the highest finite bound
    ([0.1] * 96 + [3.0] * 4, 0.95, 0.5 * 95 / 96),
])
def test_histogram_quantile_is_prometheus(values: list[float], q: float, expected: float) -> None:
    assert histogram_quantile(q, np.asarray(values), BOUNDS) == pytest.approx(expected)


def test_the_window_p95_from_buckets_differs_from_the_exact_one() -> None:
    exact, buckets = WindowStats(60.0), WindowStats(60.0, WAIT_BUCKETS)
    waits = np.random.default_rng(1).exponential(0.7, 400)
    for i, w in enumerate(waits):
        for s in (exact, buckets):
            s.started(i * 0.1, float(w))
    # Then the exact p95 is numpy's, the bucketed one the histogram's: inside the bucket holding the exact one
    assert exact.p95_wait(40.0) == pytest.approx(float(np.percentile(waits, 95)))
    low = max(b for b in (0.0, *WAIT_BUCKETS) if b < exact.p95_wait(40.0))  # type: ignore[operator]
    high = min(b for b in WAIT_BUCKETS if b >= exact.p95_wait(40.0))  # type: ignore[operator]
    assert low <= buckets.p95_wait(40.0) <= high  # type: ignore[operator]
    assert buckets.p95_wait(40.0) != exact.p95_wait(40.0)
    # and a read at an earlier time sees none of the later starts
    assert exact.p95_wait(9.95) == pytest.approx(float(np.percentile(waits[:100], 95)))


def day(**autoscaler: Any) -> Scenario:
    """Quiet for 300 s (0.5 jobs/s on one worker), then 20 jobs/s: an HPA on the list length scales up."""
    return Scenario.from_dict({
        "name": "step", "duration": 600.0, "seed": 3, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 0.5},
                  "arrival": {"kind": "profile", "shape": "step",
                              "points": [[0, 0.5], [300, 0.5], [300, 20.0], [600, 20.0]]}}],
        "pools": [{"name": "w", "queues": ["q"], "workers": 1}],
        "autoscalers": [{"pool": "w", "min": 1, "max": 20, "policy": "hpa", "metric": "list_length", "target": 4,
                         "start_delay": {"kind": "constant", "mean": 10.0}, **autoscaler}]})


def first_scale_up(s: Scenario) -> float:
    trajectory = simulate(s).summary["autoscaling"]["w"]["trajectory"]
    return min(t for (_, before, _), (t, asked, _) in itertools.pairwise([(0.0, 1, 1), *trajectory])
               if asked > before)


@pytest.mark.parametrize("lag", [30.0, 60.0])
def test_a_lagged_metric_scales_up_the_lag_later(lag: float) -> None:
    # Given the same day read live and read `lag` seconds late
    live, late = first_scale_up(day()), first_scale_up(day(metric_lag=lag))
    # Then the first scale-up after the step comes after it, and the lag later (to the HPA's 15 s sync)
    assert 300.0 <= live < 330.0
    assert lag - 15.0 <= late - live <= lag + 15.0


def test_the_harness_takes_each_lagged_metric_before_its_decision() -> None:
    s = day(metric_lag=20.0)
    spec = s.autoscalers[0]
    control = controller(spec, s.pool("w"), scenario=s)
    times = list(itertools.islice(lagged_times(control, spec), 12))
    decisions = [t for t, take in times if take is None]
    takes = [(t, take) for t, take in times if take is not None]
    assert decisions[:4] == [0.0, 15.0, 30.0, 45.0]
    assert takes[:4] == [(0.0, 0.0), (0.0, 15.0), (10.0, 30.0), (25.0, 45.0)]
    for d in decisions:  # every decision's metrics are taken before it
        assert any(take == d for t, take in times[:times.index((d, None))])
    assert [t for t, _ in times] == sorted(t for t, _ in times)
    live = controller(day().autoscalers[0], s.pool("w"), scenario=s)
    assert all(take is None for _, take in itertools.islice(lagged_times(live, day().autoscalers[0]), 6))


def test_a_p95_trigger_read_back_reads_the_buckets_and_keeps_the_scenarios_lag(tmp_path: Path) -> None:
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "w"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"},
                    "minReplicas": 1, "maxReplicas": 9,
                    "metrics": [{"type": "External", "external": {
                        "metric": {"name": "qsim_job_wait_seconds_p95", "selector": {"matchLabels": {"queue": "q"}}},
                        "target": {"type": "Value", "value": "2"}}}]}}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "w"}}, "template": {
               "metadata": {"labels": {"app": "w"}}, "spec": {"containers": [
                   {"name": "w", "image": "x", "command": ["qsim"], "args": ["worker", "app:h", "--queue", "q"]}]}}}}
    path = tmp_path / "hpa.yaml"
    path.write_text(yaml.safe_dump_all([hpa, dep]))
    back = apply_k8s(day(metric_lag=30.0), "w", read_objects([path], ("q",))).autoscaler("w")
    assert back is not None
    assert (back.metric, back.p95_buckets, back.metric_lag) == ("p95_wait", True, 30.0)


@pytest.mark.parametrize("policy", sorted(POLICY_PARAMS))
def test_a_quiet_key_written_at_its_default_reads_as_left_out(policy: str) -> None:
    # Given a policy's optional keys that are written only when they differ from their defaults
    quiet = [p for p in POLICY_PARAMS[policy] if p.name in QUIET_KEYS and p.default is not None]
    assert quiet or policy not in HPA_LIKE
    base = qsim.load("steady").to_dict()
    required = {"hpa": {"metric": "list_length", "target": 10}, "qsim": {"slo": "p95_wait<=2"},
                "step": {"metric": "oldest_age", "rules": [{"above": 5, "add": 1}]},
                "target-tracking": {"metric": "list_length", "target": 10},
                "schedule": {"metric": "list_length", "target": 10, "floors": [{"start": "08:00", "end": "18:00",
                                                                               "replicas": 2}]},
                "predictive": {"metric": "list_length", "target": 10}}[policy]

    def written(**extra: object) -> dict[str, object]:
        raw = {**base, "autoscalers": [{"pool": "workers", "policy": policy, **required, **extra}]}
        return Scenario.from_dict(raw).to_dict()

    # When each is written at its default, Then the scenario is the one that leaves it out (one spelling)
    for p in quiet:
        assert written(**{p.name: p.default}) == written(), p.name
