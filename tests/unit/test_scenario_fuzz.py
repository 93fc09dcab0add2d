"""Hypothesis over scenario input: anything malformed is a ScenarioError that names
the file, never a traceback of another kind."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario

BASE: dict[str, Any] = {
    "name": "fuzz",
    "duration": 10.0,
    "queues": [{"name": "q", "concurrency_limit": 2, "rate_limit": {"max": 5, "per": 1.0}}],
    "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
              "service": {"kind": "gamma", "mean": 0.5, "cv": 1.0},
              "backoff": {"kind": "fixed", "delay": 1.0}, "flow": {"children": ["b"]}},
             {"name": "b", "queue": "q", "service": {"kind": "constant", "mean": 0.1}}],
    "pools": [{"name": "p", "queues": ["q"], "weights": {"q": 2}}],
    "events": [{"at": 1.0, "kind": "sigkill", "pool": "p"}],
    "engine": {"lock_duration": 5.0},
}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


PATHS = _paths(BASE)


def _mutate(path: tuple[Any, ...], value: Any, delete: bool) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    node: Any = raw
    for part in path[:-1]:
        node = node[part]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return raw


def _check(raw: Any) -> None:
    try:
        Scenario.from_dict(raw, source="fuzz.toml")
    except ScenarioError as e:
        assert str(e).startswith("fuzz.toml: "), str(e)
        assert "\n" not in str(e)


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), values, st.booleans())
def test_any_single_mutation_is_valid_or_a_scenario_error(path: tuple[Any, ...], value: Any, delete: bool) -> None:
    _check(_mutate(path, value, delete))


@settings(max_examples=examples(150), deadline=None)
@given(st.dictionaries(st.text(max_size=10), values, max_size=6))
def test_random_top_level_tables(raw: dict[str, Any]) -> None:
    _check(raw)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=200))
def test_random_toml_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    try:
        Scenario.from_toml(path)
    except ScenarioError as e:
        assert str(e).startswith(f"{path}: ")
