"""Record-less full runs (qsim.model.spans): the exact Summary, with each attempt's span and nothing else kept."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from qsim.model import Model, simulate
from qsim.model.spans import SpanRecords
from qsim.spec.scenario import Scenario
from qsim.spec.workload import draw_workload


def day(*, autoscaler: dict[str, Any] | None = None, job: dict[str, Any] | None = None, **top: Any) -> Scenario:
    """A short day on an autoscaled pool: quiet, then three times busier (scale-ups, then scale-downs)."""
    raw: dict[str, Any] = {
        "name": "d", "seed": 3, "duration": 480.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 1.0},
                  "arrival": {"kind": "profile", "shape": "step",
                              "points": [[0, 1.0], [160, 1.0], [160, 4.0], [320, 4.0], [320, 0.5]]},
                  **(job or {})}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4}],
        "autoscalers": [{"pool": "p", "min": 1, "max": 30, "poll": 15.0, "policy": "hpa", "target": 2,
                         "scale_down_stabilization": 30.0, "cooldown": 30.0, **(autoscaler or {})}],
    }
    raw.update(top)
    return Scenario.from_dict(raw)


CASES = {
    "list length": day(),
    "p95 wait (the log keeps jobs)": day(autoscaler={"metric": "p95_wait", "target": 1.0}),
    "in flight (the log keeps jobs)": day(autoscaler={"metric": "in_flight", "target": 1}),
    "short grace (cut-offs)": day(autoscaler={"grace": 0.2}),
    "overheads and warm-up": day(engine={"fetch_overhead": 0.05, "ack_overhead": 0.02}, warmup=60.0, window=30.0),
    "retries and timeouts": day(job={"fail_prob": 0.2, "attempts": 3, "timeout": 3.0}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_records_off_gives_the_summary_of_records_on_to_the_last_bit(name: str) -> None:
    # Given a full run (autoscaled), records on and off with the same seed
    s = CASES[name]
    on, off = simulate(s, records=True), simulate(s, records=False)
    # Then the Summaries are equal (floats compared exactly), and the run did scale
    assert off.summary == on.summary
    assert on.summary["autoscaling"]["p"]["scale_events"] >= 2
    assert on.summary["jobs"]["completed"] > 500


def test_cut_offs_and_failures_happen_in_the_cases() -> None:
    # (the cases above cover attempts that end other than ok: a records-off log must place them too)
    cut = simulate(CASES["short grace (cut-offs)"], records=False).summary["autoscaling"]["p"]
    failed = simulate(CASES["retries and timeouts"], records=False).summary["jobs"]
    assert cut["cut_jobs"] > 0
    assert failed["failed_attempts"] > 0 and failed["dead"] > 0


def test_records_off_keeps_nothing_per_attempt_while_attempts_start_in_job_order() -> None:
    # Given a records-off autoscaled run on list length: one FIFO line, no failure, no cut-off
    m = Model(draw_workload(CASES["list length"]), records=False)
    rec = m.core.recorder
    assert isinstance(rec, SpanRecords)
    m.run()
    log = rec.spans
    # Then every attempt is its job's only one, in job order: the log holds no column at all
    assert not log.explicit and len(log) == log.derived == m.jobs.n > 500
    assert len(log.start) == len(log.end) == len(log.job) == len(log.number) == len(log.worker) == 0
    start, end = log.spans()  # read from the job table
    assert np.array_equal(start, np.frombuffer(m.jobs.started)) and not np.isnan(end).any()


def test_records_off_keeps_start_and_end_once_an_attempt_is_cut_off() -> None:
    # Given a run whose scale-downs cut attempts off (they run again: a job has two attempts)
    m = Model(draw_workload(CASES["short grace (cut-offs)"]), records=False)
    m.run()
    log = m.core.recorder.spans  # type: ignore[attr-defined]
    # Then the log turned explicit: a start and an end per attempt, and no job, number, worker or result
    assert log.explicit and len(log.start) == len(log.end) == len(log) > m.jobs.n > 500
    assert len(log.job) == len(log.number) == len(log.worker) == len(log.result) == 0
    assert not np.isnan(np.frombuffer(log.end)).any()  # every attempt ended (and was logged so)


def test_an_autoscaler_reading_the_log_gets_jobs_and_numbers() -> None:
    # Given a policy on the p95 wait (it reads each attempt's job and number as the run goes)
    m = Model(draw_workload(CASES["p95 wait (the log keeps jobs)"]), records=False)
    m.run()
    log = m.core.recorder.spans  # type: ignore[attr-defined]
    # Then those columns are kept, and only those
    assert len(log.job) == len(log.number) == len(log.start) > 500
    assert len(log.worker) == len(log.result) == 0
    assert np.frombuffer(log.number, dtype=np.int32).min() == 1


def test_a_full_run_where_no_attempt_fails_logs_every_attempt_ok() -> None:
    # Given an autoscaled run with records (no retry, timeout or flow: attempts complete in the core)
    r = simulate(CASES["list length"], records=True)
    a, j = r.records.attempts, r.jobs
    # Then each attempt is logged ok, ending when its job finished
    assert len(a) == len(j) and set(a["result"]) == {"ok"}
    assert np.array_equal(a["end"].to_numpy(), j.set_index("job_id").loc[a["job_id"], "finished"].to_numpy())
