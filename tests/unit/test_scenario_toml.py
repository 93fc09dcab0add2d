"""Scenario.to_dict is the inverse of Scenario.from_dict, and the TOML writer of Scenario.from_toml."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from test_scenario import FULL  # type: ignore[import-not-found]

from qsim import Scenario
from qsim.errors import ScenarioError, UsageError
from qsim.scenarios import builtin
from qsim.spec.toml_writer import to_toml, toml_value, write_toml

ODD = """
name = "odd \\"quoted\\" name\\n"
description = "every odd value: quoted names, keyed limits, job data"
duration = 30.0
[[queues]]
name = "orders.eu"
rate_limit = { max = 3, per = 0.5, key = "tenant" }
aging = 2.5
[[queues]]
name = "bulk jobs"
[[jobs]]
name = "cut/ünïcode"
queue = "orders.eu"
priority = -2
arrival = { kind = "burst", rate = 4.0, size = 3 }
service = { kind = "constant", mean = 0.0 }
flow = { children = ["kid"], on_child_failure = "ignore" }
data = { tenant = "acme", "odd key" = [1, 2.5, true, { deep = "x" }], n = 12345678901234567 }
[[jobs]]
name = "kid"
queue = "bulk jobs"
service = { kind = "exponential", mean = 1e-05 }
backoff = { kind = "fixed", delay = 0.0, max = 0.0, jitter = 1.0 }
[[pools]]
name = "p"
queues = ["orders.eu", "bulk jobs"]
policy = "wrr"
weights = { "orders.eu" = 3, "bulk jobs" = 2 }
workers = 0
[[events]]
at = 1.0
kind = "start"
pool = "p"
count = 2
"""


def scenarios(tmp_path: Path) -> list[Scenario]:
    (tmp_path / "full.toml").write_text(FULL)
    (tmp_path / "odd.toml").write_text(ODD, encoding="utf-8")
    return [builtin("workshop"), Scenario.from_toml(tmp_path / "full.toml"), Scenario.from_toml(tmp_path / "odd.toml")]


def test_to_dict_round_trips(tmp_path: Path) -> None:
    for s in scenarios(tmp_path):
        d = s.to_dict()
        assert Scenario.from_dict(d) == s
        assert Scenario.from_dict(json.loads(json.dumps(d))) == s  # JSON-ready: only plain values
        assert [k for k in d if k != "description"][:4] == ["name", "seed", "duration", "warmup"]
        assert "null" not in json.dumps(d)


def test_to_dict_writes_every_key_and_leaves_out_absent_parts() -> None:
    d = builtin("workshop").to_dict()
    cut = d["jobs"][0]
    assert cut["service"] == {"kind": "lognormal", "mean": 0.5, "cv": 1.0}
    assert cut["backoff"] == {"kind": "exponential", "delay": 1.0, "max": 60.0, "jitter": 0.0}
    assert "fan_out" not in cut and "flow" not in cut and "rate_limit" not in d["queues"][0]
    assert d["engine"]["ack_overhead"] == 0.0 and d["events"] == []


def test_toml_writer_round_trips_with_comments(tmp_path: Path) -> None:
    for i, s in enumerate(scenarios(tmp_path)):
        comments = {"duration": "two\nlines", "jobs[0].service": "fitted # with a hash", "pools[0]": "observed",
                    "engine.fetch_overhead": "probe", "queues[0]": "limits"}
        text = to_toml(s, comments=comments, header="header line")
        assert text.startswith("# header line\n")
        assert "# two\n# lines\nduration = " in text
        assert "# fitted # with a hash\nservice = " in text and "# observed\n[[pools]]" in text
        assert Scenario.from_dict(tomllib.loads(text)) == s
        path = write_toml(s, tmp_path / f"out{i}.toml", comments=comments)
        assert Scenario.from_toml(path) == s


def test_toml_writer_makes_paths_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "svc.csv").write_text("seconds\n0.1\n0.3\n")
    (tmp_path / "data" / "arr.csv").write_text("at\n0.0\n1.5\n")
    raw = {"name": "e", "duration": 5.0, "queues": [{"name": "q"}],
           "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "trace", "path": str(tmp_path / "data" / "arr.csv")},
                     "service": {"kind": "empirical", "path": str(tmp_path / "data" / "svc.csv")}}],
           "pools": [{"name": "p", "queues": ["q"]}]}
    s = Scenario.from_dict(raw)
    path = write_toml(s, tmp_path / "data" / "e.toml")
    text = path.read_text()
    assert 'path = "svc.csv"' in text and 'path = "arr.csv"' in text
    again = Scenario.from_toml(path)
    assert again.job("a").service.values == (0.1, 0.3)  # type: ignore[attr-defined]
    assert again.job("a").arrival.at == (0.0, 1.5)  # type: ignore[union-attr]


def test_toml_values() -> None:
    assert toml_value(True) == "true" and toml_value(3) == "3" and toml_value(0.5) == "0.5"
    assert toml_value(1e-7) == "1e-07" and tomllib.loads("x = 1e-07")["x"] == 1e-7
    assert toml_value('a"b\\c\n') == '"a\\"b\\\\c\\n"'
    assert toml_value("del\x7f nul\x00") == '"del\\u007f nul\\u0000"'  # json.dumps left U+007F raw: invalid TOML
    assert toml_value({}) == "{}" and toml_value({"a.b": [1, 2]}) == '{ "a.b" = [1, 2] }'
    with pytest.raises(ValueError, match="finite"):
        toml_value(float("nan"))
    with pytest.raises(TypeError):
        toml_value(object())


# ----------------------------------------------------------------------------- arbitrary names


def named(name: str, *, queue: str | None = None, pool: str | None = None, key: str = "tenant") -> Scenario:
    """A small scenario whose every name (scenario, queue, job type, pool, weight key, data key) is odd."""
    q, p = queue or name, pool or name
    return Scenario.from_dict({
        "name": name, "description": name, "duration": 1.0, "queues": [{"name": q}],
        "jobs": [{"name": name, "queue": q, "arrival": {"kind": "poisson", "rate": 1.0},
                  "service": {"kind": "constant", "mean": 0.1}, "data": {f"k{key}": name, f"v{name}": [name, 1.5]}}],
        "pools": [{"name": p, "queues": [q], "policy": "wrr", "weights": {q: 2}}]})


# Any Unicode a TOML file can carry: everything but lone surrogates (category Cs), which no UTF-8 text holds;
# control characters (U+0000..U+001F, U+007F) included: TOML writes them as \uXXXX escapes.
TOML_TEXT = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12).filter(lambda s: s.strip())


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=TOML_TEXT, other=TOML_TEXT)
def test_any_unicode_name_round_trips(name: str, other: str, tmp_path: Path) -> None:
    # Given a scenario whose names are arbitrary Unicode (U+007F, NUL, quotes, dots, brackets, emoji...)
    s = named(name, queue=other, key=other)
    # When written as TOML, Then the text is valid TOML that reads back as the same scenario
    text = to_toml(s, comments={"jobs[0]": f"job type {name}", "duration": other}, header=name)
    assert Scenario.from_dict(tomllib.loads(text)) == s
    # and so is the file (UTF-8 on disk)
    path = write_toml(s, tmp_path / "named.toml", comments={"jobs[0].service": name})
    assert Scenario.from_toml(path) == s


@pytest.mark.parametrize("name", ["odd\x7fname", "nul\x00", "tab\there", 'quote"and\\back', "line\nbreak",
                                  "\u2028sep", "\ufeffbom", "😀", "a.b", "[x]", "#hash", "'single'"])
def test_names_from_measured_data_round_trip(name: str, tmp_path: Path) -> None:
    s = named(name)
    path = write_toml(s, tmp_path / "named.toml", comments={"jobs[0]": f"job type {name!r}\nsecond {name}"})
    assert Scenario.from_toml(path) == s


@given(bad=st.text(st.characters(categories=("Cs",)), min_size=1, max_size=3), good=TOML_TEXT)
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_what_toml_cannot_hold_is_a_clear_error_and_no_file(bad: str, good: str, tmp_path: Path) -> None:
    # Given a job name with a lone surrogate (a Python str can hold one; a UTF-8 file cannot)
    s = named(good + bad)
    path = tmp_path / "bad.toml"
    path.unlink(missing_ok=True)
    # Then writing it says which key and which character, and leaves no file behind
    with pytest.raises(ScenarioError, match=r"holds the lone surrogate U\+D[89A-F][0-9A-F]{2} .* TOML file cannot hold"):
        write_toml(s, path)
    assert not path.exists() and not list(tmp_path.glob(".bad.toml.*"))


def test_a_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = write_toml(named("first"), tmp_path / "s.toml")
    with pytest.raises(ScenarioError):
        write_toml(named("bad\ud800"), path)
    assert Scenario.from_toml(path).name == "first" and sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]
    with pytest.raises(UsageError, match="does not exist"):
        write_toml(named("x"), tmp_path / "missing" / "s.toml")
    assert not (tmp_path / "missing").exists()
