"""What ``qsim autoscale --emit keda|hpa`` writes validates against the real schemas.

The HorizontalPodAutoscaler (autoscaling/v2) and the worker Deployment (apps/v1)
against Kubernetes' OpenAPI schema (kubernetes-validate, strict: an unknown field
fails), for the Kubernetes release whose HPA has per-direction tolerances (1.33);
the KEDA ScaledObject against ``tests/keda-scaledobject.schema.json`` (its fields and
KEDA's ranges), its HPA ``behavior`` against Kubernetes' schema. prometheus-adapter's
rule is a fragment of the adapter's own configuration, not a Kubernetes object: it
is checked for the shape the adapter reads.
"""

from __future__ import annotations

import json
import math
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from jsonschema import Draft202012Validator
from waiting import ROOT

from qsim import Scenario
from qsim.analysis.autoscaling.contest import policy_table
from qsim.autoscale.emit import emit

KUBERNETES = "1.33.0"
SCALED_OBJECT = Draft202012Validator(json.loads((ROOT / "tests" / "keda-scaledobject.schema.json").read_text()))
QUEUES = ("orders",)


def day(table: dict[str, Any]) -> Scenario:
    return Scenario.from_dict({
        "name": "orders", "duration": 600.0, "queues": [{"name": "orders"}],
        "jobs": [{"name": "order", "queue": "orders", "arrival": {"kind": "poisson", "rate": 3.0},
                  "service": {"kind": "exponential", "mean": 0.5}}],
        "pools": [{"name": "workers", "queues": ["orders"], "concurrency": 2}],
        "autoscalers": [{"pool": "workers", **table}]})


def emitted(kind: str, table: dict[str, Any], base: dict[str, Any] | None = None,
            target: str = "qsim") -> tuple[list[Any], str | None]:
    """The documents ``--emit kind FILE [--target target]`` writes to FILE, and its prometheus-adapter rule (as
    the CLI makes them)."""
    s = day(table)
    text, rule = emit(kind, s, "workers", policy_table(s, "workers"), slo="p95_wait<=2", deployment=base,
                      target=target)
    return [d for d in yaml.safe_load_all(text) if d], rule


def check(doc: dict[str, Any]) -> None:
    """``doc`` validates against its schema (raises otherwise)."""
    if doc["kind"] == "ScaledObject":
        errors = sorted(SCALED_OBJECT.iter_errors(doc), key=str)
        assert not errors, "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
        behavior = doc["spec"].get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior")
        if behavior is not None:  # an autoscaling/v2 behavior: checked inside an HPA
            check({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "so"},
                   "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "so"}, "maxReplicas": 1,
                            "behavior": behavior}})
        return
    kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def check_rule(rule: str | None) -> None:
    rules = yaml.safe_load(rule or "")["externalRules"]
    assert rules and all({"seriesQuery", "name", "metricsQuery", "resources"} <= set(r) for r in rules)


_RULE = st.fixed_dictionaries({"type": st.sampled_from(["pods", "percent"]), "value": st.integers(1, 200),
                               "period": st.integers(1, 1800).map(float)})


@st.composite
def policies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A kind (keda | hpa) and a valid ``[[autoscalers]]`` table that it can emit for a qsim queue."""
    kind = draw(st.sampled_from(["keda", "hpa"]))
    policy = draw(st.sampled_from(["hpa", "qsim", "target-tracking"]))
    low = draw(st.integers(0, 5))
    t: dict[str, Any] = {"policy": policy, "min": low, "max": draw(st.integers(max(low, 1), 50)),
                         "grace": draw(st.integers(0, 600).map(float)), "poll": draw(st.integers(1, 600).map(float))}
    if policy == "target-tracking":  # on the queue's length, which only running workers export: never at zero
        t.update(min=max(low, 1))
        t.update(acceptable_latency=draw(st.integers(1, 120).map(float)),
                 scale_in_cooldown=draw(st.integers(0, 3600).map(float)))
        return kind, t
    t.update(cooldown=draw(st.integers(0, 3600).map(float)), initial_cooldown=draw(st.integers(0, 3600).map(float)),
             activation=draw(st.integers(0, 100).map(lambda x: x / 2)), tolerance=draw(st.integers(0, 50)) / 100,
             sync=draw(st.integers(1, 60).map(float)))
    if kind == "hpa" and low == 0:
        t["keda"] = False  # an HPA scales to zero only by itself (minReplicas: 0): through KEDA is refused
        for key in ("cooldown", "initial_cooldown", "activation"):  # KEDA's alone
            t.pop(key)
    t["behavior"] = draw(st.booleans())
    for way in ("up", "down") if t["behavior"] else ():
        t[f"scale_{way}_stabilization"] = draw(st.integers(0, 3600).map(float))
        t[f"scale_{way}_select"] = select = draw(st.sampled_from(["max", "min", "disabled"]))
        t[f"scale_{way}"] = draw(st.lists(_RULE, min_size=0 if select == "disabled" else 1, max_size=3))
        if draw(st.booleans()):
            t[f"scale_{way}_tolerance"] = draw(st.integers(0, 100)) / 100
    if policy == "qsim":
        t.update(slo="p95_wait<=2", window=draw(st.integers(60, 3600).map(float)))
    else:
        t.update(metric=draw(st.sampled_from(["list_length", "in_flight", "oldest_age", "p95_wait"])),
                 target=draw(st.integers(1, 2000)) / 4)
        if low == 0 and (kind == "keda" or t.get("keda") is False):  # a metric only running workers export
            t["min"] = 1
            t.pop("keda", None)
    return kind, t


@settings(max_examples=examples(40), deadline=None)
@given(policies())
def test_every_emitted_object_validates(drawn: tuple[str, dict[str, Any]]) -> None:
    kind, table = drawn
    bullmq_can = table.get("metric") != "p95_wait" and table["policy"] != "target-tracking"  # no wait histogram
    target = "bullmq" if bullmq_can and table["max"] % 2 else "qsim"  # half the draws for a BullMQ queue (no worker Deployment of qsim's then)
    if target == "bullmq":  # KEDA's redis trigger (a BullMQ list) reads whole lengths
        for key in ("target", "activation"):
            if table.get(key) is not None:
                table[key] = float(max(1 if key == "target" else 0, math.ceil(table[key])))
    docs, rule = emitted(kind, table, target=target)
    kinds = [d["kind"] for d in docs]
    assert kinds[0] == ("ScaledObject" if kind == "keda" else "HorizontalPodAutoscaler")
    assert set(kinds[1:]) <= {"Deployment", "Service"} and (target == "bullmq" or kinds[1:])
    assert kinds.count("Service") == kinds.count("Deployment") - (target == "qsim")  # each advisor has its Service
    for doc in docs:
        check(doc)
    if kind == "hpa":
        check_rule(rule)


@pytest.mark.parametrize("kind", ["keda", "hpa"])
def test_a_deployment_read_with_k8s_is_emitted_valid(kind: str) -> None:
    (_, base) = [d for d in yaml.safe_load_all((ROOT / "docs" / "examples" / "orders-keda.yaml").read_text()) if d]
    docs, _ = emitted(kind, {"min": 1, "max": 30, "target": 6, "behavior": False}, base=base)
    for doc in docs:
        check(doc)
    assert "advanced" not in docs[0]["spec"] and "behavior" not in docs[0]["spec"]  # behavior = false: none


def test_the_schemas_catch_what_the_api_server_refuses() -> None:
    (so, deployment), _ = emitted("keda", {"target": 6})
    (hpa, _), rule = emitted("hpa", {"target": 6})
    check_rule(rule)
    so["spec"]["pollingInterval"] = 0
    hpa["spec"]["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] = "15"
    deployment["spec"]["replicas"] = "two"
    for bad in (so, hpa, deployment):
        with pytest.raises((AssertionError, kubernetes_validate.ValidationError)):
            check(bad)


@pytest.mark.parametrize("path", ["deploy/kubernetes/keda-scaledobject.yaml", "deploy/kubernetes/hpa-external.yaml",
                                  "deploy/kubernetes/worker.yaml", "docs/examples/orders-keda.yaml"])
def test_the_shipped_objects_validate(path: str) -> None:
    for doc in yaml.safe_load_all((ROOT / path).read_text()):
        if doc and doc["kind"] in ("ScaledObject", "HorizontalPodAutoscaler", "Deployment"):
            check(doc)
