"""tests/waiting.py's ``measured_until_passed``: the rule the engine's timing checks measure again by."""

from __future__ import annotations

import pytest

from waiting import ATTEMPTS, measured_until_passed


def test_a_passing_run_is_measured_once() -> None:
    assert measured_until_passed(lambda: "ok", lambda run: run == "ok") == ["ok"]


def test_a_failed_run_is_measured_again_until_one_passes_and_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = iter([False, True, False])
    assert measured_until_passed(lambda: next(verdicts), bool, describe=lambda v: f"verdict {v}") == [False, True]
    assert "run 1 of 2 failed, measured again:\nverdict False" in capsys.readouterr().out


def test_an_engine_that_is_always_off_fails_every_attempt_and_the_last_is_judged() -> None:
    runs = measured_until_passed(lambda: 0.85, lambda ratio: ratio >= 0.97)
    assert runs == [0.85] * ATTEMPTS and ATTEMPTS == 3
