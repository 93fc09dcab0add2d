"""[[autoscalers]] in the Scenario: defaults, round trips, and bad input named by its key (exit 2)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from qsim import Scenario, ScenarioError
from qsim.spec.autoscaler import AUTOSCALER_KEYS, COMMON_KEYS, DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, POLICY_PARAMS, \
    POLICY_SPECS, QSIM_SCALE_DOWN, HpaSpec, PredictiveSpec, StepSpec
from qsim.spec.dists import Constant, Exponential
from qsim.spec.scenario import AutoscalerSpec, ScalePolicySpec
from qsim.spec.toml_writer import to_toml

BASE: dict[str, Any] = {
    "name": "scaled", "duration": 600.0,
    "queues": [{"name": "q"}],
    "jobs": [{"name": "j", "queue": "q", "arrival": {"kind": "poisson", "rate": 2.0},
              "service": {"kind": "exponential", "mean": 0.5}}],
    "pools": [{"name": "p", "queues": ["q"], "workers": 2}, {"name": "other", "queues": ["q"]}],
}


def scenario(*autoscalers: dict[str, Any], **top: Any) -> Scenario:
    return Scenario.from_dict({**BASE, **top, "autoscalers": list(autoscalers)})


def test_hpa_defaults_are_kubernetes_and_keda() -> None:
    a = scenario({"pool": "p", "target": 8}).autoscalers[0]
    assert (a.min, a.max, a.start_delay, a.grace, a.poll, a.policy) == (1, 100, Constant(mean=0.0), 30.0, 30.0, "hpa")
    assert (a.metric, a.metric_type, a.tolerance, a.scale_down_stabilization, a.scale_up_stabilization) == \
        ("list_length", "AverageValue", 0.1, 300.0, 0.0)
    assert a.scale_up == DEFAULT_SCALE_UP and a.scale_down == DEFAULT_SCALE_DOWN
    assert (a.activation, a.cooldown, a.window) == (0.0, 300.0, 60.0)
    assert scenario({"pool": "p", "target": 2, "metric": "oldest_age"}).autoscalers[0].metric_type == "Value"


def test_each_policy_fills_its_own_defaults_and_leaves_the_others_out() -> None:
    step = scenario({"pool": "p", "policy": "step", "up_when": 2.0, "down_when": 0.5}).autoscalers[0]
    assert (step.metric, step.step, step.up_delay, step.down_delay, step.target) == ("oldest_age", 1, 60.0, 600.0, None)
    tt = scenario({"pool": "p", "policy": "target-tracking", "acceptable_latency": 10}).autoscalers[0]
    assert (tt.window, tt.scale_out_cooldown, tt.scale_in_cooldown) == (60.0, 60.0, 300.0)
    q = scenario({"pool": "p", "policy": "qsim", "slo": "p95_wait<=2"}).autoscalers[0]
    assert (q.window, q.scale_down_stabilization, q.scale_down) == (900.0, 600.0, QSIM_SCALE_DOWN)
    assert "target" not in q.filled() and q.filled()["slo"] == "p95_wait<=2"


def test_round_trip_through_to_dict_and_the_toml_writer() -> None:
    s = scenario({"pool": "p", "min": 0, "max": 12, "target": 5, "activation": 2, "cooldown": 120,
                  "start_delay": {"kind": "exponential", "mean": 20.0},
                  "scale_down": [{"type": "pods", "value": 1, "period": 60}], "scale_down_select": "min"},
                 {"pool": "other", "policy": "step", "up_when": 3, "down_when": 1, "metric": "p95_wait",
                  "up_delay": 30, "down_delay": 300, "step": 2})
    assert Scenario.from_dict(s.to_dict()) == s
    assert Scenario.from_dict(tomllib.loads(to_toml(s))) == s
    a = s.autoscalers[0]
    assert a.start_delay == Exponential(mean=20.0)
    assert a.scale_down == (ScalePolicySpec(type="pods", value=1, period=60.0),)


def test_python_construction_checks_the_policy_parameters() -> None:
    a = AutoscalerSpec(pool="p", target=4)
    assert a.params()["scale_down_stabilization"] == 300.0
    with pytest.raises(ValueError, match="up_when is a parameter of policy step, not hpa"):
        AutoscalerSpec(pool="p", target=4, up_when=2.0)
    with pytest.raises(ValueError, match="target is required for policy hpa"):
        AutoscalerSpec(pool="p")
    with pytest.raises(ValueError, match="min must be <= max"):
        AutoscalerSpec(pool="p", target=4, min=3, max=2)


def test_each_policy_has_its_own_typed_spec_filled_and_checked_once() -> None:
    a = AutoscalerSpec(pool="p", policy="step", up_when=3.0, down_when=1.0, up_delay=20.0)
    assert isinstance(a.law, StepSpec) and (a.law.up_delay, a.law.down_delay, a.law.step) == (20.0, 600.0, 1)
    assert a.params() == {f.name: getattr(a.law, f.name) for f in dataclasses.fields(StepSpec)}
    p = AutoscalerSpec(pool="p", policy="predictive", start_delay=Constant(mean=45.0))
    assert isinstance(p.law, PredictiveSpec) and p.law.lead == 45.0 and p.law.target is None
    h = AutoscalerSpec(pool="p", target=2, metric="oldest_age")
    assert isinstance(h.law, HpaSpec) and h.law.metric_type == "Value"
    assert {policy: cls.policy for policy, cls in POLICY_SPECS.items()} == {c: c for c in POLICY_SPECS}


def test_every_policy_parameter_is_a_key_of_the_flat_spec_and_the_table() -> None:
    """A new parameter is declared in its policy's spec; the flat AutoscalerSpec (the public constructor) must
    carry it too, and the TOML keys follow."""
    flat = {f.name for f in dataclasses.fields(AutoscalerSpec)}
    typed = {f.name for cls in POLICY_SPECS.values() for f in dataclasses.fields(cls)}
    assert flat == set(AUTOSCALER_KEYS) == typed | set(COMMON_KEYS)
    assert [p.name for p in POLICY_PARAMS["step"]] == [f.name for f in dataclasses.fields(StepSpec)]


@pytest.mark.parametrize("table, message", [
    ({"pool": "nope", "target": 1}, "autoscalers[0].pool names no pool: 'nope'"),
    ({"pool": "p", "min": 5, "max": 3, "target": 1}, "autoscalers[0].min must be <= max (3), got 5"),
    ({"pool": "p"}, "autoscalers[0].target is required for policy hpa"),
    ({"pool": "p", "policy": "step", "up_when": 1}, "autoscalers[0].down_when is required for policy step"),
    ({"pool": "p", "policy": "target-tracking"}, "autoscalers[0].acceptable_latency is required"),
    ({"pool": "p", "policy": "qsim"}, "autoscalers[0].slo is required for policy qsim"),
    ({"pool": "p", "target": 1, "metric": "recommended_workers"}, "autoscalers[0].slo is required for metric"),
    ({"pool": "p", "target": 1, "metric": "cpu"}, "autoscalers[0].metric must be one of list_length, in_flight, oldest_age"),
    ({"pool": "p", "policy": "step", "up_when": 1, "down_when": 0.1, "metric": "list_length"},
     "autoscalers[0].metric must be one of oldest_age, p95_wait"),
    ({"pool": "p", "target": 1, "up_when": 3}, "autoscalers[0].up_when is a parameter of policy step, not hpa"),
    ({"pool": "p", "policy": "step", "up_when": 1, "down_when": 0.1, "target": 3},
     "autoscalers[0].target is a parameter of policy hpa or schedule or predictive, not step"),
    ({"pool": "p", "policy": "hpa", "target": 1, "colour": "red"}, "autoscalers[0].colour is not a known key"),
    ({"pool": "p", "policy": "knative", "target": 1}, "autoscalers[0].policy must be one of hpa, step"),
    ({"pool": "p", "policy": "step", "up_when": 1, "down_when": 2}, "autoscalers[0].down_when must be < up_when"),
    ({"pool": "p", "policy": "step", "up_when": 1, "down_when": 1}, "autoscalers[0].down_when must be < up_when (1): "
                                                                    "between the two the step policy holds its count"),
    ({"pool": "p", "policy": "qsim", "slo": "fast"}, "autoscalers[0].slo must be an SLO like"),
    ({"pool": "p", "target": 1, "scale_up": [{"type": "pods", "value": 0, "period": 15}]},
     "autoscalers[0].scale_up[0].value must be >= 1"),
    ({"pool": "p", "target": 1, "scale_down": []}, "autoscalers[0].scale_down must list at least one"),
    ({"pool": "p", "target": 1, "poll": 0}, "autoscalers[0].poll must be > 0"),
    ({"pool": "p", "target": 0}, "autoscalers[0].target must be > 0"),
    ({"pool": "p", "target": 1, "start_delay": {"kind": "normal", "mean": 3}}, "autoscalers[0].start_delay.kind"),
])
def test_bad_input_is_one_sentence_naming_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        scenario(table)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_at_most_one_autoscaler_per_pool_and_no_events_on_it() -> None:
    with pytest.raises(ScenarioError, match=r"autoscalers\[1\].pool 'p' already has an autoscaler"):
        scenario({"pool": "p", "target": 1}, {"pool": "p", "target": 2})
    with pytest.raises(ScenarioError, match=r"events\[0\].pool 'p' is autoscaled"):
        scenario({"pool": "p", "target": 1}, events=[{"at": 1.0, "kind": "sigterm", "pool": "p"}])


def test_the_cli_exits_2_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    text = to_toml(Scenario.from_dict(BASE)) + '\n[[autoscalers]]\npool = "p"\nmin = 4\nmax = 2\ntarget = 1\n'
    path.write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "qsim", "simulate", str(path)], capture_output=True, text=True)
    assert run.returncode == 2
    assert "autoscalers[0].min must be <= max (2), got 4" in run.stderr


def test_every_policy_builds_its_controller() -> None:
    from qsim.autoscale import HPA, Step, TargetTracking
    from qsim.autoscale.build import controller, metric_window, needs_advice
    s = scenario({"pool": "p", "target": 4, "scale_down_stabilization": 60},
                 {"pool": "other", "policy": "target-tracking", "acceptable_latency": 5})
    hpa = controller(s.autoscalers[0], s.pool("p"))
    assert isinstance(hpa, HPA) and hpa.scale_down.stabilization == 60.0 and hpa.target == 4.0
    tt = controller(s.autoscalers[1], s.pool("other"))
    assert isinstance(tt, TargetTracking) and tt.concurrency == 1 and metric_window(s.autoscalers[1]) == 60.0
    step = scenario({"pool": "p", "policy": "step", "up_when": 2, "down_when": 1}).autoscalers[0]
    assert isinstance(controller(step, s.pool("p")), Step)
    q = scenario({"pool": "p", "policy": "qsim", "slo": "p95_wait<=2"}).autoscalers[0]
    assert needs_advice(q) and metric_window(q) == 900.0
    with pytest.raises(ValueError, match="pass recommend"):
        controller(q, s.pool("p"))
    adv = controller(q, s.pool("p"), recommend=lambda o: 3)
    assert isinstance(adv, HPA) and adv.metric == "recommended_workers" and adv.scale_down.stabilization == 600.0
