"""--emit: values the Kubernetes/KEDA API would refuse (or round) are named before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import qsim
from qsim import Scenario, ScenarioError
from qsim.autoscale.manifest import manifest
from qsim.analysis.autoscaling.contest import policy_table


def scenario(**autoscaler: Any) -> Scenario:
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "queues": [{"name": "orders"}],
        "jobs": [{"name": "order", "queue": "orders", "arrival": {"kind": "poisson", "rate": 4.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 4}],
        "autoscalers": [{"pool": "workers", "min": 1, "max": 20, "policy": "hpa", "target": 4, **autoscaler}]})


@pytest.mark.parametrize(("kind", "given", "message"), [
    ("keda", {"scale_down_stabilization": 7200}, "autoscalers.workers.scale_down_stabilization must be whole "
                                                 "seconds in 0..3600"),
    ("hpa", {"scale_up_stabilization": 2.5}, "scale_up_stabilization must be whole seconds in 0..3600"),
    ("keda", {"scale_up": [{"type": "pods", "value": 2, "period": 2000}]}, "scale_up[0].period must be whole "
                                                                          "seconds in 1..1800"),
    ("hpa", {"scale_down": [{"type": "pods", "value": 1, "period": 7.5}]}, "scale_down[0].period must be whole "
                                                                          "seconds in 1..1800"),
    ("keda", {"poll": 7.5}, "poll must be whole seconds in >= 1"),
    ("keda", {"initial_cooldown": 0.5}, "initial_cooldown must be whole seconds in >= 0"),
    ("keda", {"min": 0, "keda": False}, "keda is false with min = 0: a plain HPA scaling to zero"),
])
def test_out_of_range_values_are_not_emitted(kind: str, given: dict[str, Any], message: str) -> None:
    s = scenario(**given)
    with pytest.raises(ScenarioError, match=None) as e:
        manifest(kind, s, "workers", policy_table(s, "workers"))
    assert message in str(e.value)


def test_in_range_values_are_emitted() -> None:
    s = scenario(scale_down_stabilization=3600, scale_up=[{"type": "percent", "value": 300, "period": 1800}])
    assert "periodSeconds: 1800" in manifest("keda", s, "workers", policy_table(s, "workers"))


def test_cli_refuses_before_any_run_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.cli import main

    toml = tmp_path / "s.toml"
    qsim.save(scenario(scale_down_stabilization=7200), toml)
    out = tmp_path / "so.yaml"
    base = ["autoscale", str(toml), "--slo", "p95_wait<=2", "--replications", "1", "--processes", "1",
            "--emit", "keda", str(out)]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "scale_down_stabilization must be whole seconds in 0..3600" in err
    assert not out.exists() and "%" not in err  # no run started (no progress printed)
    qsim.save(scenario(), toml)
    assert main(base + ["--tune", "hpa", "--vary", "autoscalers.workers.scale_down_stabilization=300,5000"]) == 2
    assert "got 5000" in capsys.readouterr().err and not out.exists()
