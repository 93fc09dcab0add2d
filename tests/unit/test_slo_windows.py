"""SLOs over windows: ``p95_wait<=2 in 95% of windows`` and ``p95_wait<=2 in every window``.

The grammar (forms, spellings, bad input naming what is wrong), the per-run
value each form reads from a Summary's ``windows``, and how a plan judges it.
"""

from __future__ import annotations

from typing import Any

import pytest

from qsim.analysis.slo.language import SLO, parse_slo
from qsim.analysis.slo.windowed import WindowMetric
from qsim.analysis.stats import estimate
from qsim.errors import ScenarioError


def summary(*p95: float | None, depth: int = 0) -> dict[str, Any]:
    """A Summary holding only windows of 60 s with these p95 waits."""
    return {"windows": [{"start": 60.0 * i, "end": 60.0 * (i + 1), "wait_p95": v, "wait_p50": v, "throughput": 1.0,
                         "oldest_age": 2 * v if v is not None else 0.0, "max_depth": depth, "busy": 1.0,
                         "arrivals": 60} for i, v in enumerate(p95)]}


@pytest.mark.parametrize("text, canonical, scope, share", [
    ("p95_wait<=2", "p95_wait<=2", "run", None),
    ("p95_wait<=2 in 95% of windows", "p95_wait<=2 in 95% of windows", "share", 0.95),
    ("  p95_wait <= 2   in 99.5 % of the windows ", "p95_wait<=2 in 99.5% of windows", "share", 0.995),
    ("p95_wait<=2 in every window", "p95_wait<=2 in every window", "every", None),
    ("p95_wait<=2 in the worst window", "p95_wait<=2 in every window", "every", None),
    ("p95_wait<=2 in worst window", "p95_wait<=2 in every window", "every", None),
    ("oldest_age<30 in 100% of windows", "oldest_age<30 in 100% of windows", "share", 1.0),
    ("throughput>=5 in every window", "throughput>=5 in every window", "every", None),
])
def test_forms_parse_and_print_back(text: str, canonical: str, scope: str, share: float | None) -> None:
    slo = parse_slo(text)
    assert (str(slo), slo.scope, slo.share) == (canonical, scope, share)
    assert parse_slo(str(slo)) == slo
    assert slo.windowed == (scope != "run")


@pytest.mark.parametrize("text, message", [
    ("p95_wait<=2 in 0% of windows", "above 0% and at most 100%, got 0%"),
    ("p95_wait<=2 in 120% of windows", "above 0% and at most 100%, got 120%"),
    ("p95_wait<=2 in many% of windows", "a percentage like 95%, got 'many%'"),
    ("p95_wait<=2 in most windows", "must look like 'p95_wait<=2 in 95% of windows'"),
    ("p99_wait<=2 in every window", "must be one of p50_wait, p95_wait, throughput, oldest_age"),
    ("p95_wait[cut]<=2 in every window", "no per-type form"),
    ("p95_wait<=soon in every window", "value must be a number, got 'soon'"),
    ("oldest_age<=30", "oldest_age is a per-window figure: say 'oldest_age<=30 in every window'"),
])
def test_bad_forms_name_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("(", r"\(").replace("%", "%")):
        parse_slo(text)


def test_share_of_windows_is_the_fraction_meeting_the_test_among_windows_with_a_value() -> None:
    # Given 5 windows with p95 waits 1, 3, 1, none (nothing started), 1
    s = summary(1.0, 3.0, 1.0, None, 1.0)
    slo = parse_slo("p95_wait<=2 in 75% of windows")
    # Then the per-run value is 3 of the 4 windows with a value, and 0.75 >= 0.75 meets it
    assert slo.measure(s) == pytest.approx(0.75)
    assert slo.met(s)
    assert not parse_slo("p95_wait<=2 in 80% of windows").met(s)
    assert slo.target.key == "share_of_windows(p95_wait<=2)"
    assert slo.target.bounds == (0.0, 1.0) and not slo.upper


def test_every_window_is_the_worst_windows_figure() -> None:
    s = summary(1.0, 3.0, None, 1.5)
    upper = parse_slo("p95_wait<=2 in every window")
    assert upper.measure(s) == 3.0 and not upper.met(s)
    assert parse_slo("p95_wait<=3 in every window").met(s)
    lower = parse_slo("p95_wait>=1.2 in every window")  # the worst is the smallest for >=
    assert lower.measure(s) == 1.0 and not lower.met(s)
    assert upper.target.key == "max_over_windows(p95_wait)" and lower.target.key == "min_over_windows(p95_wait)"


def test_no_window_with_a_value_meets_nothing() -> None:
    for text in ("p95_wait<=2 in every window", "p95_wait<=2 in 50% of windows"):
        assert parse_slo(text).measure(summary(None, None)) is None
        assert not parse_slo(text).met(summary(None, None))
        assert not parse_slo(text).met({"windows": []})


def test_a_span_keeps_only_the_windows_inside_it() -> None:
    s = summary(5.0, 1.0, 1.0, 5.0)  # windows [0,60) [60,120) [120,180) [180,240)
    peak = parse_slo("p95_wait<=2 in every window").during(60.0, 180.0, "peak")
    assert peak.measure(s) == 1.0 and peak.met(s)
    assert peak.target.key == "max_over_windows(p95_wait)@peak"
    # a plain SLO judged during a span: in every window of it
    plain = parse_slo("p95_wait<=2").during(0.0, 120.0, "peak")
    assert plain.scope == "every" and plain.measure(s) == 5.0
    assert isinstance(plain.target, WindowMetric)


def test_plan_checks_a_share_by_the_lower_bound_of_its_interval() -> None:
    slo = parse_slo("p95_wait<=2 in 90% of windows")
    assert slo.check(estimate([0.95, 0.97, 0.96], 0.95)) == "met"
    assert slo.check(estimate([0.85, 0.84, 0.86], 0.95)) == "failed"
    assert slo.check(estimate([0.80, 1.0, 0.95], 0.95)) == "undecided"
    worst = parse_slo("p95_wait<=2 in every window")
    assert worst.check(estimate([1.0, 1.1, 1.2], 0.95)) == "met"
    assert worst.check(estimate([3.0, 3.1, 2.9], 0.95)) == "failed"


def test_plain_slos_are_unchanged() -> None:
    slo = parse_slo("p95_wait[cut]<=2")
    assert slo == SLO(metric="p95_wait", op="<=", value=2.0, job_type="cut")
    assert slo.target.key == "p95_wait[cut]"
