"""An emitted bundle, read back, drives the real engine as the model: what is deployed is what was simulated.

A compressed step day (15 jobs/s of 0.1 s jobs, x4 for a minute, back) with an HPA on the jobs waiting as
the workers export them (``metric_from = "workers"``, which is what the emitted trigger reads; 4 per replica, KEDA polling every 2 s, a 20 s scale-down window) is emitted as a KEDA bundle
(ScaledObject + worker Deployment), read back with ``--k8s``'s reader, and run by ``qsim compare``: the
model and real worker processes started and stopped by the same controller on the real queue's gauges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qsim import Scenario
from qsim.analysis.autoscaling.contest import policy_table
from qsim.analysis.fidelity.compare import compare
from qsim.autoscale.emit import emit
from qsim.autoscale.k8s_read import apply_k8s, read_objects

pytestmark = [pytest.mark.redis]


def compressed_step(lag: float = 0.0) -> Scenario:
    return Scenario.from_dict({
        "name": "compressed-step", "duration": 180.0, "seed": 4, "window": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "constant", "mean": 0.1},
                  "arrival": {"kind": "profile", "shape": "step",
                              "points": [[0, 15.0], [60, 15.0], [60, 60.0], [120, 60.0], [120, 15.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 3}],
        "autoscalers": [{"pool": "p", "min": 2, "max": 12, "policy": "hpa", "metric": "list_length",
                         "target": 4.0, "metric_from": "workers", "poll": 2.0, "grace": 5.0,
                         "scale_down_stabilization": 20.0, "metric_lag": lag,
                         "start_delay": {"kind": "constant", "mean": 4.0}}]})


@pytest.mark.long
@pytest.mark.timeout(900)
@pytest.mark.parametrize("lag", [0.0, 6.0])
def test_an_emitted_bundle_read_back_runs_the_engine_as_the_model(redis_url: str, tmp_path: Path, lag: float) -> None:
    # Given the bundle qsim autoscale --emit keda writes for the policy, read back as --k8s reads it (the metrics
    # read live, or 6 s late as through Prometheus: the lag is the scenario's, kept by the reader)
    s = compressed_step(lag)
    text, _ = emit("keda", s, "p", policy_table(s, "p"), slo="p95_wait<=2")
    (tmp_path / "bundle.yaml").write_text(text)
    read = read_objects([tmp_path / "bundle.yaml"], ("q",))
    deployed = apply_k8s(s, "p", read)
    assert policy_table(deployed, "p") == policy_table(s, "p")
    # When the scenario with what was read runs on the model and on real worker processes
    doc = compare(deployed, redis_url)
    a = doc["autoscaling"]["p"]
    model, engine = doc["model"]["autoscaling"]["p"], doc["engine"]["autoscaling"]["p"]
    print(f"\nemitted bundle on the engine (metric_lag {lag:g} s): workers within 1 for {a['workers_within']:.0%} of the time; max "
          f"workers model {model['workers']['max']}, engine {engine['workers']['max']}")
    # Then the engine lost nothing and ran the model's workers within one for at least 90% of the time
    assert doc["engine"]["jobs"]["lost"] == 0
    assert a["workers_within"] >= 0.90, (model["trajectory"], engine["trajectory"])
    assert engine["workers"]["max"] >= 6 and engine["scale_events"] >= 2
