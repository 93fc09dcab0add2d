"""A completed job's last attempt is read from its hash's fields, not its log (qsim/engine/jobinfo.py)."""

from __future__ import annotations

from qsim.engine.jobinfo import JobInfo, attempt_log

DONE = {"name": "t", "data": "{}", "state": "completed", "attempt_started": "10.5", "finished_at": "11.25",
        "worker": "w2", "attempts_made": "2"}


def test_a_completed_jobs_last_attempt_is_added_after_its_failed_ones() -> None:
    h = {**DONE, "log": "9.0,9.5,failed,w1;"}
    assert attempt_log(h) == "9.0,9.5,failed,w1;10.5,11.25,completed,w2;"
    attempts = JobInfo.from_hash("q", "j", h).attempts
    assert [(a.start, a.end, a.outcome, a.worker) for a in attempts] == [(9.0, 9.5, "failed", "w1"),
                                                                      (10.5, 11.25, "completed", "w2")]


def test_a_log_written_by_an_earlier_engine_is_not_given_the_attempt_twice() -> None:
    h = {**DONE, "log": "9.0,9.5,failed,w1;10.5,11.25,completed,w2;"}
    assert attempt_log(h) == h["log"]


def test_only_a_completed_job_gains_an_attempt() -> None:
    for state in ("waiting", "active", "dead"):
        h = {**DONE, "state": state, "log": "9.0,9.5,failed,w1;"}
        assert attempt_log(h) == h["log"]
    assert attempt_log({**DONE, "attempt_started": None}) == ""  # a hash edited by hand: nothing to add
