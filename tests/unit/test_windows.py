"""The Summary's windows: each figure against a small run computed by hand, the same figures with
records on and off, how they add up to the whole-run Summary, and bad input."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from qsim.cli import main
from qsim.errors import ScenarioError
from qsim.model import simulate
from qsim.model import windowstream
from qsim.results.records import Records, jobs_frame
from qsim.results.summary import STREAM_REL_ERROR, summarize
from qsim.results.windows import WINDOW_FIELDS, group_quantiles, mean_steps, window_count, window_edges
from qsim.spec.scenario import Scenario

NAN = math.nan


def jobs(rows: list[tuple[float, float, float, str]]) -> Any:
    """rows: (enqueued, started, finished, outcome), one type and queue."""
    n = len(rows)
    enq, st, fin, out = zip(*rows)
    return jobs_frame({
        "job_id": [f"j{i}" for i in range(n)], "type": ["a"] * n, "queue": ["q"] * n, "priority": [0] * n,
        "enqueued": enq, "started": st, "finished": fin, "attempts": [0 if math.isnan(s) else 1 for s in st],
        "failed_attempts": [0] * n, "stalled": [0] * n, "worker": ["w"] * n, "outcome": out, "parent": [""] * n})


def test_every_figure_on_a_small_run_by_hand() -> None:
    # Given warm-up 10 s, windows of 10 s, 2 slots, a pool going from 2 processes to 1 at t = 25,
    # and six jobs: one enqueued before warm-up, one still waiting when the run ends
    records = Records(jobs=jobs([
        (5.0, 12.0, 15.0, "completed"),   # before warm-up: state only (busy, depth, oldest)
        (10.0, 10.0, 14.0, "completed"),
        (11.0, 14.0, 22.0, "completed"),
        (13.0, 15.0, 26.0, "completed"),
        (21.0, 22.0, 31.0, "completed"),  # the last completion: the measured range is [10, 31]
        (24.0, NAN, NAN, "unfinished"),
    ]), slots=((0.0, 2),), workers={"p": ((0.0, 2), (25.0, 1))})
    w = summarize(records, scenario="s", source="engine", seed=0, warmup=10.0, window=10.0)["windows"]
    # Then three windows cover [10, 31], the last one holding the end
    assert [(x["start"], x["end"]) for x in w] == [(10.0, 20.0), (20.0, 30.0), (30.0, 40.0)]
    # arrivals: enqueued in the window (not the job from before warm-up)
    assert [x["arrivals"] for x in w] == [3, 2, 0]
    # throughput: measured jobs completed in it, per second (the job from before warm-up is not measured)
    assert [x["throughput"] for x in w] == pytest.approx([0.1, 0.2, 0.1])
    # busy: slot-seconds inside the window / 10 s: (3 + 4 + 6 + 5), (2 + 6 + 8), 1
    assert [x["busy"] for x in w] == pytest.approx([1.8, 1.6, 0.1])
    # max_depth: waiting entering the window or after an arrival: 2 after t = 11 and 13; 1; 1 entering
    assert [x["max_depth"] for x in w] == [2, 1, 1]
    # waits of measured jobs by the window of their start: (0, 3, 2) -> p50 2, p95 2.9; (1); none
    assert [x["wait_p50"] for x in w] == pytest.approx([2.0, 1.0, None])
    assert w[0]["wait_p95"] == pytest.approx(2.9) and w[2]["wait_p95"] is None
    # mean_wait: the mean of the same waits: 5/3, 1, none
    assert [x["mean_wait"] for x in w] == pytest.approx([5 / 3, 1.0, None])
    # oldest: the job from before warm-up started after 7 s; the unfinished one is 6 s old at 30, 7 at 31
    assert [x["oldest_age"] for x in w] == pytest.approx([7.0, 6.0, 7.0])
    # workers: time-weighted mean processes: 2, (5 x 2 + 5 x 1) / 10, 1
    assert [x["workers"] for x in w] == [{"p": 2.0}, {"p": 1.5}, {"p": 1.0}]
    assert all(list(x) == list(WINDOW_FIELDS) for x in w)


def test_an_event_at_an_edge_belongs_to_the_window_it_opens() -> None:
    records = Records(jobs=jobs([(0.0, 0.0, 10.0, "completed"), (10.0, 10.0, 20.0, "completed")]),
                      slots=((0.0, 1),))
    w = summarize(records, scenario="s", source="model", seed=0, window=10.0)["windows"]
    # the completion at 10 is in [10, 20); the one at 20 (the end) opens a third window
    assert [x["throughput"] for x in w] == pytest.approx([0.0, 0.1, 0.1])
    assert [x["arrivals"] for x in w] == [1, 1, 0]
    assert [x["busy"] for x in w] == pytest.approx([1.0, 1.0, 0.0])


def test_no_completion_after_warmup_gives_no_window() -> None:
    records = Records(jobs=jobs([(0.0, NAN, NAN, "unfinished")]), slots=((0.0, 1),))
    assert summarize(records, scenario="s", source="model", seed=0)["windows"] == []


def test_edges_hold_every_time_however_the_floats_round() -> None:
    for warmup, length in ((0.1, 0.1), (3.0, 0.7), (0.0, 1e-3), (12.5, 60.0)):
        for end in (warmup + 17 * length, warmup + 17 * length + 1e-12, warmup + 17.5 * length, warmup + length / 3):
            edges = window_edges(warmup, end, length)
            assert edges[-2] <= end < edges[-1], (warmup, length, end)
            assert window_count(warmup, end, length) == edges.size - 1
            assert np.all(np.diff(edges) > 0)


def test_group_quantiles_are_numpys_percentiles() -> None:
    rng = np.random.default_rng(4)
    groups = [np.sort(rng.exponential(1.0, n)) for n in (1, 2, 7, 100, 0, 31)]
    values = np.concatenate(groups)
    sizes = np.array([g.size for g in groups])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for q in (0.5, 0.95, 0.99):
        got = group_quantiles(values, starts, sizes, q)
        want = [np.percentile(g, 100 * q) if g.size else np.nan for g in groups]
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_mean_steps_weighs_by_time() -> None:
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    assert mean_steps([(0.0, 4), (5.0, 2), (25.0, 6)], edges).tolist() == pytest.approx([3.0, 2.0, 4.0])


PROFILED = {
    "name": "profiled", "seed": 5, "duration": 300.0, "warmup": 17.0, "window": 13.0,
    "queues": [{"name": "a"}, {"name": "b"}],
    "jobs": [{"name": "x", "queue": "a", "arrival": {"kind": "profile", "points": [[0, 4.0], [100, 24.0], [200, 4.0]]},
              "service": {"kind": "exponential", "mean": 0.3}},
             {"name": "y", "queue": "b", "priority": 1, "arrival": {"kind": "poisson", "rate": 3.0},
              "service": {"kind": "lognormal", "mean": 0.5, "cv": 1.5}},
             {"name": "z", "queue": "a", "priority": 2, "arrival": {"kind": "burst", "size": 10,
                                                                     "points": [[0, 1.0], [150, 4.0]], "shape": "step"},
              "service": {"kind": "constant", "mean": 0.2}}],
    "pools": [{"name": "p", "queues": ["a", "b"], "workers": 3, "concurrency": 2},
              {"name": "r", "queues": ["b"], "workers": 1}],
}


def close(a: Any, b: Any, where: str = "") -> None:
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), where
    else:
        assert a == b, where


@pytest.mark.parametrize("window, warmup, seed", [(13.0, 17.0, 5), (1.0, 0.0, 6), (60.0, 30.0, 7), (283.0, 17.0, 8)])
def test_records_on_and_off_give_the_same_windows(window: float, warmup: float, seed: int) -> None:
    # Given a profiled run with two queues, priorities, bursts and two pools
    s = dataclasses.replace(Scenario.from_dict(PROFILED), window=window, warmup=warmup)
    # When it runs with records and without (streamed, bounded memory)
    kept = simulate(s, seed=seed).summary["windows"]
    streamed = simulate(s, seed=seed, records=False).summary["windows"]
    # Then the windows are the same, the quantiles exactly (one window's waits are kept as they are)
    assert len(kept) == len(streamed) > 0
    for i, (a, b) in enumerate(zip(kept, streamed)):
        close(a, b, f"window {i}")


def test_a_window_with_more_waits_than_it_keeps_folds_them_into_a_histogram(monkeypatch: pytest.MonkeyPatch) -> None:
    s = dataclasses.replace(Scenario.from_dict(PROFILED), window=60.0)
    kept = simulate(s).summary["windows"]
    monkeypatch.setattr(windowstream, "EXACT_WAITS", 50)
    streamed = simulate(s, records=False).summary["windows"]
    for a, b in zip(kept, streamed):
        for key in ("wait_p50", "wait_p95"):
            assert b[key] == pytest.approx(a[key], rel=STREAM_REL_ERROR, abs=1e-6)
        assert b["mean_wait"] == pytest.approx(a["mean_wait"], rel=1e-9)  # the sum is kept exactly
        assert b["oldest_age"] == pytest.approx(a["oldest_age"])  # the longest wait is kept exactly


def test_a_record_less_run_lends_no_view_of_its_growing_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given whatever receives a window's waits keeps what it was given (as a sampling profiler that holds a
    # frame keeps its locals: a Dask worker's did, and the run failed with "cannot resize an array that is
    # exporting buffers")
    kept: list[Any] = []
    add = windowstream.WindowSeries.add_waits
    monkeypatch.setattr(windowstream.WindowSeries, "add_waits", lambda self, values: (kept.append(values),
                                                                                        add(self, values)))
    s = dataclasses.replace(Scenario.from_dict(PROFILED), window=13.0)
    # When a record-less run goes on appending waits after each window's edge, then it finishes
    streamed = simulate(s, records=False).summary["windows"]
    # Then it gives the same windows as a run with records
    assert len(kept) > 3
    for i, (a, b) in enumerate(zip(simulate(s).summary["windows"], streamed)):
        close(a, b, f"window {i}")


def test_windows_add_up_to_the_whole_run() -> None:
    s = Scenario.from_dict({**PROFILED, "queues": [{"name": "a"}], "pools": [{"name": "p", "queues": ["a"], "workers": 4}],
                            "jobs": [dict(PROFILED["jobs"][0])]})
    r = simulate(s)
    summary, w = r.summary, r.summary["windows"]
    length = s.window_length
    end = float(r.jobs["finished"].max())
    assert w[0]["start"] == s.warmup and w[-1]["start"] <= end < w[-1]["end"]
    measured = r.jobs[r.jobs["enqueued"] >= s.warmup]
    assert sum(x["arrivals"] for x in w) == len(measured) == summary["jobs"]["arrived"]
    assert sum(x["throughput"] for x in w) * length == pytest.approx(summary["jobs"]["completed"])
    busy = sum(x["busy"] for x in w) * length
    assert busy == pytest.approx(summary["utilization"] * s.slots * (end - s.warmup))
    assert max(x["max_depth"] for x in w) == summary["by_queue"]["a"]["max_depth"]
    assert max(x["oldest_age"] for x in w) >= summary["wait"]["max"]
    assert all(x["workers"] == {"p": 4.0} for x in w)


def test_a_pools_processes_follow_its_events() -> None:
    # Given a pool of 3 that loses one process at 20 s (sigterm) and gains two at 40 s
    s = Scenario.from_dict({
        "name": "events", "seed": 1, "duration": 60.0, "window": 10.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 5.0},
                  "service": {"kind": "exponential", "mean": 0.2}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 3}],
        "events": [{"at": 25.0, "kind": "sigterm", "pool": "p", "count": 1, "grace": 5.0},
                   {"at": 40.0, "kind": "start", "pool": "p", "count": 2}]})
    w = simulate(s).summary["windows"]
    assert [x["workers"]["p"] for x in w[:6]] == pytest.approx([3, 3, 2.5, 2, 4, 4])


def test_a_window_key_is_validated_and_named() -> None:
    base = {k: v for k, v in PROFILED.items() if k != "window"}
    assert Scenario.from_dict(base).window is None and Scenario.from_dict(base).window_length == 60.0
    for bad, message in ((0, "window must be > 0, got 0"), ("60s", "window must be a number, got '60s'"),
                         (284.0, "window must be at most the measured run, duration - warmup = 283 s, got 284")):
        with pytest.raises(ScenarioError, match=message):
            Scenario.from_dict({**base, "window": bad})
    with pytest.raises(ScenarioError, match="window must be at most the measured run"):
        dataclasses.replace(Scenario.from_dict(base), window=1e4)
    assert "window" not in Scenario.from_dict(base).to_dict()
    assert Scenario.from_dict({**base, "window": 30}).to_dict()["window"] == 30.0


def test_cli_window_longer_than_the_run_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "workshop", "--window", "500"]) == 2
    err = capsys.readouterr().err
    assert "--window 500 is longer than the measured run of workshop: duration - warmup = 110 s" in err
    with pytest.raises(SystemExit) as exc:
        main(["simulate", "workshop", "--window", "0"])
    assert exc.value.code == 2 and "--window: must be > 0, got 0" in capsys.readouterr().err
