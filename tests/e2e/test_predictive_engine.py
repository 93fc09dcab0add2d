"""The predictive policy on the real engine, beside the model: a compressed day, floors from its rate profile.

A day's shape squeezed into 200 s (10 jobs/s of 0.1 s jobs rising to 50 jobs/s and back), concurrency 1:
the predictive policy's floors, ceil(rate x 0.1 / 0.8), are raised a cold start (4 s) ahead of the load and
combined by max with an HPA on the jobs in flight (3 per replica), polling every 2 s. The engine's
controller reads the real queue's gauges (waiting + active) and starts and stops real worker processes.
"""

from __future__ import annotations

import pytest

from qsim import Scenario
from qsim.analysis.fidelity.compare import compare
from qsim.autoscale.predictive import predictive_floors

pytestmark = [pytest.mark.redis]


def compressed_day() -> Scenario:
    return Scenario.from_dict({
        "name": "compressed-day", "duration": 200.0, "seed": 5, "window": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "constant", "mean": 0.1},
                  "arrival": {"kind": "profile", "shape": "linear",
                              "points": [[0, 10.0], [40, 10.0], [70, 50.0], [120, 50.0], [150, 12.0],
                                         [200, 10.0]]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2}],
        "autoscalers": [{"pool": "p", "min": 2, "max": 12, "policy": "predictive", "metric": "in_flight",
                         "target": 3.0, "poll": 2.0, "grace": 5.0, "scale_down_stabilization": 20.0,
                         "start_delay": {"kind": "constant", "mean": 4.0}}]})


@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_compressed_day_with_the_predictive_policy_agrees_with_the_model(redis_url: str) -> None:
    s = compressed_day()
    floors = predictive_floors(s, s.autoscalers[0])
    assert max(n for _, _, n in floors.windows) == 7  # ceil(50 x 0.1 / 0.8) at the peak
    # Given the same scenario, seed and controller code on both sides
    doc = compare(s, redis_url)
    a = doc["autoscaling"]["p"]
    model, engine = doc["model"]["autoscaling"]["p"], doc["engine"]["autoscaling"]["p"]
    print(f"\npredictive compressed day: workers within 1 for {a['workers_within']:.0%} of the time; max workers "
          f"model {model['workers']['max']}, engine {engine['workers']['max']}; scale events "
          f"{model['scale_events']} / {engine['scale_events']}")
    # Then the engine lost nothing and asked for the model's workers within one for at least 90% of the time
    assert doc["engine"]["jobs"]["lost"] == 0
    assert a["workers_within"] >= 0.90, (model["trajectory"], engine["trajectory"])
    # And both followed the floors up to the peak's and back down
    assert model["workers"]["max"] >= 7 and engine["workers"]["max"] >= 7
    assert engine["scale_events"] >= 3
