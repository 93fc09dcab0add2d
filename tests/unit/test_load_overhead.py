"""[engine] overhead_by_load: parsed and checked, and applied by the model at the load it simulates (qsim.spec.offered_load)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qsim import Scenario
from qsim.calibrate import from_csv
from qsim.calibrate.overhead import Overhead
from qsim.errors import ScenarioError
from qsim.model import Model, simulate
from qsim.spec.offered_load import engine_overhead, offered_utilization, overhead_at
from qsim.spec.toml_writer import write_toml
from qsim.spec.workload import draw_workload

TABLE = [[0.1, 0.001, 0.002], [0.5, 0.002, 0.003], [0.9, 0.004, 0.006]]


def mmc(rate: float, table: list[list[float]] | None = TABLE, **engine: float) -> Scenario:
    eng: dict[str, object] = dict(engine)
    if table is not None:
        eng["overhead_by_load"] = table
    return Scenario.from_dict({
        "name": "mmc", "seed": 1, "duration": 200.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": rate},
                  "service": {"kind": "exponential", "mean": 0.1}, "fail_prob": 0.2, "attempts": 2}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 4}], "engine": eng})


def test_the_table_is_read_at_the_offered_utilization() -> None:
    # offered: 40/s x 1.2 attempts x (0.1 s + overheads) over 8 slots
    s = mmc(40.0)
    o = engine_overhead(s)
    assert o.utilization == pytest.approx(offered_utilization(s, o.fetch, o.ack))
    assert o.utilization == pytest.approx(40 * 1.2 * (0.1 + o.fetch + o.ack) / 8)  # the fixed point
    assert 0.5 < o.utilization < 0.9 and 0.002 < o.fetch < 0.004 and 0.003 < o.ack < 0.006
    assert o.source == f"engine.overhead_by_load at utilization {o.utilization:.3g}"
    # below and above the rows the nearest row holds; without a table the scalars apply at every load
    assert engine_overhead(mmc(1.0)).fetch == 0.001 and engine_overhead(mmc(500.0)).ack == 0.006
    plain = engine_overhead(mmc(40.0, None, fetch_overhead=0.003, ack_overhead=0.001))
    assert (plain.fetch, plain.ack) == (0.003, 0.001) and plain.source == "engine.fetch_overhead/ack_overhead"
    assert overhead_at(s.engine, 0.3) == pytest.approx((0.0015, 0.0025))


def test_the_model_applies_the_row_of_its_load() -> None:
    light, busy = mmc(10.0), mmc(55.0)
    for s in (light, busy):  # the model says which overhead it applied: the table's row at its offered load
        model = Model.from_workload(draw_workload(s))
        assert model.overhead == engine_overhead(s)
    hold = engine_overhead(busy)
    assert hold.fetch > engine_overhead(light).fetch  # a busier scenario pays more
    # and applies it: every attempt ends ack_overhead after its handler (records start at the handler's start)
    runs = simulate(busy).records.attempts
    ok = runs[runs["result"] == "ok"]
    assert (ok["end"] - ok["start"]).min() >= hold.ack - 1e-12


def test_overhead_by_load_is_checked_and_written() -> None:
    bad = [
        ({"overhead_by_load": [[0.5, 0.001]]}, "overhead_by_load[0] must be [utilization, fetch_overhead, ack_overhead]"),
        ({"overhead_by_load": [[1.5, 0.001, 0.001]]}, "utilization must be between 0 and 1, got 1.5"),
        ({"overhead_by_load": [[0.5, 0.001, 0.001], [0.4, 0.001, 0.001]]}, "utilizations must increase"),
        ({"overhead_by_load": [[0.5, -0.001, 0.001]]}, "overheads must be >= 0"),
        ({"overhead_by_load": []}, "must be an array of [utilization, fetch_overhead, ack_overhead] rows"),
        ({"overhead_by_load": TABLE, "fetch_overhead": 0.001}, "engine.fetch_overhead give it or "
                                                                "engine.overhead_by_load (the overheads by load), not both"),
    ]
    for engine, said in bad:
        with pytest.raises(ScenarioError) as e:
            mmc(40.0, None, **engine)  # type: ignore[arg-type]
        assert said in str(e.value), str(e.value)


def test_a_table_round_trips_through_toml(tmp_path: Path) -> None:
    s = mmc(40.0)
    path = write_toml(s, tmp_path / "s.toml")
    assert "overhead_by_load = [[0.1, 0.001, 0.002], [0.5, 0.002, 0.003], [0.9, 0.004, 0.006]]" in path.read_text()
    assert Scenario.from_toml(path) == s


def test_calibrating_with_a_probe_table_takes_out_the_overhead_at_the_measured_load(tmp_path: Path) -> None:
    from test_calibrate_edges import queue_csv  # type: ignore[import-not-found]

    path = queue_csv(tmp_path / "jobs.csv", n=3000, rate=40.0, slots=4, pickup=0.0005)
    table = ((0.1, 0.001, 0.001), (0.9, 0.003, 0.005))
    probed = Overhead(0.001, 0.001, "probe at 1 x 4 slots, 2 loads", by_load=table)
    c = from_csv(path, overhead=probed)
    # the measured jobs ran half busy (40/s x 50 ms over 4 slots): the table's 2 + 3 ms at 0.5 are taken out
    assert c.types["cut"].service.shift == pytest.approx(0.005, rel=0.1)
    assert any("measured utilization 0.5" in w for w in c.warnings), c.warnings
    assert c.scenario.engine.overhead_by_load == table and c.scenario.engine.fetch_overhead == 0.0
    assert "overhead by load" in repr(c) and "by the probe at each load" in c.comments()["engine.overhead_by_load"]
