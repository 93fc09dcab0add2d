"""The BullMQ target without Redis: options from a scenario, payload templates, queue maps, the
threshold judge and when a run is doomed (``--abort-on-fail``), the asyncio loop thread."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest

from qsim.analysis.slo.language import parse_slo
from qsim.analysis.slo.thresholds import format_verdicts, judge, verdict_document
from qsim.bullmq.compare import queue_map
from qsim.bullmq.options import MAX_PRIORITY, check_supported, child_options, job_options, notes, priorities
from qsim.errors import NotSupportedError, ScenarioError
from qsim.loadtest.aioloop import LoopThread
from qsim.loadtest.config import split_slos
from qsim.loadtest.targets import Finished
from qsim.loadtest.thresholds import doomed
from qsim.spec.scenario import Scenario
from qsim.spec.templates import render


def scenario(*jobs: dict[str, Any], queues: tuple[str, ...] = ("q",), **top: Any) -> Scenario:
    raw = {"name": "s", "duration": 10.0, "queues": [{"name": q} for q in queues],
           "pools": [{"name": "p", "queues": list(queues)}], **top,
           "jobs": [{"queue": "q", "service": {"kind": "constant", "mean": 0.1}, **j} for j in jobs]}
    return Scenario.from_dict(raw)


ARRIVES = {"arrival": {"kind": "poisson", "rate": 10.0}}


def test_bullmq_options_follow_the_scenario() -> None:
    s = scenario({"name": "a", **ARRIVES, "priority": 2, "attempts": 3,
                  "backoff": {"kind": "exponential", "delay": 0.5, "max": 0.8, "jitter": 0.2}},
                 {"name": "b", "priority": 5}, {"name": "c", "priority": 2})
    # per queue the lowest priority is BullMQ's default (no priority), the others offset from it
    assert priorities(s) == {"a": 0, "b": 3, "c": 0}
    assert job_options(s.job("a"), "lt-a-0") == {
        "jobId": "lt-a-0", "attempts": 3, "backoff": {"type": "exponential", "delay": 500, "jitter": 0.2}}
    assert job_options(s.job("b"), "x", 3) == {"jobId": "x", "priority": 3}
    assert child_options(s.job("b"), "p.0", 3, "fail")["failParentOnFailure"] is True
    assert child_options(s.job("b"), "p.0", 3, "ignore")["ignoreDependencyOnFailure"] is True
    # what BullMQ does not mirror is said: the cap binds before the third attempt (0.5 * 2 > 0.8)
    assert any("no cap" in n for n in notes(s))
    with pytest.raises(NotSupportedError, match="more than BullMQ's largest"):
        priorities(scenario({"name": "a", **ARRIVES}, {"name": "b", "priority": MAX_PRIORITY + 1}))


def test_compare_refuses_what_bullmq_workers_cannot_match() -> None:
    fan = scenario({"name": "a", **ARRIVES, "fan_out": {"job": "k", "count": 2}}, {"name": "k"})
    check_supported(fan)  # the load test adds the parents only
    with pytest.raises(NotSupportedError, match="fan_out"):
        check_supported(fan, compare=True)
    events = scenario({"name": "a", **ARRIVES}, events=[{"at": 1.0, "kind": "sigkill", "pool": "p"}])
    with pytest.raises(NotSupportedError, match=r"\[\[events\]\]"):
        check_supported(events, compare=True)


def test_queue_map() -> None:
    one = scenario({"name": "a", **ARRIVES})
    assert queue_map(one, ["orders"]) == {"q": "orders"}
    two = scenario({"name": "a", **ARRIVES}, {"name": "b", "queue": "r"}, queues=("q", "r"))
    assert queue_map(two, ["q=orders", "r"]) == {"q": "orders", "r": "r"}
    with pytest.raises(ScenarioError, match="no queue 'x'"):
        queue_map(two, ["x=orders", "r"])
    with pytest.raises(ScenarioError, match="no BullMQ queue given for the scenario's queue r"):
        queue_map(two, ["q"])
    with pytest.raises(ScenarioError, match="--queue"):
        queue_map(one, [])


def test_payload_templates_render_per_job() -> None:
    s = scenario({"name": "a", **ARRIVES, "payload": {"id": "{job_id}", "n": "{n}", "t": "{type}@{queue} {{x}}",
                                                      "list": ["{run_id}", 1, True]}})
    assert render(s.job("a").payload, job_id="lt-a-3", n=3, type="a", queue="q", run_id="lt") == {
        "id": "lt-a-3", "n": 3, "t": "a@q {x}", "list": ["lt", 1, True]}
    with pytest.raises(ScenarioError, match=r"jobs\[0\].payload.bad names an unknown placeholder \{nope\}"):
        scenario({"name": "a", **ARRIVES, "payload": {"bad": "{nope}"}})
    with pytest.raises(ScenarioError, match="unmatched"):
        scenario({"name": "a", **ARRIVES, "payload": {"bad": ["x}"]}})


def test_slo_parser_takes_equality_and_thresholds_split() -> None:
    slo = parse_slo("lost==0")
    assert (slo.metric, slo.op, slo.value, str(slo)) == ("lost", "==", 0.0, "lost==0")
    assert split_slos("p95_wait<=2; lost==0;") == ("p95_wait<=2", "lost==0")
    assert split_slos(["p95_wait<=2", "dead<=1"]) == ("p95_wait<=2", "dead<=1")


SUMMARY = {"jobs": {"dead": 2, "lost": 0}, "throughput": 5.0, "utilization": 0.0,
           "wait": {"p95": 1.5}, "latency": {"p95": None},
           "by_type": {"cut": {"wait": {"p95": 0.5}, "latency": {"p95": 0.7}}}}


def test_judge_and_the_verdict_table() -> None:
    slos = [parse_slo(t) for t in ("p95_wait<=2", "lost==0", "dead<2", "p95_latency<=1", "p95_latency[cut]<1",
                                   "p95_wait[gone]<=1")]
    rows = judge(SUMMARY, slos)
    assert [(r.threshold, r.passed) for r in rows] == [
        ("p95_wait<=2", True), ("lost==0", True), ("dead<2", False), ("p95_latency<=1", False),
        ("p95_latency[cut]<1", True), ("p95_wait[gone]<=1", False)]
    assert rows[3].note == "no data" and rows[5].note == "no data"
    doc = verdict_document(rows)
    assert doc["passed"] is False and doc["failed"] == ["dead<2", "p95_latency<=1", "p95_wait[gone]<=1"]
    text = format_verdicts(rows[:2])
    assert text.endswith("thresholds passed: 2 of 2") and "lost==0" in text


def fake_run(ended: list[Finished], *, open_window: bool, rate: float = 10.0, window: float = 10.0) -> Any:
    s = scenario({"name": "cut", **ARRIVES})
    return SimpleNamespace(ended={j.job_id: j for j in ended}, added_jobs={j.job_id: ("q", j.type, 0.0) for j in ended},
                           rates={"cut": rate}, window=window, scenario=s, window_open=lambda: open_window)


def job(i: int, wait: float, latency: float, outcome: str = "completed") -> Finished:
    return Finished(f"j{i}", "cut", "q", outcome, 0.0, wait, latency, None)


def test_doomed_only_when_no_later_job_can_save_the_threshold() -> None:
    slow = [job(i, 3.0, 3.5) for i in range(5)]
    run = fake_run(slow, open_window=True)  # up to ceil(10 * 10 * 1.1) + 20 = 130 jobs may still come
    slos = [parse_slo(t) for t in ("p95_wait<=2", "max_latency<=3", "mean_wait<=0.1", "dead<=0", "throughput>=1")]
    # max and mean are past saving: 3.5 > 3, and 15 s over 130 jobs > 0.1; the p95 needs 8 slow waits of 130 (130 - floor(129 * 0.95))
    assert doomed(run, slos) == ["max_latency<=3", "mean_wait<=0.1"]
    more = fake_run([job(i, 3.0, 1.0) for i in range(8)] + [job(9, 0.0, 1.0, "dead")], open_window=True)
    assert doomed(more, slos[:1] + slos[3:]) == ["p95_wait<=2", "dead<=0"]
    # once the window closed, the jobs added are all there will be: 2 slow waits of 10 break a p95
    closed = fake_run([job(i, 3.0, 3.5) for i in range(2)] + [job(i, 0.1, 0.2) for i in range(2, 10)], open_window=False)
    assert doomed(closed, [parse_slo("p95_wait<=2"), parse_slo("p50_wait<=2")]) == ["p95_wait<=2"]


def test_loop_thread_runs_coroutines_for_plain_threads() -> None:
    loop = LoopThread().start()
    try:
        async def twice(x: int) -> int:
            await asyncio.sleep(0)
            return 2 * x

        assert loop.call(lambda: twice(21)) == 42

        async def boom() -> None:
            raise ValueError("from the loop")

        with pytest.raises(ValueError, match="from the loop"):
            loop.call(boom)
    finally:
        loop.stop()
    assert loop.loop is None and not math.isnan(0.0)


@pytest.mark.parametrize("args, message", [
    (["--target", "bullmq", "--queue", "orders"], "--target bullmq needs --redis URL"),
    (["--queue", "orders"], "--queue and --prefix name BullMQ queues: use them with --target bullmq"),
    (["--target", "bullmq", "--redis", "redis://127.0.0.1:1/0"], "name the BullMQ queue with --queue"),
    (["--target", "bullmq", "--redis", "redis://127.0.0.1:1/0", "--queue", "a=b"], "the scenario has no queue 'a'"),
])
def test_compare_target_bullmq_refuses_bad_input_before_anything_runs(
        args: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from qsim.cli import main

    monkeypatch.delenv("REDIS_URL", raising=False)
    assert main(["compare", "workshop", *args]) == 2
    assert message in capsys.readouterr().err
