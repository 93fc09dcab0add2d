"""The backoff rule, written once (qsim.spec.backoff): the engine's Backoff gives its numbers attempt for attempt."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qsim.engine import Backoff
from qsim.spec.backoff import MAX_BACKOFF, backoff_delay, backoff_ms


@pytest.mark.parametrize(("kind", "delay", "cap", "failed", "want"), [
    ("fixed", 2.0, None, 1, 2.0),
    ("fixed", 2.0, None, 7, 2.0),
    ("exponential", 0.5, None, 1, 0.5),
    ("exponential", 0.5, None, 4, 4.0),
    ("exponential", 0.5, 3.0, 4, 3.0),
    ("exponential", 1.0, None, 0, 1.0),  # below 1 counts as the first failure
    ("exponential", 1.0, None, 10**6, MAX_BACKOFF),
])
def test_fixed_and_exponential_delays(kind: str, delay: float, cap: float | None, failed: int, want: float) -> None:
    assert backoff_delay(kind, delay, failed, cap=cap) == pytest.approx(want)


def test_jitter_takes_off_at_most_its_fraction_and_ms_round_down() -> None:
    assert backoff_delay("fixed", 10.0, 1, jitter=0.3, u=0.0) == 10.0
    assert backoff_delay("fixed", 10.0, 1, jitter=0.3, u=0.999) == pytest.approx(7.003)
    assert backoff_ms("fixed", 0.0019, 1) == 1
    assert backoff_ms("exponential", 0.001, 3, jitter=0.5, u=0.5) == 3


@given(kind=st.sampled_from(["fixed", "exponential"]), delay=st.floats(0, 1000), failed=st.integers(1, 80),
       cap=st.none() | st.floats(0, 10_000), jitter=st.floats(0, 1), seed=st.integers(0, 2**32))
def test_the_engine_backoff_is_the_base_rule(kind: str, delay: float, failed: int, cap: float | None,
                                             jitter: float, seed: int) -> None:
    # Given the engine's Backoff and the base rule fed the same uniform draw
    b = Backoff(kind, delay, cap, jitter)
    u = random.Random(seed).random() if jitter else 0.0
    # Then they give the same delay, and the same whole milliseconds
    assert b.delay_for(failed, random.Random(seed)) == backoff_delay(kind, delay, failed, cap=cap, jitter=jitter, u=u)
    assert b.delay_ms(failed, random.Random(seed)) == backoff_ms(kind, delay, failed, cap=cap, jitter=jitter, u=u)


@pytest.mark.parametrize("spec", [
    {"kind": "fixed", "delay": 2.0, "max": 1.0, "jitter": 0.0},
    {"kind": "fixed", "delay": 0.25, "max": 60.0, "jitter": 0.4},
    {"kind": "exponential", "delay": 0.1, "max": 3.0, "jitter": 0.0},
    {"kind": "exponential", "delay": 0.0123, "max": 60.0, "jitter": 0.9},
])
def test_model_and_harness_give_the_same_delays_attempt_for_attempt(spec: dict[str, float | str]) -> None:
    # Given a job type with retries, the engine Backoff the harness adds its jobs with, and the model's rule
    from qsim.harness.plan import engine_options, job_options
    from qsim.model.retries import backoff_delay as model_delay
    from qsim.spec.dists import Constant
    from qsim.spec.scenario import BackoffSpec, JobType

    b = BackoffSpec(**spec)  # type: ignore[arg-type]
    job = JobType(name="t", queue="q", service=Constant(mean=0.1), attempts=12, backoff=b)
    engine = engine_options(job_options(job), "t-1")["backoff"]
    for failed in range(1, 12):
        for u in (0.0, 0.37, 0.999):
            class Draw:
                def random(self) -> float:
                    return u
            # Then every retry waits the same whole milliseconds on both sides
            assert engine.delay_ms(failed, Draw()) == round(model_delay(b, failed, u) * 1000)
