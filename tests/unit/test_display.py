"""How results read: compact reprs and HTML tables (qsim.results.display) for model, engine and comparison results."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from qsim import Scenario
from qsim.analysis.fidelity.check import Tolerance
from qsim.analysis.fidelity.compare import Comparison, compare_summaries
from qsim.cli.common import print_json
from qsim.harness.run import EngineResult
from qsim.model import ModelResult, simulate
from qsim.results.display import escape, num, summary_html, table

SCENARIO = Scenario.from_dict({
    "name": "shop<&>", "seed": 1, "duration": 40.0,
    "queues": [{"name": "q&1"}],
    "jobs": [{"name": "<b>cut</b>", "queue": "q&1", "arrival": {"kind": "poisson", "rate": 5.0},
              "service": {"kind": "exponential", "mean": 0.3}, "poison_prob": 0.05}],
    "pools": [{"name": "p", "queues": ["q&1"], "workers": 1, "concurrency": 2}],
})


@pytest.fixture(scope="module")
def run() -> ModelResult:
    return simulate(SCENARIO)


def test_num_and_table_escape() -> None:
    assert [num(x) for x in (None, float("nan"), 1234, 0.012345, 33.0, 1234.4)] == \
        ["-", "-", "1,234", "0.0123", "33", "1,234"]
    assert num(0.5, " s") == "0.5 s" and num(float("inf")) == "inf"
    page = table(["<h>"], [["<script>"], [1.5]], bold=[1])
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;h&gt;" in page
    assert page.count("<tr") == 3 and '<tr style="font-weight:bold"><td>1.5</td>' in page
    assert escape('a"&') == "a&quot;&amp;"


def test_model_result_repr_is_one_line_and_html_shows_key_figures(run: ModelResult) -> None:
    s = run.summary
    text = repr(run)
    assert "\n" not in text and len(text) < 200 and text.startswith("ModelResult('shop<&>', seed 1: throughput ")
    assert f"wait p50 {num(s['wait']['p50'])} s p95 {num(s['wait']['p95'])} s" in text
    assert f"{s['jobs']['dead']} dead" in text and s["jobs"]["dead"] > 0
    page = run._repr_html_()
    # the key figures first: throughput in the headline, then the all-jobs row, then the type and queue rows
    assert page.index(f"throughput {num(s['throughput'])}/s") < page.index("<table")
    assert page.index(num(s["wait"]["p95"])) < page.index("type &lt;b&gt;cut&lt;/b&gt;") < page.index("q&amp;1")
    assert "<b>cut</b>" not in page and "shop&lt;&amp;&gt;" in page
    assert f"{s['jobs']['dead']} dead" in page and "0 lost" in page
    slim = replace(run, records=None)
    assert "records not kept" in repr(slim) and "records not kept" in slim._repr_html_()


def test_engine_result_shows_unsettled_queues(run: ModelResult) -> None:
    summary = {**run.summary, "source": "engine"}
    engine = EngineResult(records=run.records, summary=summary, timeseries=run.timeseries,  # type: ignore[arg-type]
                          drain_timeout=30.0, unsettled={"q&1": {"active": 2}})
    text = repr(engine)
    assert "\n" not in text and text.startswith("EngineResult('shop<&>', seed 1: throughput ")
    assert "1 queue(s) unsettled" in text
    page = engine._repr_html_()
    assert "Engine run of shop&lt;&amp;&gt;" in page and "queue q&amp;1: 2 active when the 30 s drain" in page


def test_comparison_is_the_json_document_and_reads_at_a_glance(run: ModelResult,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    other = simulate(SCENARIO, seed=2).summary
    doc = compare_summaries(run.summary, other)
    plain = {"model": run.summary, "engine": other, "ratios": dict(doc["ratios"])}
    assert isinstance(doc, Comparison) and doc == plain
    print_json(doc)
    mine = capsys.readouterr().out
    print_json(plain)
    assert mine == capsys.readouterr().out  # byte-identical JSON
    assert json.dumps(doc) == json.dumps(plain)
    # unchecked: ratios, no verdict
    assert doc.passed is None and "not checked" in doc._repr_html_()
    text = repr(doc)
    assert "\n" not in text and len(text) < 300 and "throughput" in text and "wait.p95" in text
    # checked: the verdicts, the failures in bold, the JSON gains exactly the `check` part
    checked = doc.checked(scenario=SCENARIO)
    assert set(checked) == set(plain) | {"check"} and "check" not in doc
    frame = checked.frame()
    assert list(frame["quantity"][:5]) == ["throughput", "wait.p50", "wait.p95", "latency.p50", "latency.p95"]
    assert "by_type.<b>cut</b>.wait.p95" in set(frame["quantity"])
    page = checked._repr_html_()
    failed = checked["check"]["failed"]
    assert checked.passed is (not failed)
    assert ("check passed" in page) if not failed else ("check FAILED" in page and failed[0] in page)
    assert "±10% or 0.02 s" in page and "±3%" in page and "<b>cut</b>" not in page
    assert page.count('<tr style="font-weight:bold">') == len(failed)
    loose = doc.checked({"wait.p95": Tolerance(10.0, 10.0)})
    assert loose.passed and "check passed: 1 of 1" in loose._repr_html_() and "passed" in repr(loose)


def test_summary_html_without_queues_or_types() -> None:
    page = summary_html({"jobs": {"arrived": 0}, "throughput": 0.0, "wait": {}, "latency": {}}, title="empty")
    assert "<b>empty:</b>" in page and page.count("<table") == 1 and "all jobs" in page
