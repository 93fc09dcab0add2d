"""Scenario parsing and validation: every error names the file, the key and the value."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from qsim.errors import ScenarioError
from qsim.scenarios import builtin, load
from qsim.spec import dists
from qsim.spec.scenario import PoolSpec, QueueSpec, Scenario, JobType

FULL = """
name = "workshop"
seed = 7
duration = 120.0
warmup = 10.0

[[queues]]
name = "orders"
rate_limit = { max = 10, per = 1.0 }
concurrency_limit = 4

[[jobs]]
name = "cut"
queue = "orders"
priority = 0
arrival = { kind = "poisson", rate = 8.0 }
service = { kind = "exponential", mean = 0.5 }
fail_prob = 0.1
poison_prob = 0.01
attempts = 3
backoff = { kind = "exponential", delay = 1.0, max = 60.0, jitter = 0.1 }
timeout = 5.0
fan_out = { job = "cut-part", count = 5 }
flow = { children = ["fetch", "tax"] }

[[jobs]]
name = "cut-part"
queue = "orders"
service = { kind = "gamma", mean = 0.1, cv = 0.5 }

[[jobs]]
name = "fetch"
queue = "orders"
service = { kind = "lognormal", mean = 0.1, cv = 2 }

[[jobs]]
name = "tax"
queue = "orders"
service = { kind = "uniform", low = 0.1, high = 0.2 }

[[pools]]
name = "craftsmen"
queues = ["orders"]
policy = "wrr"
weights = { orders = 1 }
workers = 3
concurrency = 2

[[events]]
at = 60.0
kind = "sigterm"
pool = "craftsmen"
count = 1
grace = 30.0

[engine]
lock_duration = 30.0
stalled_interval = 30.0
max_stalled = 1
fetch_overhead = 0.001
"""


def minimal() -> dict[str, Any]:
    return {
        "name": "tiny",
        "duration": 10.0,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 1.0},
                  "service": {"kind": "constant", "mean": 0.5}}],
        "pools": [{"name": "p", "queues": ["q"]}],
    }


def error_of(raw: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as info:
        Scenario.from_dict(raw, source="shop.toml")
    return str(info.value)


def test_full_schema_parses(tmp_path: Path) -> None:
    # Given every key of the schema (docs/reference/scenario.md)
    path = tmp_path / "shop.toml"
    path.write_text(FULL)
    # When it is loaded
    s = Scenario.from_toml(path)
    # Then every value lands where it belongs
    cut = s.job("cut")
    assert (s.name, s.seed, s.duration, s.warmup) == ("workshop", 7, 120.0, 10.0)
    assert s.queue("orders").rate_limit is not None and s.queue("orders").rate_limit.max == 10
    assert s.queue("orders").concurrency_limit == 4
    assert isinstance(cut.arrival, dists.PoissonArrivals) and cut.arrival.rate == 8.0
    assert isinstance(cut.service, dists.Exponential) and cut.service.mean == 0.5
    assert (cut.fail_prob, cut.poison_prob, cut.attempts, cut.timeout) == (0.1, 0.01, 3, 5.0)
    assert cut.backoff.kind == "exponential" and cut.backoff.jitter == 0.1
    assert cut.fan_out is not None and (cut.fan_out.job, cut.fan_out.count) == ("cut-part", 5)
    assert cut.flow is not None and cut.flow.children == ("fetch", "tax") and cut.flow.on_child_failure == "fail"
    assert s.job("cut-part").arrival is None
    assert s.pool("craftsmen").slots == 6 and s.pool("craftsmen").policy == "wrr"
    assert s.events[0].kind == "sigterm" and s.events[0].grace == 30.0
    assert s.engine.fetch_overhead == 0.001
    assert s.slots == 6


def test_defaults() -> None:
    s = Scenario.from_dict(minimal())
    assert (s.seed, s.warmup, s.events) == (0, 0.0, ())
    a = s.job("a")
    assert (a.priority, a.fail_prob, a.poison_prob, a.attempts, a.timeout) == (0, 0.0, 0.0, 1, 0.0)
    assert s.pool("p").policy == "priority" and s.pool("p").weight("q") == 1.0
    assert s.engine.lock_duration == 30.0 and s.engine.max_stalled == 1


def test_python_construction_matches_toml() -> None:
    # A notebook builds the same scenario in Python
    built = Scenario(
        name="tiny", duration=10.0, queues=(QueueSpec(name="q"),),
        jobs=(JobType(name="a", queue="q", arrival=dists.PoissonArrivals(rate=1.0),
                      service=dists.Constant(mean=0.5)),),
        pools=(PoolSpec(name="p", queues=("q",)),))
    assert built == Scenario.from_dict(minimal())


def test_python_construction_checks_references() -> None:
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.queue names no queue: 'qq'"):
        Scenario(name="x", duration=1.0, queues=(QueueSpec(name="q"),),
                 jobs=(JobType(name="a", queue="qq", arrival=dists.PoissonArrivals(rate=1.0),
                               service=dists.Constant(mean=0.5)),),
                 pools=(PoolSpec(name="p", queues=("q",)),))


def test_the_design_example_message() -> None:
    raw = minimal()
    raw["jobs"].append({"name": "b", "queue": "q", "service": {"kind": "gamma", "mean": 1.0, "cv": -1}})
    assert error_of(raw) == "shop.toml: jobs[1].service.cv must be >= 0, got -1"


def _set(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    *parents, last = path.split(".")
    node: Any = raw
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("name", KeyError, "shop.toml: name is required"),
        ("name", 3, "name must be a string, got 3"),
        ("duration", KeyError, "duration is required"),
        ("duration", 0, "duration must be > 0, got 0"),
        ("duration", "long", "duration must be a number, got 'long'"),
        ("duration", True, "duration must be a number, got True"),
        ("duration", float("nan"), "duration must be a finite number, got nan"),
        ("warmup", 10.0, "warmup must be < duration (10), got 10"),
        ("warmup", -1, "warmup must be >= 0, got -1"),
        ("seed", -3, "seed must be >= 0, got -3"),
        ("seed", 1.5, "seed must be an integer, got 1.5"),
        ("durration", 5, "durration is not a known key (did you mean 'duration'?)"),
        ("queues", {"name": "q"}, "queues must be an array of tables ([[queues]])"),
        ("queues", [], "queues must define at least one queue"),
        ("queues.0.concurrency_limit", 0, "queues[0].concurrency_limit must be >= 1, got 0"),
        ("queues.0.rate_limit", {"max": 0, "per": 1}, "queues[0].rate_limit.max must be >= 1, got 0"),
        ("queues.0.rate_limit", {"max": 5}, "queues[0].rate_limit.per is required"),
        ("queues.0.rate_limit", {"max": 5, "per": 1, "burst": 2}, "queues[0].rate_limit.burst is not a known key"),
        ("queues.0.aging", -1, "queues[0].aging must be >= 0, got -1"),
        ("queues.0.nmae", "x", "queues[0].nmae is not a known key (did you mean 'name'?)"),
        ("jobs.0.queue", "qq", "jobs[0].queue names no queue: 'qq' (did you mean 'q'?)"),
        ("jobs.0.service", KeyError, "jobs[0].service is required"),
        ("jobs.0.service", "fast", "jobs[0].service must be a table like {kind = ...}, got 'fast'"),
        ("jobs.0.service", {"mean": 1}, "jobs[0].service.kind is required"),
        ("jobs.0.service", {"kind": "exponental", "mean": 1},
         "jobs[0].service.kind must be one of constant, exponential, lognormal, gamma, uniform, empirical, "
         "got 'exponental' (did you mean 'exponential'?)"),
        ("jobs.0.service", {"kind": "exponential", "mean": 0}, "jobs[0].service.mean must be > 0, got 0"),
        ("jobs.0.service", {"kind": "exponential", "mean": 1, "cv": 1}, "jobs[0].service.cv is not a known key"),
        ("jobs.0.service", {"kind": "lognormal", "mean": 1}, "jobs[0].service.cv is required"),
        ("jobs.0.service", {"kind": "uniform", "low": 2, "high": 1}, "jobs[0].service.high must be >= low (2), got 1"),
        ("jobs.0.arrival", {"kind": "poisson", "rate": -2}, "jobs[0].arrival.rate must be > 0, got -2"),
        ("jobs.0.arrival", {"kind": "burst", "rate": 2}, "jobs[0].arrival.size is required"),
        ("jobs.0.arrival", {"kind": "burst", "rate": 2, "size": 0}, "jobs[0].arrival.size must be >= 1, got 0"),
        ("jobs.0.arrival", KeyError, "jobs must give at least one job type an `arrival`"),
        ("jobs.0.fail_prob", 1.5, "jobs[0].fail_prob must be <= 1, got 1.5"),
        ("jobs.0.poison_prob", -0.1, "jobs[0].poison_prob must be >= 0, got -0.1"),
        ("jobs.0.attempts", 0, "jobs[0].attempts must be >= 1, got 0"),
        ("jobs.0.attempts", 10**30, "jobs[0].attempts is too large"),
        ("jobs.0.priority", "high", "jobs[0].priority must be an integer, got 'high'"),
        ("jobs.0.timeout", -1, "jobs[0].timeout must be >= 0, got -1"),
        ("jobs.0.backoff", {"kind": "linear"}, "jobs[0].backoff.kind must be one of fixed, exponential, got 'linear'"),
        ("jobs.0.backoff", {"jitter": 2}, "jobs[0].backoff.jitter must be <= 1, got 2"),
        ("jobs.0.fan_out", {"job": "zz", "count": 2}, "jobs[0].fan_out.job names no job type: 'zz'"),
        ("jobs.0.fan_out", {"job": "a", "count": 0}, "jobs[0].fan_out.count must be >= 1, got 0"),
        ("jobs.0.fan_out", {"job": "a", "count": 1}, "jobs[0].fan_out.job must not name the job itself: 'a'"),
        ("jobs.0.flow", {"children": []}, "jobs[0].flow.children must name at least one child job type"),
        ("jobs.0.flow", {"children": ["a"]}, "jobs[0].flow.children must not name the job itself: 'a'"),
        ("jobs.0.flow", {"children": "b"}, "jobs[0].flow.children must be a list of strings, got 'b'"),
        ("jobs.0.flow", {"children": ["zz"]}, "jobs[0].flow.children names no job type: 'zz'"),
        ("jobs.0.flow", {"children": ["a"], "on_child_failure": "retry"},
         "jobs[0].flow.on_child_failure must be one of fail, ignore, got 'retry'"),
        ("pools.0.queues", [], "pools[0].queues must list at least one queue"),
        ("pools.0.queues", ["q", "q"], "pools[0].queues lists 'q' more than once"),
        ("pools.0.queues", ["x"], "pools[0].queues names no queue: 'x'"),
        ("pools.0.policy", "fifo", "pools[0].policy must be one of priority, wrr, ordered, got 'fifo'"),
        ("pools.0.weights", {"zz": 1}, "pools[0].weights.zz is not one of the pool's queues (q)"),
        ("pools.0.weights", {"q": -1}, "pools[0].weights.q must be a whole number >= 1"),
        ("pools.0.weights", [1], "pools[0].weights must be a table of queue = weight, got [1]"),
        ("pools.0.workers", -1, "pools[0].workers must be >= 0, got -1"),
        ("pools.0.concurrency", 0, "pools[0].concurrency must be >= 1, got 0"),
        ("pools", [], "pools must define at least one pool"),
        ("events", [{"at": 1, "kind": "sigstop", "pool": "p"}],
         "events[0].kind must be one of sigterm, sigkill, start, got 'sigstop'"),
        ("events", [{"at": 1, "kind": "sigkill", "pool": "pp"}], "events[0].pool names no pool: 'pp'"),
        ("events", [{"kind": "sigkill", "pool": "p"}], "events[0].at is required"),
        ("events", [{"at": 1, "kind": "sigterm", "pool": "p", "grace": -5}], "events[0].grace must be >= 0, got -5"),
        ("engine", {"lock_duration": 0}, "engine.lock_duration must be > 0, got 0"),
        ("engine", {"lock_duraton": 5}, "engine.lock_duraton is not a known key (did you mean 'lock_duration'?)"),
        ("engine", {"max_stalled": -1}, "engine.max_stalled must be >= 0, got -1"),
        ("engine", {"prefetch": "many"}, 'engine.prefetch must be "auto" or an integer >= 0, got \'many\''),
        ("engine", {"prefetch": -2}, "engine.prefetch must be >= 0, got -2"),
        ("engine", {"prefetch": 1.5}, "engine.prefetch must be an integer, got 1.5"),
        ("description", "", "description must not be empty"),
        ("description", 3, "description must be a string, got 3"),
        ("jobs.0.data", "acme", "jobs[0].data must be a table of JSON values, got 'acme'"),
        ("jobs.0.data", {"s": 1}, "jobs[0].data.s is reserved for the harness's planned payload (s, x, fan)"),
        ("jobs.0.data", {"tenant": None}, "jobs[0].data.tenant must be a JSON value (string, number, boolean, "
                                          "array or table), got None"),
        ("jobs.0.data", {"w": [1, float("inf")]}, "jobs[0].data.w[1] must be a finite number, got inf"),
        ("jobs.0.data", {"a b": {"c": 10**30}}, 'jobs[0].data."a b".c is too large'),
    ],
)
def test_invalid_values_name_the_key(path: str, value: Any, expected: str) -> None:
    message = error_of(_set(minimal(), path, value))
    assert message.startswith("shop.toml: ")
    assert expected in message


def test_child_cycles_are_refused_naming_the_cycle() -> None:
    # Given job types whose fan_out and flow children lead back to the first (a -> b -> c -> a)
    raw = minimal()
    raw["jobs"][0]["fan_out"] = {"job": "b", "count": 1}
    raw["jobs"] += [{"name": "b", "queue": "q", "service": {"kind": "constant", "mean": 0.5},
                     "flow": {"children": ["c"]}},
                    {"name": "c", "queue": "q", "service": {"kind": "constant", "mean": 0.5},
                     "fan_out": {"job": "a", "count": 2}}]
    # Then the scenario is refused at the cycle's first job type, not by a memory estimate of inf jobs
    assert error_of(raw) == ("shop.toml: jobs[0].fan_out.job must not lead back to the job itself, "
                             "got the cycle 'a' -> 'b' -> 'c' -> 'a'")
    # And a two-type cycle of flows is named at its flow's children
    raw["jobs"][0].pop("fan_out")
    raw["jobs"][2] = {"name": "c", "queue": "q", "service": {"kind": "constant", "mean": 0.5},
                      "flow": {"children": ["b"]}}
    assert error_of(raw) == ("shop.toml: jobs[1].flow.children must not lead back to the job itself, "
                             "got the cycle 'b' -> 'c' -> 'b'")
    # But children shared without a cycle (a -> b, a -> c, b -> c) are fine
    raw["jobs"][0]["flow"] = {"children": ["b", "c"]}
    raw["jobs"][2].pop("flow")
    assert Scenario.from_dict(raw).job("b").flow is not None


def test_duplicates_and_unserved_queues() -> None:
    raw = minimal()
    raw["queues"].append({"name": "q"})
    assert "queues[1].name is a duplicate: 'q'" in error_of(raw)
    raw = minimal()
    raw["queues"].append({"name": "lonely"})
    assert "queues[1] 'lonely' is served by no pool" in error_of(raw)


def test_trace_and_empirical_read_csv_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "arrivals.csv").write_text("time\n0.5\n1.0\n2.5\n")
    (tmp_path / "service.csv").write_text("0.1\n0.3\n")
    raw = minimal()
    raw["jobs"][0]["arrival"] = {"kind": "trace", "path": "arrivals.csv"}
    raw["jobs"][0]["service"] = {"kind": "empirical", "path": "service.csv"}
    s = Scenario.from_dict(raw, source=tmp_path / "shop.toml")
    job = s.job("a")
    assert isinstance(job.arrival, dists.TraceArrivals) and job.arrival.at == (0.5, 1.0, 2.5)
    assert isinstance(job.service, dists.Empirical) and job.service.mean == pytest.approx(0.2)


def test_bad_csv_files(tmp_path: Path) -> None:
    raw = minimal()
    raw["jobs"][0]["arrival"] = {"kind": "trace", "path": "missing.csv"}
    with pytest.raises(ScenarioError, match=r"jobs\[0\]\.arrival\.path cannot be read: .*missing\.csv"):
        Scenario.from_dict(raw, source=tmp_path / "shop.toml")
    (tmp_path / "bad.csv").write_text("1.0\nabc\n")
    raw["jobs"][0]["arrival"] = {"kind": "trace", "path": "bad.csv"}
    with pytest.raises(ScenarioError, match=r"bad\.csv line 2: not a number: 'abc'"):
        Scenario.from_dict(raw, source=tmp_path / "shop.toml")
    (tmp_path / "neg.csv").write_text("-1\n")
    raw["jobs"][0]["service"] = {"kind": "empirical", "path": "neg.csv"}
    raw["jobs"][0]["arrival"] = {"kind": "poisson", "rate": 1}
    with pytest.raises(ScenarioError, match=r"values must be finite and >= 0"):
        Scenario.from_dict(raw, source=tmp_path / "shop.toml")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"nope\.toml: cannot read scenario file"):
        Scenario.from_toml(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: not valid TOML"):
        Scenario.from_toml(bad)
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load(tmp_path / "absent.toml")


def test_builtin_workshop_is_the_seed_story() -> None:
    s = builtin("workshop")
    assert s.name == "workshop"
    assert s.queue("orders").concurrency_limit == 4
    assert s.pool("craftsmen").slots > 4  # more hands than room in the back
    assert load(None) == s and load("workshop") == s
    with pytest.raises(ScenarioError, match="no built-in scenario 'bakery'"):
        builtin("bakery")


def test_engine_prefetch_reaches_the_pool_workers() -> None:
    from qsim.harness.processes import PoolProcessSpec

    raw = minimal()
    for value, flag in (("auto", None), (0, "--prefetch=0"), (4, "--prefetch=4")):
        raw["engine"] = {"prefetch": value}
        scenario = Scenario.from_dict(raw)
        assert scenario.engine.prefetch == value and scenario.to_dict()["engine"]["prefetch"] == value
        pool = scenario.pools[0].name
        argv = PoolProcessSpec.for_pool(scenario, pool, redis="redis://x", prefix="p", worker_id="w", ready_key="r",
                                        grace=1.0).argv()
        assert [a for a in argv if a.startswith("--prefetch")] == ([flag] if flag else [])  # "auto" is the default
        assert PoolProcessSpec.parse(argv[3:]).settings.prefetch == value